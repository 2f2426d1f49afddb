"""Consumers and their owners (projects, users, consumer types), made on first use.

A consumer row exists while the consumer has allocations: it is created by
the write that gives it its first ones and removed by the write that takes
its last ones away. Its generation is bumped by every write to its
allocations, guarded like a provider's (``UPDATE ... WHERE generation =
:seen``); a consumer conflict is the client's to resolve, never retried here.
"""

from __future__ import annotations

import functools
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

import sqlalchemy as sa
from sqlalchemy.dialects import postgresql
from sqlalchemy.engine import Connection
from sqlalchemy.exc import IntegrityError

from placement_svc.db import tables
from placement_svc.db.exceptions import ConsumerChanged
from placement_svc.db.records import inserted_id

CONSUMER = tables.consumers
HOLD = tables.allocation_holds
PROJECT = tables.projects
USER = tables.users
CONSUMER_TYPE = tables.consumer_types
ALLOC = tables.allocations

# The type of consumers written before 1.38, which is no row at all.
UNKNOWN_TYPE = "unknown"
# A consumer's generation after the write that created it.
FIRST_GENERATION = 1


@dataclass(frozen=True)
class Consumer:
    id: int
    uuid: str
    generation: int
    project_id: str
    user_id: str
    consumer_type: str | None
    project_pk: int
    user_pk: int
    consumer_type_id: int | None

    @property
    def type_name(self) -> str:
        return self.consumer_type or UNKNOWN_TYPE


@dataclass(frozen=True)
class Owner:
    """The project, user and (from 1.38) type a request gives its consumer."""

    project_pk: int
    user_pk: int
    consumer_type_id: int | None  # None: keep whatever the consumer has


def owner_columns() -> list[sa.ColumnElement]:
    """A consumer's columns as ``record`` reads them, with its project's and
    user's external ids and its type's name (join them with ``with_owners``)."""
    return [
        CONSUMER.c.id,
        CONSUMER.c.uuid,
        CONSUMER.c.generation,
        CONSUMER.c.project_id.label("project_pk"),
        CONSUMER.c.user_id.label("user_pk"),
        CONSUMER.c.consumer_type_id,
        PROJECT.c.external_id.label("project_external_id"),
        USER.c.external_id.label("user_external_id"),
        CONSUMER_TYPE.c.name.label("consumer_type"),
    ]


def with_owners(query: sa.Select) -> sa.Select:
    """``query`` (which reads CONSUMER) joined with what ``owner_columns`` reads."""
    return (
        query.join(PROJECT, PROJECT.c.id == CONSUMER.c.project_id)
        .join(USER, USER.c.id == CONSUMER.c.user_id)
        .outerjoin(CONSUMER_TYPE, CONSUMER_TYPE.c.id == CONSUMER.c.consumer_type_id)
    )


_SELECT = with_owners(sa.select(*owner_columns()).select_from(CONSUMER))
_FIND_MANY = _SELECT.where(CONSUMER.c.uuid.in_(sa.bindparam("uuids", expanding=True)))


def record(row: sa.Row) -> Consumer:
    return Consumer(
        id=row.id,
        uuid=row.uuid,
        generation=row.generation,
        project_id=row.project_external_id,
        user_id=row.user_external_id,
        consumer_type=row.consumer_type,
        project_pk=row.project_pk,
        user_pk=row.user_pk,
        consumer_type_id=row.consumer_type_id,
    )


def find_many(conn: Connection, uuids: Iterable[str]) -> dict[str, Consumer]:
    wanted = set(uuids)
    if not wanted:
        return {}
    rows = conn.execute(_FIND_MANY, {"uuids": sorted(wanted)})
    return {row.uuid: record(row) for row in rows}


