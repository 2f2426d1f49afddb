"""Traits: standard ones from os-traits, custom ones CUSTOM_*."""

from __future__ import annotations

import os_traits
import sqlalchemy as sa
from sqlalchemy.engine import Connection
from sqlalchemy.exc import IntegrityError

from placement_svc.db import tables
from placement_svc.db.exceptions import TraitInUse, TraitNotFound
from placement_svc.db.records import Named, get_named, storable

T = tables.traits
RPT = tables.resource_provider_traits


def _record(row: sa.Row) -> Named:
    return Named(row.id, row.name, row.created_at, row.updated_at)


def list_filtered(
    conn: Connection,
    names: list[str] | None = None,
    prefix: str | None = None,
    associated: bool | None = None,
) -> list[Named]:
    """Traits by name list, name prefix and whether any provider has them.

    SQL narrows the rows; the exact comparison happens here, because the
    backends disagree at the edges (SQLite's LIKE ignores case, MariaDB's
    ``=`` ignores trailing spaces) and names must match byte for byte on all
    of them.

    The order is the one upstream's query plans give (it sets no ORDER BY):
    a lookup by names in ``lookup_order``, every other list in id order, as
    upstream's SQLite and PostgreSQL give them (a table scan; PostgreSQL's
    heap is in id order until a VACUUM lets a new row take a deleted one's
    place). Not reproduced: upstream's MariaDB lists a ``startswith:`` whose
    range is a small part of the table by name, and ``associated=true`` over
    a link table smaller than the traits table by each trait's first
    provider; its PostgreSQL lists ``associated=true`` in hash order.
    """
    if prefix is not None and not storable(prefix):
        return []
    query = sa.select(T).order_by(lookup_order(conn) if names is not None else T.c.id)
    if names is not None:
        names = [name for name in names if storable(name)]
        query = query.where(T.c.name.in_(names))
    if prefix is not None:
        escaped = prefix.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")
        query = query.where(T.c.name.like(escaped + "%", escape="\\"))
    if associated is not None:
        used = sa.exists().where(RPT.c.trait_id == T.c.id)
        query = query.where(used if associated else ~used)
    wanted = set(names) if names is not None else None
    return [
        _record(r)
        for r in conn.execute(query)
        if (wanted is None or r.name in wanted) and r.name.startswith(prefix or "")
    ]


def lookup_order(conn: Connection) -> sa.ColumnElement:
    """The order upstream lists traits it looks up by a list of names
    (``name=in:``, and the body of a provider's trait PUT).

    Upstream's SQLite and MySQL read such a lookup through the unique index
    on name, so by name (MariaDB turns to a table scan, id order, once the
    names are over about a tenth of the table: not reproduced). Upstream's
    PostgreSQL scans the heap, so in id order as in ``list_filtered``.
    """
    return T.c.id if conn.dialect.name == "postgresql" else T.c.name


def get(conn: Connection, name: str) -> Named:
    found = get_named(conn, T, name)
    if found is None:
        raise TraitNotFound(name)
    return found


def ensure(conn: Connection, name: str) -> tuple[Named, bool]:
    """The trait, created if missing; the flag says whether it was created."""
    try:
        return get(conn, name), False
    except TraitNotFound:
        pass
    try:
        with conn.begin_nested():
            conn.execute(sa.insert(T).values(name=name))
    except IntegrityError:
        return get(conn, name), False  # a concurrent writer created it
    return get(conn, name), True


def delete(conn: Connection, trait: Named) -> None:
    used = conn.execute(sa.select(RPT.c.trait_id).where(RPT.c.trait_id == trait.id).limit(1))
    if used.first():
        raise TraitInUse(trait.name)
    conn.execute(sa.delete(T).where(T.c.id == trait.id))


def sync_standard(conn: Connection) -> int:
    """Insert the os-traits traits this database lacks; returns how many.

    By name, so standard traits list (in id order) by name. Upstream inserts
    them in the iteration order of a Python set of strings, which changes
    with the hash seed of the process that syncs: any fixed order is one
    upstream can give.
    """
    present = {r.name for r in conn.execute(sa.select(T.c.name))}
    now = tables.utcnow()
    missing = [
        {"name": name, "created_at": now}
        for name in sorted(os_traits.get_traits())
        if name not in present
    ]
    if missing:
        conn.execute(sa.insert(T), missing)
    return len(missing)
