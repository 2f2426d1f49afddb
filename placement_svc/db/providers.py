"""Resource providers: rows, trees and the generation every write is guarded by."""

from __future__ import annotations

import datetime
import functools
import operator
import re
from collections.abc import Collection, Iterable, Sequence
from typing import TYPE_CHECKING, Any, NamedTuple

import sqlalchemy as sa
from sqlalchemy.engine import Connection
from sqlalchemy.exc import IntegrityError
from sqlalchemy.ext.compiler import compiles
from sqlalchemy.sql.functions import FunctionElement

from placement_svc.db import filters, holds, names, tables
from placement_svc.db.exceptions import (
    ConcurrentUpdate,
    ParentProviderNotFound,
    ProviderExists,
    ProviderHasChildren,
    ProviderInUse,
    ProviderNotFound,
    UnknownResourceClass,
    UnknownTrait,
)
from placement_svc.db.records import inserted_id, statement_savepoint

if TYPE_CHECKING:
    from placement_svc.queryparams import AggregateFilter, TraitFilter

RP = tables.resource_providers


class Provider(NamedTuple):
    """A provider as read, with its parent's and root's uuids. A named tuple:
    a list of thousands is made for every provider list, and a frozen
    dataclass took five times as long to make."""

    id: int
    uuid: str
    name: str
    generation: int
    parent_id: int | None
    root_id: int
    parent_uuid: str | None
    root_uuid: str
    # Its last change: updated_at, or created_at when it never changed
    # (coalesced in SQL, one column for a list to read and compare).
    modified: datetime.datetime | None


class ListedProvider(NamedTuple):
    """A provider as a list reads it: what its body in a list is made of,
    and no more. A list of thousands is the read operators and nova's
    periodic tasks make most: on SQLite these are the rows as the driver
    gave them (SQLAlchemy's rows of the same columns in this order, which
    read alike by position and by name), not a Provider made of each (a
    fifth of the list's time); on PostgreSQL and through PyMySQL, made of
    the rows as cheaply as a tuple (``_with_uuids``, ``_unpacked``).

    ``uuids`` is the provider's uuid, its parent's (empty for a root) and
    its root's, joined by ``|`` (no uuid holds one; in SQL, or on
    PostgreSQL by ``_with_uuids``): one text, so
    that a list keeps what each provider's body holds but for its name and
    generation under one key (api/resource_providers.list_json).
    ``modified`` is its last change as ISO text, on PostgreSQL as a time
    (see ``_Sortable``)."""

    id: int
    uuids: str
    name: str | None
    generation: int | None
    modified: str | datetime.datetime | None

    @property
    def uuid(self) -> str:
        return self.uuids.split("|")[0]

    @property
    def parent_uuid(self) -> str | None:
        return self.uuids.split("|")[1] or None

    @property
    def root_uuid(self) -> str:
        return self.uuids.split("|")[2]


class Listed(NamedTuple):
    """A list of providers and the newest change among them. Its providers
    are ListedProviders (rows of their columns), whose times are text: a
    list's answer needs only the newest, and making a time of each row cost
    a fifth of a list of thousands on SQLite and a third on MariaDB
    (PyMySQL makes each in Python); the times are compared as text (the ISO
    form each database writes sorts as the times do), and the newest alone
    made a time."""

    providers: Sequence[ListedProvider]
    newest: datetime.datetime | None


class _IsoText(FunctionElement[str]):
    """A time as ISO text ("2026-11-26 13:21:21.994069"), which sorts as the
    times do: MariaDB's and SQLite's CAST writes that form; PostgreSQL's
    would follow the session's DateStyle, so its to_char names the form."""

    type = sa.String()
    inherit_cache = True
    name = "iso_text"


@compiles(_IsoText)
def _iso_text(element: _IsoText, compiler: Any, **kw: Any) -> str:
    return f"CAST({compiler.process(element.clauses, **kw)} AS CHAR)"


@compiles(_IsoText, "postgresql")
def _iso_text_postgresql(element: _IsoText, compiler: Any, **kw: Any) -> str:
    return f"to_char({compiler.process(element.clauses, **kw)}, 'YYYY-MM-DD HH24:MI:SS.US')"