def lock(conn: Connection, uuid: str) -> None:
    """Hold the consumer's row until the transaction ends (SELECT ... FOR
    UPDATE; SQLite's writers hold the whole database already): two changes
    of one consumer then take turns instead of failing each other's
    generation check. A consumer not yet made has no row to hold."""
    conn.execute(sa.select(CONSUMER.c.id).where(CONSUMER.c.uuid == uuid).with_for_update()).all()


def find(conn: Connection, uuid: str) -> Consumer | None:
    return find_many(conn, [uuid]).get(uuid)


def _id_of(conn: Connection, table: sa.Table, column: sa.Column, value: str) -> int | None:
    row = conn.execute(sa.select(table.c.id).where(column == value)).first()
    return row.id if row else None


def _ensure_row(conn: Connection, table: sa.Table, column: sa.Column, value: str) -> int:
    """The id of the row named ``value``, inserted if missing (races tolerated)."""
    found = _id_of(conn, table, column, value)
    if found is not None:
        return found
    try:
        with conn.begin_nested():
            return inserted_id(conn.execute(sa.insert(table).values({column.name: value})))
    except IntegrityError:
        found = _id_of(conn, table, column, value)  # another writer made it first
        if found is None:
            raise
        return found


# What an owner's parts are looked up by: project and user external ids,
# consumer type names.
OWNER_KINDS = {
    "project": (PROJECT, PROJECT.c.external_id),
    "user": (USER, USER.c.external_id),
    "type": (CONSUMER_TYPE, CONSUMER_TYPE.c.name),
}


@functools.cache
def _owners_query(kinds: tuple[str, ...]) -> sa.Select | sa.CompoundSelect:
    """The ids of the owners' parts of these kinds, by name: the names of a
    kind are bound as the list parameter named after it."""
    parts = [
        sa.select(sa.literal(kind).label("kind"), table.c.id, column.label("name")).where(
            column.in_(sa.bindparam(kind, expanding=True))
        )
        for kind, (table, column) in OWNER_KINDS.items()
        if kind in kinds
    ]
    return parts[0] if len(parts) == 1 else sa.union_all(*parts)


def ensure_owners(
    conn: Connection, wanted: Iterable[tuple[str, str]]
) -> dict[tuple[str, str], int]:
    """{(kind, name): id} for every (kind, name) of ``wanted`` (kinds of
    OWNER_KINDS), the missing ones inserted. The ones that exist, which is
    nearly always all of them, are read in one statement for any number."""
    keys = set(wanted)
    if not keys:
        return {}
    names = {kind: sorted(name for of, name in keys if of == kind) for kind in OWNER_KINDS}
    kinds = tuple(kind for kind in OWNER_KINDS if names[kind])
    found = {
        (row.kind, row.name): row.id
        for row in conn.execute(_owners_query(kinds), {kind: names[kind] for kind in kinds})
        if (row.kind, row.name) in keys
    }
    for kind, name in keys - found.keys():
        # Not there by exactly this name (or stored by one MariaDB compares
        # equal to it): looked up and inserted one at a time, races tolerated.
        table, column = OWNER_KINDS[kind]
        found[(kind, name)] = _ensure_row(conn, table, column, name)
    return found


_INSERT = sa.insert(CONSUMER)
_INSERT_UNLESS_THERE = (
    postgresql.insert(CONSUMER)
    .on_conflict_do_nothing(index_elements=["uuid"])
    .returning(CONSUMER.c.id)
)


