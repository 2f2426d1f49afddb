"""Consumers and their owners (projects, users, consumer types), made on first use.

A consumer row exists while the consumer has allocations: it is created by
the write that gives it its first ones and removed by the write that takes
its last ones away. Its generation is bumped by every write to its
allocations, guarded like a provider's (``UPDATE ... WHERE generation =
:seen``); a consumer conflict is the client's to resolve, never retried here.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

import sqlalchemy as sa
from sqlalchemy.engine import Connection
from sqlalchemy.exc import IntegrityError

from placement_svc.db import tables
from placement_svc.db.exceptions import ConsumerChanged
from placement_svc.db.records import inserted_id

CONSUMER = tables.consumers
PROJECT = tables.projects
USER = tables.users
CONSUMER_TYPE = tables.consumer_types
ALLOC = tables.allocations

# The type of consumers written before 1.38, which is no row at all.
UNKNOWN_TYPE = "unknown"


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


def _select() -> sa.Select:
    return with_owners(sa.select(*owner_columns()).select_from(CONSUMER))


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
    rows = conn.execute(_select().where(CONSUMER.c.uuid.in_(wanted)))
    return {row.uuid: record(row) for row in rows}


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


def ensure_project(conn: Connection, external_id: str) -> int:
    return _ensure_row(conn, PROJECT, PROJECT.c.external_id, external_id)


def ensure_user(conn: Connection, external_id: str) -> int:
    return _ensure_row(conn, USER, USER.c.external_id, external_id)


def ensure_type(conn: Connection, name: str) -> int:
    return _ensure_row(conn, CONSUMER_TYPE, CONSUMER_TYPE.c.name, name)


def create(conn: Connection, uuid: str, owner: Owner) -> tuple[Consumer, bool]:
    """Insert a consumer at generation 0; (consumer, True).

    When a racing writer committed the same consumer first, that one is
    returned instead: (consumer, False).
    """
    try:
        with conn.begin_nested():
            conn.execute(
                sa.insert(CONSUMER).values(
                    uuid=uuid,
                    project_id=owner.project_pk,
                    user_id=owner.user_pk,
                    generation=0,
                    consumer_type_id=owner.consumer_type_id,
                )
            )
    except IntegrityError:
        existing = find(conn, uuid)
        if existing is None:
            raise
        return existing, False
    created = find(conn, uuid)
    if created is None:  # not after an INSERT in this very transaction
        raise LookupError(uuid)
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
    has_allocations = sa.exists().where(ALLOC.c.consumer_id == CONSUMER.c.uuid)
    conn.execute(sa.delete(CONSUMER).where(CONSUMER.c.uuid.in_(wanted), ~has_allocations))