class _Sortable(_IsoText):
    """A time in a form that sorts as the times do: _IsoText's, but on
    PostgreSQL the time itself, which psycopg reads in C (to_char cost a
    list of 1,000 providers 0.8 ms more). ``_time`` takes either."""

    inherit_cache = True
    name = "sortable_time"


@compiles(_Sortable, "postgresql")
def _sortable_postgresql(element: _Sortable, compiler: Any, **kw: Any) -> str:
    return compiler.process(element.clauses, **kw)


def _build_select() -> sa.Select:
    parent = RP.alias("parent")
    root = RP.alias("root")
    return sa.select(
        RP.c.id,
        RP.c.uuid,
        RP.c.name,
        RP.c.generation,
        RP.c.parent_provider_id,
        RP.c.root_provider_id,
        parent.c.uuid.label("parent_uuid"),
        root.c.uuid.label("root_uuid"),
        sa.func.coalesce(RP.c.updated_at, RP.c.created_at).label("modified"),
    ).select_from(_tree_join(parent, root))


def _tree_join(parent: Any, root: Any) -> Any:
    """Each provider with its parent and its root, when it has them."""
    return RP.outerjoin(parent, parent.c.id == RP.c.parent_provider_id).outerjoin(
        root, root.c.id == RP.c.root_provider_id
    )


_MODIFIED_AT = sa.func.coalesce(RP.c.updated_at, RP.c.created_at)


def _build_list_select() -> sa.Select:
    """ListedProvider's columns: the uuids joined in SQL (a root that has
    no root id yet, as upstream wrote some, is its own root)."""
    parent = RP.alias("parent")
    root = RP.alias("root")
    bar = sa.literal_column("'|'", sa.String())
    empty = sa.literal_column("''", sa.String())
    uuids = (
        RP.c.uuid + bar + sa.func.coalesce(parent.c.uuid, empty) + bar
        + sa.func.coalesce(root.c.uuid, RP.c.uuid)
    )  # fmt: skip
    modified = _Sortable(_MODIFIED_AT)
    return sa.select(
        RP.c.id,
        uuids.label("uuids"),
        RP.c.name,
        RP.c.generation,
        modified.label("modified"),
    ).select_from(_tree_join(parent, root))


# Built once: statements are immutable, each use adds its WHERE to a copy
# (building the aliases anew for every read cost more than running it).
_SELECT = _build_select()
_LIST_SELECT = _build_list_select()


def _select() -> sa.Select:
    return _SELECT


def _record(row: sa.Row) -> Provider:
    return _records([row])[0]


def _records(rows: Iterable[Sequence[Any]]) -> list[Provider]:
    """Providers of _SELECT's rows, whose columns are Provider's fields in
    order: made whole from each row, not column by column by name (which
    cost a list of a thousand providers more than its query). A root's own
    uuid stands in where the row has no root's."""
    make = Provider._make
    return [
        make(row) if row[_ROOT_UUID] is not None else make(row)._replace(root_uuid=row[_UUID])
        for row in rows
    ]


_UUID, _ROOT_UUID = Provider._fields.index("uuid"), Provider._fields.index("root_uuid")


def _build_packed_select() -> sa.Select:
    """_LIST_SELECT's columns as one text per row, for PyMySQL: it makes
    every column of every row in Python: nine columns of a thousand
    providers cost two thirds of a list's time on MariaDB, one column a
    third of that (4.2 ms down to 2.7 ms in all, in-process). ``|``
    separates the parts (no uuid, number or time has one; the uuids are
    three parts), the name comes last (it may), and a part that may be
    NULL is empty instead (none is ever empty otherwise; the name, which
    could be NULL in a database adopted from upstream, is marked by a
    leading ``=``): one NULL would make the whole text NULL."""
    columns = _LIST_SELECT.selected_columns
    text = sa.String()
    empty = sa.literal_column("''", text)

    def part(column: Any, nullable: bool = True) -> Any:
        value = sa.cast(column, text) if not isinstance(column.type, sa.String) else column
        return sa.func.coalesce(value, empty) if nullable else value

    parts = [
        part(columns.id, nullable=False),
        part(columns.generation),
        part(_IsoText(_MODIFIED_AT)),  # text on every backend
        part(columns.uuids, nullable=False),
        sa.func.coalesce(sa.func.concat(sa.literal_column("'='", text), columns.name), empty),
    ]
    separated: list[Any] = []
    for each in parts:
        separated += [each, sa.literal_column("'|'", text)]
    return _LIST_SELECT.with_only_columns(sa.func.concat(*separated[:-1]).label("packed"))