def create(
    conn: Connection, uuid: str, owner: Owner, names: tuple[str, str, str | None]
) -> tuple[Consumer, bool]:
    """Insert a consumer that has allocations to be written in this
    transaction: at generation 1, the generation a consumer's first write
    gives it. (consumer, True); ``names`` are the owner's project, user and
    type as the request gave them.

    When a racing writer committed the same consumer first, that one is
    returned instead, as it is now: (consumer, False).
    """
    values = {
        "uuid": uuid,
        "project_id": owner.project_pk,
        "user_id": owner.user_pk,
        "generation": FIRST_GENERATION,
        "consumer_type_id": owner.consumer_type_id,
    }
    backend = conn.dialect.name
    consumer_id: int | None
    if backend == "sqlite":
        # Under BEGIN IMMEDIATE no other writer runs: the consumer this
        # transaction did not find cannot have been made meanwhile.
        consumer_id = inserted_id(conn.execute(_INSERT, values))
    elif backend == "postgresql":
        inserted = conn.execute(_INSERT_UNLESS_THERE, values).first()
        consumer_id = inserted.id if inserted is not None else None
    else:
        try:
            with conn.begin_nested():
                consumer_id = inserted_id(conn.execute(_INSERT, values))
        except IntegrityError:
            existing = find(conn, uuid)
            if existing is None:
                raise
            return existing, False
    if consumer_id is None:  # PostgreSQL: made by a writer that committed first
        existing = find(conn, uuid)
        if existing is None:
            raise LookupError(uuid)
        return existing, False
    project_id, user_id, type_name = names
    created = Consumer(
        id=consumer_id,
        uuid=uuid,
        generation=FIRST_GENERATION,
        project_id=project_id,
        user_id=user_id,
        consumer_type=type_name,
        project_pk=owner.project_pk,
        user_pk=owner.user_pk,
        consumer_type_id=owner.consumer_type_id,
    )
    return created, True


def set_owner(conn: Connection, consumer: Consumer, owner: Owner) -> None:
    """Give the consumer the request's project/user/type without a generation bump.

    Guarded by the generation like every consumer write; when it no longer
    matches, the bump that follows in the same transaction reports it.
    """
    values: dict[str, Any] = {}
    if (owner.project_pk, owner.user_pk) != (consumer.project_pk, consumer.user_pk):
        values.update(project_id=owner.project_pk, user_id=owner.user_pk)
    if owner.consumer_type_id and owner.consumer_type_id != consumer.consumer_type_id:
        values.update(consumer_type_id=owner.consumer_type_id)
    if values:
        conn.execute(
            sa.update(CONSUMER)
            .where(CONSUMER.c.id == consumer.id, CONSUMER.c.generation == consumer.generation)
            .values(**values, updated_at=tables.utcnow())
        )


def bump_generations(conn: Connection, consumers: Iterable[Consumer]) -> None:
    """One conditional UPDATE for all: each consumer's generation must still be as read."""
    seen = {c.id: c.generation for c in consumers}
    if not seen:
        return
    result = conn.execute(
        sa.update(CONSUMER)
        .where(
            CONSUMER.c.id.in_(seen),
            CONSUMER.c.generation == sa.case(seen, value=CONSUMER.c.id),
        )
        .values(generation=CONSUMER.c.generation + 1, updated_at=tables.utcnow())
    )
    if result.rowcount != len(seen):
        raise ConsumerChanged()


def delete_unused(conn: Connection, uuids: Iterable[str]) -> None:
    """Remove those of the consumers that have no allocations left."""
    wanted = set(uuids)
    if not wanted:
        return
    bound = {"wanted": sorted(wanted)}
    conn.execute(_DELETE_UNUSED, bound)
    # Nor a hold (1.51): a consumer made again later starts without one.
    conn.execute(_DELETE_UNHELD, bound)


# Built once (SQLAlchemy keys a statement by walking it, once per object):
# every DELETE /allocations and every write that empties a consumer runs them.
_WANTED: Any = sa.bindparam("wanted", expanding=True)
_DELETE_UNUSED = sa.delete(CONSUMER).where(
    CONSUMER.c.uuid.in_(_WANTED), ~sa.exists().where(ALLOC.c.consumer_id == CONSUMER.c.uuid)
)
_DELETE_UNHELD = sa.delete(HOLD).where(
    HOLD.c.consumer_id.in_(_WANTED), ~sa.exists().where(ALLOC.c.consumer_id == HOLD.c.consumer_id)
)
