"""Allocations: reading them by consumer or provider, and replacing them.

A write names, for each consumer it concerns, the complete set of
allocations the consumer is to hold (an empty set removes them all). It runs
inside the caller's one transaction:

1. the consumers are found or created (with their projects, users and
   types), their generations checked when the request carries them;
2. every provider named must exist;
3. ``replace``: the generation of every provider the write touches is bumped
   with a conditional UPDATE before anything else, so a concurrent writer on
   the same provider either waits for us and then fails its bump, or made
   its change before we read and we fail ours (``ConcurrentUpdate``,
   which the caller answers by re-running the whole transaction); then the
   consumers' old allocations go, the capacity rules are checked against
   usage without them, the new rows are inserted, the consumers' generations
   are bumped and consumers left with nothing are removed.

The providers a write touches are those its new allocations name, plus
those holding the current allocations of a consumer given none; a provider
a consumer merely moves away from is not bumped (only usage increases need
guarding), nor is any by DELETE /allocations/{consumer}: upstream's
generations move exactly so, and clients see them.

Bumping first also keeps MySQL/MariaDB from deadlocking: inserting an
allocation takes a shared lock on its provider row (the foreign key), which
two writers could otherwise both hold while each waits to update the row.
"""

from __future__ import annotations

import datetime
from dataclasses import dataclass

import sqlalchemy as sa
from sqlalchemy.engine import Connection

from placement_svc.db import capacity, consumers, providers, tables
from placement_svc.db.consumers import Consumer, Owner
from placement_svc.db.exceptions import (
    AllocationProviderNotFound,
    ConcurrentUpdate,
    ConsumerChanged,
    ConsumerGenerationConflict,
    UnknownResourceClass,
)
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
    )
    .select_from(
        ALLOC.join(RP, RP.c.id == ALLOC.c.resource_provider_id)
        .join(RC, RC.c.id == ALLOC.c.resource_class_id)
        .join(consumers.CONSUMER, consumers.CONSUMER.c.uuid == ALLOC.c.consumer_id)
    )
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
    )


def _nameable(text: str) -> bool:
    """False for text no row can hold (PostgreSQL refuses NUL even in a query)."""
    return "\x00" not in text


def for_consumer(conn: Connection, consumer_uuid: str) -> tuple[Consumer | None, list[Allocation]]:
    if not _nameable(consumer_uuid):
        return None, []
    found = [
        _record(row) for row in conn.execute(_select().where(ALLOC.c.consumer_id == consumer_uuid))
    ]
    consumer = consumers.find(conn, consumer_uuid) if found else None
    return consumer, found


def for_provider(conn: Connection, provider_id: int) -> list[Allocation]:
    rows = conn.execute(_select().where(ALLOC.c.resource_provider_id == provider_id))
    return [_record(row) for row in rows]


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
    result = conn.execute(sa.delete(ALLOC).where(ALLOC.c.consumer_id == consumer_uuid))
    consumers.delete_unused(conn, [consumer_uuid])
    return result.rowcount > 0


@dataclass(frozen=True)
class Ensured:
    """A consumer a write concerns, with the owner the request gives it;
    ``created``: inserted by this transaction, at its first generation."""

    consumer: Consumer
    owner: Owner
    created: bool


def ensure_consumers(
    conn: Connection,
    wanted: list[Wanted],
    check_generation: bool,
    incomplete: tuple[str, str],
) -> dict[str, Ensured]:
    """Find or create each consumer, in request order, checking generations.

    With ``check_generation`` (1.28+) a consumer that exists must be at the
    generation given, and one that does not must be given null.
    """
    existing = consumers.find_many(conn, (w.consumer_uuid for w in wanted))
    owned = [(item, *item.owner_ids(incomplete)) for item in wanted]
    pks = consumers.ensure_owners(
        conn,
        [
            key
            for item, project_id, user_id in owned
            for key in (
                ("project", project_id),
                ("user", user_id),
                *([("type", item.consumer_type)] if item.consumer_type is not None else []),
            )
        ],
    )
    found = {}
    for item, project_id, user_id in owned:
        owner = Owner(
            project_pk=pks[("project", project_id)],
            user_pk=pks[("user", user_id)],
            consumer_type_id=(
                pks[("type", item.consumer_type)] if item.consumer_type is not None else None
            ),
        )
        consumer = existing.get(item.consumer_uuid)
        created = False
        if consumer is not None:
            if check_generation and consumer.generation != item.generation:
                raise ConsumerGenerationConflict(
                    item.consumer_uuid, consumer.generation, item.generation
                )
        else:
            if check_generation and item.generation is not None:
                raise ConsumerGenerationConflict(item.consumer_uuid, None, item.generation)
            consumer, created = consumers.create(
                conn, item.consumer_uuid, owner, (project_id, user_id, item.consumer_type)
            )
            if check_generation and not created:
                raise ConsumerChanged()  # made by a racing writer meanwhile
        found[item.consumer_uuid] = Ensured(consumer, owner, created)
    return found