_PACKED_SELECT = _build_packed_select()

# For PostgreSQL: the providers alone, their parents' and roots' ids in
# place of their uuids, which ``_with_uuids`` finds among the rows (or reads
# once for those not among them). PostgreSQL joined the table to itself
# twice by hashing it whole, a third of a 1,000-provider list's query.
_IDS_SELECT = sa.select(
    RP.c.id,
    RP.c.uuid,
    RP.c.parent_provider_id,
    RP.c.root_provider_id,
    RP.c.name,
    RP.c.generation,
    _Sortable(_MODIFIED_AT).label("modified"),
)


class _Chunks(FunctionElement[str]):
    """MySQL's GROUP_CONCAT of a chunk's records, separated by RECORDS."""

    type = sa.String()
    inherit_cache = True
    name = "chunks"


@compiles(_Chunks)
def _chunks(element: _Chunks, compiler: Any, **kw: Any) -> str:
    return f"GROUP_CONCAT({compiler.process(element.clauses, **kw)} SEPARATOR '{RECORDS}')"


# Between the records of a chunk: a name may hold one (nothing else may),
# which the name's length in its record tells (see _unchunked).
RECORDS = "\x1e"
# Providers per chunk, by id: a record is at most about a kilobyte (a name
# is 200 characters of up to four bytes), and a chunk stays well under the
# 1 MB of group_concat_max_len that engine.create_engine sets (a longer one
# MariaDB would cut: _unchunked tells, and the list is read again by row).
CHUNK = 256


def _build_chunked_select() -> sa.Select:
    """The providers as a few texts, for PyMySQL, which reads every row as
    a packet in Python: a thousand rows of anything cost 2.1 ms on MariaDB
    (one column of ids as well as _PACKED_SELECT's texts), the same
    providers as four chunks 1.0 ms. Each chunk is its providers' records,
    _PACKED_SELECT's parts but the parent's and root's ids for their uuids
    (the joins that found those cost the server 0.9 ms of a thousand), and
    the name's length before the name; and how many records it holds."""
    text = sa.String()
    empty = sa.literal_column("''", text)

    def part(column: Any) -> Any:
        return sa.func.coalesce(sa.cast(column, text), empty)

    parts = [
        sa.cast(RP.c.id, text),
        part(RP.c.generation),
        sa.func.coalesce(_IsoText(_MODIFIED_AT), empty),
        RP.c.uuid,
        part(RP.c.parent_provider_id),
        part(RP.c.root_provider_id),
        part(sa.func.char_length(RP.c.name)),
        sa.func.coalesce(sa.func.concat(sa.literal_column("'='", text), RP.c.name), empty),
    ]
    separated: list[Any] = []
    for each in parts:
        separated += [each, sa.literal_column("'|'", text)]
    return sa.select(
        sa.func.count().label("records"), _Chunks(sa.func.concat(*separated[:-1])).label("chunk")
    ).group_by(sa.literal_column(f"{RP.name}.{RP.c.id.name} DIV {CHUNK}"))


_CHUNKED_SELECT = _build_chunked_select()

# How a list reads its providers, by the driver (see _list_statement).
JOINED, IDS, PACKED, CHUNKED = "joined", "ids", "packed", "chunked"
_STYLES = {"pymysql": CHUNKED, "psycopg": IDS, "psycopg2": IDS}


def _unpacked(rows: Iterable[Sequence[Any]]) -> Listed:
    """Providers and their newest change from _PACKED_SELECT's rows, in id order."""
    make = ListedProvider._make
    providers = []
    newest = ""
    for (text,) in rows:
        ident, generation, modified, uuid, parent_uuid, root_uuid, name = text.split("|", 6)
        uuids = f"{uuid}|{parent_uuid}|{root_uuid}"
        providers.append(
            make(
                (
                    int(ident),
                    uuids,
                    name[1:] if name else None,
                    int(generation) if generation else None,
                    modified or None,
                )
            )
        )
        if modified > newest:
            newest = modified
    providers.sort(key=_ID)  # the statement leaves the order to us (see _list_statement)
    return Listed(providers, _time(newest or None))


