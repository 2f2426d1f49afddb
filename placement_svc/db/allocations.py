"""Allocations: reading them by consumer or provider, and the statements of a write.

The rules of a write and their order are ops/allocations.py's; here are its
statements: the current allocations of the consumers it empties
(``held_by``), the conditional UPDATE that bumps the generations of the
providers it touches (``bump_providers``, ``ConcurrentUpdate`` when one
moved since it was read) and the INSERT of the new rows (``add``). The
capacity figures are db/capacity.py's, the consumers db/consumers.py's.
"""

from __future__ import annotations

import datetime
from collections.abc import Sequence
from dataclasses import dataclass

import sqlalchemy as sa
from sqlalchemy.engine import Connection

from placement_svc.db import consumers, holds, tables
from placement_svc.db.consumers import Consumer
from placement_svc.db.exceptions import ConcurrentUpdate
from placement_svc.db.providers import Provider

ALLOC = tables.allocations
RP = tables.resource_providers
RC = tables.resource_classes


@dataclass(frozen=True)
class Allocation:
    provider_uuid: str
    provider_generation: int
    consumer_uuid: str
    consumer_generation: int
    resource_class: str
    used: int
    created_at: datetime.datetime | None
    updated_at: datetime.datetime | None
    # When the consumer's hold expires (1.51; microseconds since the epoch by
    # the database's clock); None: the allocation is confirmed.
    hold_expires_at: int | None = None

    @property
    def modified(self) -> datetime.datetime | None:
        return self.updated_at or self.created_at


@dataclass(frozen=True)
class Wanted:
    """The complete allocations a request gives one consumer, with its owner."""

    consumer_uuid: str
    resources: dict[str, dict[str, int]]  # provider uuid -> class -> amount; {} removes
    project_id: str | None = None  # None: the configured incomplete consumer ids
    user_id: str | None = None
    generation: int | None = None  # checked only when check_generation is asked for
    consumer_type: str | None = None  # None: leave the consumer's type alone
    # 1.51: hold the allocations this many seconds (made or extended); None:
    # they are permanent (a hold the consumer had is confirmed), unless
    # ``keep_hold`` (an allocation delta leaves the consumer's hold as it is).
    hold_ttl: int | None = None
    keep_hold: bool = False

    def owner_ids(self, incomplete: tuple[str, str]) -> tuple[str, str]:
        """(project, user): the request's, or the configured ``incomplete`` ones
        when it gives none (before 1.8; every schema wants both or neither)."""
        if self.project_id is None or self.user_id is None:
            return incomplete
        return self.project_id, self.user_id


_SELECT = (
    sa.select(
        ALLOC.c.used,
        ALLOC.c.consumer_id,
        ALLOC.c.created_at,
        ALLOC.c.updated_at,
        RP.c.uuid.label("provider_uuid"),
        RP.c.generation.label("provider_generation"),
        RC.c.name.label("resource_class"),
        consumers.CONSUMER.c.generation.label("consumer_generation"),
        holds.HOLD.c.expires_at.label("hold_expires_at"),
    )
    .select_from(
        ALLOC.join(RP, RP.c.id == ALLOC.c.resource_provider_id)
        .join(RC, RC.c.id == ALLOC.c.resource_class_id)
        .join(consumers.CONSUMER, consumers.CONSUMER.c.uuid == ALLOC.c.consumer_id)
        .outerjoin(holds.HOLD, holds.HOLD.c.consumer_id == ALLOC.c.consumer_id)
    )
    .where(holds.live())  # a hold that has expired is gone for every read (1.51)
    .order_by(ALLOC.c.id)
)


def _select() -> sa.Select:
    return _SELECT


def _record(row: sa.Row) -> Allocation:
    return Allocation(
        provider_uuid=row.provider_uuid,
        provider_generation=row.provider_generation,
        consumer_uuid=row.consumer_id,
        consumer_generation=row.consumer_generation,
        resource_class=row.resource_class,
        used=row.used,
        created_at=row.created_at,
        updated_at=row.updated_at,
        hold_expires_at=row.hold_expires_at,
    )


def _nameable(text: str) -> bool:
    """False for text no row can hold (PostgreSQL refuses NUL even in a query)."""
    return "\x00" not in text


def for_consumer(conn: Connection, consumer_uuid: str) -> tuple[Consumer | None, list[Allocation]]:
    if not _nameable(consumer_uuid):
        return None, []
    found = [_record(row) for row in conn.execute(_BY_CONSUMER, {"consumer": consumer_uuid})]
    consumer = consumers.find(conn, consumer_uuid) if found else None
    return consumer, found


def for_provider(conn: Connection, provider_id: int) -> list[Allocation]:
    rows = conn.execute(_BY_PROVIDER, {"provider_id": provider_id})
    return [_record(row) for row in rows]