def resolve_providers(conn: Connection, wanted: list[Wanted]) -> dict[str, Provider]:
    """Every provider the allocations name, in one query; the first missing
    one is reported (AllocationProviderNotFound)."""
    uuids = list(dict.fromkeys(rp for item in wanted for rp in item.resources))
    if not uuids:
        return {}
    found = {p.uuid: p for p in providers.by_uuids(conn, uuids)}
    for uuid in uuids:
        if uuid not in found:
            raise AllocationProviderNotFound(uuid)
    return found


_INSERT = sa.insert(ALLOC)


def replace(
    conn: Connection,
    wanted: list[Wanted],
    ensured: dict[str, Ensured],
    known: dict[str, Provider],
) -> None:
    """Replace the consumers' allocations; ``known`` holds the providers as last seen."""
    for entry in ensured.values():
        if not entry.created:
            consumers.set_owner(conn, entry.consumer, entry.owner)
    claims = _claims(conn, wanted, known)
    touched = list({c.provider.id: c.provider for c in claims}.values())
    # Read before the generations are bumped, and safe so: a change to these
    # inventories since the providers were read moved their generations.
    rc_ids, inventories = capacity.classes_and_inventories(
        conn, [p.id for p in touched], [c.resource_class for c in claims]
    )
    unknown = [c.resource_class for c in claims if c.resource_class not in rc_ids]
    if unknown:
        raise UnknownResourceClass(tuple(dict.fromkeys(unknown)))
    bump_providers(conn, touched)
    consumer_uuids = [item.consumer_uuid for item in wanted]
    removed = capacity.remove(conn, consumer_uuids, [p.id for p in touched], rc_ids.values())
    capacity.check(conn, claims, rc_ids, inventories, removed)
    rows = [
        {
            "resource_provider_id": c.provider.id,
            "resource_class_id": rc_ids[c.resource_class],
            "consumer_id": c.consumer_uuid,
            "used": c.amount,
        }
        for c in claims
        if c.amount > 0
    ]
    if rows:
        conn.execute(_INSERT, rows)
    # A consumer this transaction created is at its first generation already.
    consumers.bump_generations(
        conn, (entry.consumer for entry in ensured.values() if not entry.created)
    )
    holding = {row["consumer_id"] for row in rows}
    consumers.delete_unused(conn, [uuid for uuid in consumer_uuids if uuid not in holding])


def _claims(
    conn: Connection, wanted: list[Wanted], known: dict[str, Provider]
) -> list[capacity.Claim]:
    """The amounts to check and write, in request order.

    A consumer given no allocations contributes its current ones at amount
    0: they are removed, and their providers count as touched.
    """
    emptied = [item.consumer_uuid for item in wanted if not item.resources]
    current = _current(conn, emptied, known)
    claims = []
    for item in wanted:
        if item.resources:
            for rp_uuid, resources in item.resources.items():
                for name, amount in resources.items():
                    claims.append(
                        capacity.Claim(item.consumer_uuid, known[rp_uuid], name, int(amount))
                    )
        else:
            claims.extend(
                capacity.Claim(item.consumer_uuid, provider, name, 0)
                for consumer_uuid, provider, name in current
                if consumer_uuid == item.consumer_uuid
            )
    return claims


def _current(
    conn: Connection, consumer_uuids: list[str], known: dict[str, Provider]
) -> list[tuple[str, Provider, str]]:
    """(consumer, provider, class) of the consumers' existing allocations."""
    if not consumer_uuids:
        return []
    rows = conn.execute(
        sa.select(ALLOC.c.consumer_id, RP.c.uuid.label("provider_uuid"), RC.c.name)
        .select_from(
            ALLOC.join(RP, RP.c.id == ALLOC.c.resource_provider_id).join(
                RC, RC.c.id == ALLOC.c.resource_class_id
            )
        )
        .where(ALLOC.c.consumer_id.in_(consumer_uuids))
        .order_by(ALLOC.c.id)
    ).all()
    unseen = {row.provider_uuid for row in rows} - set(known)
    if unseen:
        known = {**known, **{p.uuid: p for p in providers.query(conn, RP.c.uuid.in_(unseen))}}
    return [(row.consumer_id, known[row.provider_uuid], row.name) for row in rows]


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