_ID = operator.itemgetter(0)


def _unchunked(chunks: Iterable[Sequence[Any]]) -> list[tuple] | None:
    """_IDS_SELECT's rows (the time as text) of _CHUNKED_SELECT's chunks,
    or None when a chunk is not whole: it holds fewer records than it
    counts (MariaDB cut it at group_concat_max_len) or more, or a name is
    shorter than its length says (it held RECORDS, and was split there)."""
    rows = []
    for count, chunk in chunks:
        records = chunk.split(RECORDS)
        if len(records) != count:
            return None
        for record in records:
            try:
                ident, generation, modified, uuid, parent, root, length, name = record.split("|", 7)
            except ValueError:
                return None
            if len(name) != (int(length) + 1 if length else 0):
                return None
            rows.append(
                (
                    int(ident),
                    uuid,
                    int(parent) if parent else None,
                    int(root) if root else None,
                    name[1:] if name else None,
                    int(generation) if generation else None,
                    modified or None,
                )
            )
    return rows


# The forms of list (see _Form), by the style they would be read in, whose
# last list held providers whose parents or roots it did not (children:
# resources=VGPU:1): their uuids read apart cost more than the joins do
# (300 of them: 1.3 ms against 0.4 on MariaDB; on PostgreSQL 2.6-3.0 ms
# the whole list of 400 against 2.0-2.2), so such a form is read in the
# style that joins them (_JOINED_STYLE) until a list of it holds none,
# looked at every _LOOK_AGAIN lists. Each with the lists read since.
_JOINED_FORMS: dict[tuple[_Form, str], int] = {}
_JOINED_STYLE = {CHUNKED: PACKED, IDS: JOINED}
_LOOK_AGAIN = 8


def _holds_children_apart(providers: Iterable[ListedProvider]) -> bool:
    """Whether some provider's parent or root is not among ``providers``."""
    listed, related = set(), set()
    for provider in providers:
        uuid, parent, root = provider.uuids.split("|")
        listed.add(uuid)
        related.add(root)
        if parent:
            related.add(parent)
    return not related <= listed


def _listed(conn: Connection, form: _Form, params: dict, style: str) -> Listed:
    """The providers of ``form``'s statement (of _LIST_SELECT,
    _PACKED_SELECT, _CHUNKED_SELECT or _IDS_SELECT, as ``style`` says), in
    id order: the rows themselves (joined), or ListedProvider's columns
    made of them."""
    joined = _JOINED_STYLE.get(style)
    read = _JOINED_FORMS.get((form, style)) if joined else None
    if joined and read is not None:
        listed = _listed(conn, form, params, joined)
        _JOINED_FORMS[(form, style)] = read = read + 1
        # Looked at every so often: 0.2 ms of a list of 400 children.
        if read % _LOOK_AGAIN == 0 and not _holds_children_apart(listed.providers):
            _JOINED_FORMS.pop((form, style), None)
        return listed
    statement = _list_statement(form, style)
    if style == PACKED:
        return _unpacked(conn.execute(statement, params).all())
    rows: Sequence[Any] = conn.execute(statement, params).all()
    apart = False
    if style == CHUNKED:
        chunked = _unchunked(rows)
        if chunked is None:  # rare: a name holding RECORDS, or a server's shorter limit
            return _listed(conn, form, params, PACKED)
        made, apart = _with_uuids(conn, chunked)
        made.sort(key=_ID)  # the statement leaves the order to us (see _list_statement)
        rows = made
    elif style == IDS:
        rows, apart = _with_uuids(conn, rows)
    if apart:
        if len(_JOINED_FORMS) >= 128:  # forms are few; a client naming many makes more
            _JOINED_FORMS.clear()
        _JOINED_FORMS[(form, style)] = 0
    return Listed(rows, _time(max(filter(None, map(_MODIFIED, rows)), default=None)))


_BY_IDS = sa.select(RP.c.id, RP.c.uuid)