# Built once (SQLAlchemy keys a statement by walking it, once per object).
_BY_CONSUMER = _SELECT.where(ALLOC.c.consumer_id == sa.bindparam("consumer", type_=sa.String))
_BY_PROVIDER = _SELECT.where(ALLOC.c.resource_provider_id == sa.bindparam("provider_id"))
_DELETE_OF_CONSUMER = sa.delete(ALLOC).where(
    ALLOC.c.consumer_id == sa.bindparam("consumer", type_=sa.String)
)


def _select_with_consumers() -> sa.Select:
    """The allocations with their consumers' owners and types, in one statement:
    what a bulk read needs, whatever the number of consumers."""
    return consumers.with_owners(_select().add_columns(*consumers.owner_columns()))


Holdings = dict[str, tuple[Consumer, list[Allocation]]]


def _holdings(conn: Connection, condition: sa.ColumnElement[bool]) -> Holdings:
    """{consumer uuid (as stored): (consumer, its allocations)}, consumers in
    the order of their first allocation."""
    found: Holdings = {}
    for row in conn.execute(_select_with_consumers().where(condition)):
        entry = found.setdefault(row.consumer_id, (consumers.record(row), []))
        entry[1].append(_record(row))
    return found


def for_consumers(conn: Connection, consumer_uuids: list[str]) -> Holdings:
    """Bulk GET /allocations?consumer_uuid=: one statement for any number."""
    wanted = [uuid for uuid in consumer_uuids if _nameable(uuid)]
    if not wanted:
        return {}
    return _holdings(conn, ALLOC.c.consumer_id.in_(wanted))


def for_providers(
    conn: Connection, provider_uuids: list[str] | None = None, in_tree: str | None = None
) -> Holdings:
    """Every consumer holding allocations against the providers (or against
    any provider of ``in_tree``'s tree), each with all its allocations,
    theirs elsewhere included: one statement. Unknown providers match nothing."""
    held, holder = ALLOC.alias("held"), RP.alias("holder")
    holding = sa.select(held.c.consumer_id).join(holder, holder.c.id == held.c.resource_provider_id)
    if in_tree is not None:
        tree = RP.alias("tree")
        root = sa.select(tree.c.root_provider_id).where(tree.c.uuid == in_tree)
        holding = holding.where(holder.c.root_provider_id.in_(root))
    else:
        holding = holding.where(holder.c.uuid.in_(provider_uuids or []))
    return _holdings(conn, ALLOC.c.consumer_id.in_(holding))


def delete_for_consumer(conn: Connection, consumer_uuid: str) -> bool:
    """DELETE /allocations/{consumer}: no generations involved, as upstream."""
    if not _nameable(consumer_uuid):
        return False
    holds.sweep(conn, [consumer_uuid], at_most=0)  # a hold that expired is gone already
    result = conn.execute(_DELETE_OF_CONSUMER, {"consumer": consumer_uuid})
    consumers.delete_unused(conn, [consumer_uuid])
    holds.release(conn, [consumer_uuid])
    return result.rowcount > 0


def held_by(conn: Connection, consumer_uuids: list[str]) -> Sequence[sa.Row]:
    """(consumer_id, provider_uuid, name: the class) of each of the
    consumers' allocations, in the order they were made."""
    if not consumer_uuids:
        return []
    return conn.execute(
        sa.select(ALLOC.c.consumer_id, RP.c.uuid.label("provider_uuid"), RC.c.name)
        .select_from(
            ALLOC.join(RP, RP.c.id == ALLOC.c.resource_provider_id).join(
                RC, RC.c.id == ALLOC.c.resource_class_id
            )
        )
        .where(ALLOC.c.consumer_id.in_(consumer_uuids))
        .order_by(ALLOC.c.id)
    ).all()


_INSERT = sa.insert(ALLOC)


def add(conn: Connection, rows: list[dict[str, int | str]]) -> None:
    """Insert allocation rows (resource_provider_id, resource_class_id,
    consumer_id, used), all in one statement."""
    if rows:
        conn.execute(_INSERT, rows)


_BUMP_ONE = (
    sa.update(RP)
    .where(RP.c.id == sa.bindparam("b_id"), RP.c.generation == sa.bindparam("b_seen"))
    .values(generation=RP.c.generation + 1, updated_at=sa.bindparam("b_now"))
)


def bump_providers(conn: Connection, touched: list[Provider]) -> None:
    """One conditional UPDATE for all: each provider's generation must still be as seen."""
    seen = {p.id: p.generation for p in touched}
    if not seen:
        return
    if len(seen) == 1:  # nearly every claim: a statement built once
        ((provider_id, generation),) = seen.items()
        result = conn.execute(
            _BUMP_ONE, {"b_id": provider_id, "b_seen": generation, "b_now": tables.utcnow()}
        )
        if result.rowcount != 1:
            raise ConcurrentUpdate(touched[0].uuid)
        return
    result = conn.execute(
        sa.update(RP)
        .where(RP.c.id.in_(seen), RP.c.generation == sa.case(seen, value=RP.c.id))
        .values(generation=RP.c.generation + 1, updated_at=tables.utcnow())
    )
    if result.rowcount != len(seen):
        raise ConcurrentUpdate(touched[0].uuid)