def _with_uuids(conn: Connection, rows: Sequence[Any]) -> tuple[list[ListedProvider], bool]:
    """ListedProvider's columns of _IDS_SELECT's rows: each provider's
    uuid, its parent's and its root's joined as _LIST_SELECT joins them (no
    parent: empty; no root, or one gone: its own), the uuids of parents and
    roots not listed themselves read in one statement; and whether there
    were any."""
    uuid_of = {row[0]: row[1] for row in rows}
    missing = {
        ident
        for row in rows
        for ident in (row[2], row[3])
        if ident is not None and ident not in uuid_of
    }
    if missing:
        statement = _BY_IDS.where(filters.ids_in(RP.c.id, missing))
        uuid_of.update(conn.execute(statement, execution_options=filters.NO_STATEMENT_CACHE).all())
    get, new, listed = uuid_of.get, tuple.__new__, ListedProvider  # as _make, without its call
    return [
        new(listed, (ident, f"{uuid}|{get(parent, '')}|{get(root, uuid)}", name, generation, at))
        for ident, uuid, parent, root, name, generation, at in rows
    ], bool(missing)


_MODIFIED = operator.itemgetter(ListedProvider._fields.index("modified"))


def _time(text: str | datetime.datetime | None) -> datetime.datetime | None:
    """A time as the database wrote it as text ("2026-11-26 13:21:21.99407"),
    or as the time itself (PostgreSQL's)."""
    if text is None or isinstance(text, datetime.datetime):
        return text
    try:
        return datetime.datetime.fromisoformat(text)
    except ValueError:  # a form no database of ours writes: the answer's time is now
        return None


# Built once, the uuid bound: a read by uuid is the commonest of all.
_BY_UUID = _SELECT.where(RP.c.uuid == sa.bindparam("uuid", type_=sa.String))
# The root of the tree of the provider of this uuid (none when there is none).
_ROOT_OF = (
    sa.select(RP.c.root_provider_id)
    .where(RP.c.uuid == sa.bindparam("in_tree", type_=sa.String))
    .scalar_subquery()
)


def find(conn: Connection, uuid: str) -> Provider | None:
    if "\x00" in uuid:  # no provider has one, and PostgreSQL refuses the query
        return None
    row = conn.execute(_BY_UUID, {"uuid": uuid}).first()
    return _record(row) if row else None


def get(conn: Connection, uuid: str) -> Provider:
    provider = find(conn, uuid)
    if provider is None:
        raise ProviderNotFound(uuid)
    return provider


_BY_UUIDS = _SELECT.where(RP.c.uuid.in_(sa.bindparam("uuids", expanding=True)))


def by_uuids(conn: Connection, uuids: list[str]) -> list[Provider]:
    """The providers of these uuids that exist, in no particular order."""
    return _records(conn.execute(_BY_UUIDS, {"uuids": uuids}).all())


def query(
    conn: Connection, where: Any = None, order: bool = True, params: dict | None = None
) -> list[Provider]:
    stmt = _select()
    if where is not None:
        stmt = stmt.where(where)
    if order:
        stmt = stmt.order_by(RP.c.id)
    return _records(conn.execute(stmt, params or {}).all())


def create(conn: Connection, name: str, uuid: str, parent: Provider | None) -> Provider:
    """Insert a provider: a root, or a child of ``parent`` (as last read)."""
    _refuse_duplicates(conn, name=name, uuid=uuid)
    try:
        with statement_savepoint(conn):
            new_id = inserted_id(
                conn.execute(
                    sa.insert(RP).values(
                        uuid=uuid,
                        name=name,
                        generation=0,
                        parent_provider_id=parent.id if parent else None,
                        root_provider_id=parent.root_id if parent else None,
                    )
                )
            )
    except IntegrityError:
        # Lost a race: a duplicate was created, or the parent deleted, meanwhile.
        _refuse_duplicates(conn, name=name, uuid=uuid)
        raise ParentProviderNotFound(uuid, parent.uuid if parent else None, True) from None
    if parent is None:
        conn.execute(sa.update(RP).where(RP.c.id == new_id).values(root_provider_id=new_id))
    return get(conn, uuid)


def _refuse_duplicates(
    conn: Connection, name: str, uuid: str | None, exclude_id: int | None = None
) -> None:
    """ProviderExists when the name (or uuid) is another provider's: one
    statement, which compares as the database does (an adopted MySQL
    database ignores case in names)."""
    same_name = RP.c.name == name
    if exclude_id is not None:
        same_name = sa.and_(same_name, RP.c.id != exclude_id)
    same_uuid = RP.c.uuid == uuid if uuid is not None else sa.false()
    flag = lambda cond: sa.func.max(sa.case((cond, 1), else_=0))  # noqa: E731
    row = conn.execute(
        sa.select(flag(same_uuid), flag(same_name)).where(sa.or_(same_uuid, same_name))
    ).one()
    taken_uuid = uuid if row[0] else None
    taken_name = name if row[1] else None
    if taken_uuid is not None or taken_name is not None:
        raise ProviderExists(taken_uuid, taken_name)


def subtree_ids(conn: Connection, provider: Provider) -> set[int]:
    """The provider and all its descendants (one query for the tree, walked here)."""
    rows = conn.execute(
        sa.select(RP.c.id, RP.c.parent_provider_id).where(RP.c.root_provider_id == provider.root_id)
    ).all()
    children: dict[int, list[int]] = {}
    for row in rows:
        children.setdefault(row.parent_provider_id, []).append(row.id)
    found, todo = set(), [provider.id]
    while todo:
        current = todo.pop()
        found.add(current)
        todo.extend(children.get(current, ()))
    return found


KEEP_PARENT: Any = object()  # update(): leave the parent as it is


def update(conn: Connection, provider: Provider, name: str, parent: Any = KEEP_PARENT) -> Provider:
    """Rename and, unless ``parent`` is KEEP_PARENT, move the provider under
    ``parent`` (a Provider) or make it a root (None), its subtree with it.
    Whether such a move is allowed is the caller's rule."""
    values: dict[str, Any] = {"name": name, "updated_at": tables.utcnow()}
    new_root_id = None
    if parent is not KEEP_PARENT:
        if parent is not None and parent.id != provider.parent_id:
            values.update(parent_provider_id=parent.id)
            new_root_id = parent.root_id
        elif parent is None and provider.parent_id is not None:
            values.update(parent_provider_id=None)
            new_root_id = provider.id
    _refuse_duplicates(conn, name=name, uuid=None, exclude_id=provider.id)
    if new_root_id is not None and new_root_id != provider.root_id:
        moving = subtree_ids(conn, provider)
        conn.execute(sa.update(RP).where(RP.c.id.in_(moving)).values(root_provider_id=new_root_id))
    try:
        with conn.begin_nested():
            conn.execute(sa.update(RP).where(RP.c.id == provider.id).values(**values))
    except IntegrityError:
        # Lost a race: the name was taken, or the new parent deleted, meanwhile.
        _refuse_duplicates(conn, name=name, uuid=None, exclude_id=provider.id)
        parent_uuid = parent.uuid if parent not in (None, KEEP_PARENT) else None
        raise ParentProviderNotFound(provider.uuid, parent_uuid, True) from None
    return get(conn, provider.uuid)


def delete(conn: Connection, provider: Provider) -> None:
    """Remove a provider with its inventories, traits and aggregate links.

    Children are checked before allocations, as upstream does, so a parent
    that also has allocations is refused as a parent.
    """
    child, used = conn.execute(
        sa.select(
            sa.exists().where(RP.c.parent_provider_id == provider.id),
            sa.exists().where(
                tables.allocations.c.resource_provider_id == provider.id, holds.live()
            ),
        )
    ).one()
    if child:
        raise ProviderHasChildren(provider.uuid)
    if used:
        raise ProviderInUse(provider.uuid)
    # Expired holds' allocations hold nothing, but their rows point at it.
    holds.sweep_allocations_of(conn, tables.allocations.c.resource_provider_id == provider.id)
    for table in (
        tables.inventories,
        tables.resource_provider_traits,
        tables.resource_provider_aggregates,
    ):
        conn.execute(sa.delete(table).where(table.c.resource_provider_id == provider.id))
    if provider.root_id == provider.id:
        # A root points at itself; clear that before the row goes.
        conn.execute(sa.update(RP).where(RP.c.id == provider.id).values(root_provider_id=None))
    try:
        conn.execute(sa.delete(RP).where(RP.c.id == provider.id))
    except IntegrityError:  # a child was added since the check above
        raise ProviderHasChildren(provider.uuid) from None


# Built once (SQLAlchemy keys a statement by walking it, once per object).
_BUMP = (
    sa.update(RP)
    .where(RP.c.id == sa.bindparam("b_id"), RP.c.generation == sa.bindparam("b_seen"))
    .values(generation=sa.bindparam("b_next"), updated_at=sa.bindparam("b_now"))
)


def bump_generation(conn: Connection, provider: Provider, seen: int | None = None) -> int:
    """Increment the generation if it is still ``seen`` (default: as read).

    The conditional UPDATE is what makes two servers over one database
    safe: only one of two writers that read the same generation matches.
    """
    expected = provider.generation if seen is None else seen
    result = conn.execute(
        _BUMP,
        {"b_id": provider.id, "b_seen": expected, "b_next": expected + 1, "b_now": tables.utcnow()},
    )
    if result.rowcount != 1:
        raise ConcurrentUpdate(provider.uuid)
    return expected + 1


def list_filtered(
    conn: Connection,
    name: str | None = None,
    uuid: str | None = None,
    in_tree: str | None = None,
    member_of: AggregateFilter | None = None,
    required: TraitFilter | None = None,
    resources: dict[str, int] | None = None,
) -> Listed:
    """GET /resource_providers: every filter ANDed, in one statement.

    The names ``required`` and ``resources`` give are looked up in that
    statement where a name no trait or class has can only leave no provider
    (``_by_name``; a trait's not on PostgreSQL): then, and only for an
    empty list, they are looked up on their own, to tell an unknown name
    (a 400) from a list that is empty. Otherwise first, as upstream does."""
    params: dict[str, Any] = {}
    if name is not None:
        params["name"] = name
    if uuid is not None:
        params["uuid"] = uuid
    if in_tree is not None:
        if "\x00" in in_tree:  # no provider has one, and PostgreSQL refuses the query
            return Listed([], None)
        # In the same statement: a uuid no provider has leaves no root, and no row.
        params["in_tree"] = in_tree
    aggregates = traits = (0, False)  # (any-of sets, forbidden ones): the form of each
    if member_of:
        aggregates = (len(member_of.any_of), bool(member_of.forbidden))
        params.update(filters.aggregates_parameters(member_of.any_of, member_of.forbidden))
    # What is looked up in the statement, and on its own only for an empty list.
    deferred_traits: TraitFilter | None = None
    deferred_classes: dict[str, int] | None = None
    # A trait's not on PostgreSQL: it made a join of the look-up, estimated
    # a few rows for it, and walked the providers' index for each of a
    # thousand (0.6 ms of the statement more than the round trip it saved).
    # The classes' look-ups it runs once each, ahead of the statement's
    # plan, which is the plan it made of the ids.
    if (
        required
        and conn.dialect.name != "postgresql"
        and _by_name(required.any_of, required.forbidden)
    ):
        deferred_traits = required
        traits = (len(required.any_of), False)
        params.update({f"traits_{n}": name for n, (name,) in enumerate(required.any_of)})
    elif required:
        trait_ids = _required_trait_ids(conn, required)
        traits = (len(required.any_of), bool(required.forbidden))
        params.update(
            filters.traits_parameters(
                [{trait_ids[n] for n in group} for group in required.any_of],
                {trait_ids[n] for n in required.forbidden},
            )
        )
    if resources and max(resources.values()) > tables.MAX_INT:
        if deferred_traits is not None:
            _required_trait_ids(conn, deferred_traits)  # an unknown trait is a 400 still
        return Listed([], None)  # no inventory can hold more than an INT
    if resources and _by_name([[rc] for rc in resources]):
        deferred_classes = resources
        for position, (rc_name, amount) in enumerate(resources.items()):
            params.update(filters.capacity_parameters(position, rc_name, amount))
    elif resources:
        rc_ids = _resource_class_ids(conn, resources)
        for position, (rc_name, amount) in enumerate(resources.items()):
            params.update(filters.capacity_parameters(position, rc_ids[rc_name], amount))
    form = _Form(
        name is not None, uuid is not None, in_tree is not None, len(resources or ()), *aggregates,
        *traits, deferred_traits is not None, deferred_classes is not None,
    )  # fmt: skip
    style = _STYLES.get(conn.dialect.driver, JOINED)
    if style == CHUNKED and (form.by_tree or form.by_name or form.by_uuid):
        style = PACKED  # a tree or one provider: a few rows, and the server's grouping costs more
    listed = _listed(conn, form, params, style)
    if not listed.providers:  # perhaps for a name nothing has: a 400, as upstream's
        if deferred_traits is not None:
            _required_trait_ids(conn, deferred_traits)
        if deferred_classes is not None:
            _resource_class_ids(conn, deferred_classes)
    return listed


def _by_name(any_of: Sequence[Collection[str]], forbidden: Collection[str] = ()) -> bool:
    """Whether names may be looked up in the list's statement: when each
    any-of set is one name, none is forbidden, and each is as every stored
    name is, upper case letters, digits and "_". An unknown name then
    leaves no provider, and is told only then; an unknown forbidden trait,
    or one of several, would leave some. Any other name is looked up on its
    own, which compares it exactly: a MySQL collation takes "vcpu" or
    "VCPU " for VCPU (an upstream-made database's ignores case, and every
    one ignores trailing spaces), and PostgreSQL refuses a NUL."""
    if forbidden:
        return False
    return all(len(one) == 1 and all(map(_PLAIN_NAME.fullmatch, one)) for one in any_of)


_PLAIN_NAME = re.compile("[A-Z0-9_]+")


def _resource_class_ids(conn: Connection, resources: dict[str, int]) -> dict[str, int]:
    rc_ids = names.resource_class_ids(conn, resources)
    missing = tuple(rc_name for rc_name in resources if rc_name not in rc_ids)
    if missing:
        raise UnknownResourceClass(missing)
    return rc_ids


class _Form(NamedTuple):
    """Which filters a list has, and how many values of each kind: what
    its statement is made of (the values are bound by name)."""

    by_name: bool
    by_uuid: bool
    by_tree: bool
    classes: int  # of resources=
    aggregate_sets: int  # member_of's any-of sets
    forbidden_aggregates: bool
    trait_sets: int  # required's any-of sets
    forbidden_traits: bool
    traits_by_name: bool  # required's names looked up in the statement
    classes_by_name: bool  # resources='s class names looked up in the statement


@functools.lru_cache(maxsize=128)
def _list_statement(form: _Form, style: str) -> sa.Select:
    """The list's statement for ``form``, of _LIST_SELECT (SQLite, whose
    joins are look-ups by key), _PACKED_SELECT (PyMySQL) or _IDS_SELECT
    (PostgreSQL), built once: SQLAlchemy works out a key of every statement
    it runs, walking it whole, but once only for one statement object (a
    third of an in_tree= read's time in-process). Forms are few: a client
    naming many any-of sets makes a few more, which the cache drops."""
    by_name, by_uuid, by_tree, classes = form.by_name, form.by_uuid, form.by_tree, form.classes
    where = []
    if form.aggregate_sets or form.forbidden_aggregates:
        where.append(
            filters.aggregates_condition(RP.c.id, form.aggregate_sets, form.forbidden_aggregates)
        )
    if form.trait_sets or form.forbidden_traits:
        where.append(
            filters.traits_condition(
                RP.c.id, form.trait_sets, form.forbidden_traits, form.traits_by_name
            )
        )
    if by_name:
        where.append(RP.c.name == sa.bindparam("name", type_=sa.String))
    if by_uuid:
        where.append(RP.c.uuid == sa.bindparam("uuid", type_=sa.String))
    if by_tree:
        where.append(RP.c.root_provider_id == _ROOT_OF)
    if classes:
        where.append(RP.c.id.in_(filters.providers_with_capacity(classes, form.classes_by_name)))
    selected = {
        JOINED: _LIST_SELECT, PACKED: _PACKED_SELECT, CHUNKED: _CHUNKED_SELECT, IDS: _IDS_SELECT
    }[style]  # fmt: skip
    statement = selected.where(sa.and_(sa.true(), *where))
    if style in (PACKED, CHUNKED):
        # In id order from ``_unpacked``: MariaDB sorted the rows a filter's
        # subquery chose in a temporary table (member_of=in: of 2,000 of
        # 4,000 providers, 17 ms with the ORDER BY, 11 ms without).
        return statement
    return statement.order_by(RP.c.id)


def _required_trait_ids(conn: Connection, required: TraitFilter) -> dict[str, int]:
    ids = names.trait_ids(conn, required.names())
    missing = sorted(required.names() - set(ids))
    if missing:
        raise UnknownTrait(tuple(missing))
    return ids
