"""Units of work on allocations, and every rule of an allocation write.

A write names, for each consumer it concerns, the complete set of
allocations the consumer is to hold (an empty set removes them all). It runs
inside the caller's one transaction, in upstream's order:

1. the consumers are found or created (with their projects, users and
   types), their generations checked when the request carries them (1.28);
2. every provider named must exist;
3. ``replace``: the classes must exist; the generation of every provider the
   write touches is bumped with a conditional UPDATE before anything else,
   so a concurrent writer on the same provider either waits for us and then
   fails its bump, or made its change before we read and we fail ours
   (``ConcurrentUpdate``); then the consumers' old allocations go, the
   capacity rules (ops/capacity.py) are checked against usage without
   them, the new rows are inserted, the consumers' generations are bumped
   and consumers left with nothing are removed.

The providers a write touches are those its new allocations name, plus
those holding the current allocations of a consumer given none; a provider
a consumer merely moves away from is not bumped (only usage increases need
guarding), nor is any by DELETE /allocations/{consumer}: upstream's
generations move exactly so, and clients see them.

Bumping first also keeps MySQL/MariaDB from deadlocking: inserting an
allocation takes a shared lock on its provider row (the foreign key), which
two writers could otherwise both hold while each waits to update the row.

A provider generation conflict met by the bump means another writer
changed a provider between our read and our write, with no generation of
the client's at stake: it is reported as ``ProviderChanged``, which the
unit of work's Database runs again whole (db/retries.py), up to
``[placement] allocation_conflict_retry_count`` more times, before the
conflict is answered. A consumer generation conflict is never retried: only
the client can decide what the consumer's allocations should now be.
"""

from __future__ import annotations

from dataclasses import dataclass

from sqlalchemy.engine import Connection

from placement_svc.db import allocations as store
from placement_svc.db import capacity as figures
from placement_svc.db import consumers, holds, providers, tables
from placement_svc.db.allocations import Allocation, Wanted
from placement_svc.db.consumers import Consumer, Owner
from placement_svc.db.exceptions import (
    AllocationProviderNotFound,
    ConcurrentUpdate,
    ConsumerChanged,
    ConsumerGenerationConflict,
    ConsumerMoved,
    ProviderChanged,
    UnknownResourceClass,
)
from placement_svc.db.providers import Provider
from placement_svc.ops import capacity
from placement_svc.ops.exceptions import (
    HoldExpired,
    NoAllocations,
    OwnerMissing,
    RemovingTooMuch,
)

# A read with no rule beyond the data layer's.
for_consumer = store.for_consumer


def for_provider(conn: Connection, uuid: str) -> tuple[Provider, list[Allocation]]:
    provider = providers.get(conn, uuid)
    return provider, store.for_provider(conn, provider.id)


Holding = tuple[Consumer | None, list[Allocation]]


def for_consumers(conn: Connection, consumer_uuids: list[str]) -> dict[str, Holding]:
    """GET /allocations?consumer_uuid= (1.46): each uuid asked, as spelled,
    with its consumer and allocations ``(None, [])`` when it has none, as
    the single read. A uuid asked in capitals also finds a consumer stored
    in lower case (as PUT stores it); beyond that the database compares, as
    for the single read (POST /allocations keeps the client's spelling)."""
    asked = list(dict.fromkeys(consumer_uuids))
    found = store.for_consumers(conn, list(dict.fromkeys(asked + [u.lower() for u in asked])))
    by_lower = {uuid.lower(): holding for uuid, holding in found.items()}
    return {uuid: found.get(uuid) or by_lower.get(uuid.lower()) or (None, []) for uuid in asked}


def for_providers(
    conn: Connection, provider_uuids: list[str] | None = None, in_tree: str | None = None
) -> dict[str, Holding]:
    """GET /allocations?resource_provider_uuid= or ?in_tree= (1.46): every
    consumer with allocations against those providers, with all of its
    allocations. An unknown provider (or tree) matches nothing, as
    GET /resource_providers?in_tree= of one answers an empty list."""
    return dict(store.for_providers(conn, provider_uuids=provider_uuids, in_tree=in_tree))


def write(
    conn: Connection, wanted: list[Wanted], check_generation: bool, incomplete: tuple[str, str]
) -> None:
    """PUT and POST /allocations: the consumers (their generations checked
    from 1.28), then the providers they name, then the allocations."""
    # A consumer whose hold expired is gone already (1.51): its rows go now,
    # and with them a few other expired holds' (the sweep's bound).
    swept = holds.sweep(conn, [item.consumer_uuid for item in wanted])
    ensured = ensure_consumers(conn, wanted, check_generation, incomplete)
    known = resolve_providers(conn, wanted)
    replace(conn, wanted, ensured, known)
    settle_holds(conn, wanted, swept.held)


def settle_holds(conn: Connection, wanted: list[Wanted], held: frozenset[str]) -> None:
    """After the allocations are written (1.51): a consumer given ``hold``
    holds them for its ttl from now (made, or extended); one given none has
    them for good (its hold, of those ``held``, is confirmed), unless the
    write is a delta, which leaves the hold as it was. (A consumer left with
    nothing is removed with its hold: consumers.delete_unused.)"""
    for item in wanted:
        if item.resources and item.hold_ttl is not None:
            holds.hold(conn, item.consumer_uuid, item.hold_ttl)
        elif item.resources and not item.keep_hold and item.consumer_uuid in held:
            holds.note(conn, holds.CONFIRMED, holds.release(conn, [item.consumer_uuid]))


@dataclass(frozen=True)
class Delta:
    """PATCH /allocations/{consumer} (1.50): amounts to add and to take
    away, provider uuid -> class -> amount; the generation the client saw
    when ``check_generation`` (None: a consumer it believes new); the owner
    to give the consumer (None: the one it has)."""

    add: dict[str, dict[str, int]]
    remove: dict[str, dict[str, int]]
    check_generation: bool = False
    generation: int | None = None
    project_id: str | None = None
    user_id: str | None = None
    consumer_type: str | None = None


def change(
    conn: Connection, consumer_uuid: str, delta: Delta, incomplete: tuple[str, str]
) -> tuple[Consumer | None, list[Allocation]]:
    """Apply ``delta`` to the consumer's allocations as they are, then write
    them as PUT does (the same capacity and inventory rules); returns the
    consumer and its allocations after.

    The consumer's row is held first, so changes of one consumer take turns;
    one that still finds the consumer changed between its read and its
    write (a consumer made by two at once, a Galera node's certification)
    raises ``ConsumerMoved``, and the whole unit of work runs again: without
    a generation of the client's at stake, the client never sees it.
    """
    # A hold that expired is gone already; the hold's row before the
    # consumer's, the order every writer takes them in.
    holds.sweep(conn, [consumer_uuid], at_most=0)
    consumers.lock(conn, consumer_uuid)
    consumer = consumers.find(conn, consumer_uuid)
    if delta.check_generation:
        expected = consumer.generation if consumer is not None else None
        if delta.generation != expected:
            raise ConsumerGenerationConflict(consumer_uuid, expected, delta.generation)
    if consumer is None and (delta.project_id is None or delta.user_id is None):
        raise OwnerMissing(consumer_uuid)
    resources: dict[str, dict[str, int]] = {}
    for alloc in store.for_consumer(conn, consumer_uuid)[1] if consumer is not None else []:
        resources.setdefault(alloc.provider_uuid, {})[alloc.resource_class] = alloc.used
    for rp_uuid, amounts in delta.add.items():
        held = resources.setdefault(rp_uuid, {})
        for name, amount in amounts.items():
            held[name] = held.get(name, 0) + amount
    for rp_uuid, amounts in delta.remove.items():
        held = resources.get(rp_uuid, {})
        for name, amount in amounts.items():
            if amount > held.get(name, 0):
                raise RemovingTooMuch(consumer_uuid, rp_uuid, name, amount, held.get(name, 0))
            held[name] -= amount
            if not held[name]:
                del held[name]
    wanted = Wanted(
        consumer_uuid=consumer_uuid,
        resources={rp_uuid: held for rp_uuid, held in resources.items() if held},
        project_id=delta.project_id or (consumer.project_id if consumer else None),
        user_id=delta.user_id or (consumer.user_id if consumer else None),
        generation=consumer.generation if consumer is not None else None,
        consumer_type=delta.consumer_type,
        keep_hold=True,
    )
    try:
        write(conn, [wanted], check_generation=True, incomplete=incomplete)
    except (ConsumerGenerationConflict, ConsumerChanged) as exc:
        raise ConsumerMoved(consumer_uuid) from exc  # not the client's: ours, read above
    return for_consumer(conn, consumer_uuid)


def confirm(
    conn: Connection, consumer_uuid: str, check_generation: bool, generation: int | None
) -> None:
    """POST /allocations/{consumer}/confirm (1.51): the consumer's held
    allocations become permanent, and its generation moves; a consumer
    whose allocations are confirmed already is left as it is.

    A confirm racing the hold's expiry: the providers the allocations are
    on have their generations moved first, as a claim moves them, so a
    claim that counted the hold's room as free and the confirm cannot both
    commit (one of them finds the generation moved and runs again); and the
    expiry is read again after that, by the database's clock of that moment.
    Exactly one wins: the confirm (204, the allocations stay), or the
    expiry (HoldExpired, 409, they are gone).
    """
    # The hold's row, then the consumer's, held to the end: a sweep that
    # found the hold expired waits, then finds it gone (or it took it first,
    # and this finds it expired).
    expires_at, expired = holds.state(conn, consumer_uuid, lock=True)
    consumers.lock(conn, consumer_uuid)
    if expired:
        raise HoldExpired(consumer_uuid)
    consumer, found = store.for_consumer(conn, consumer_uuid)
    if consumer is None:
        if expires_at is not None:  # it expired between the two reads
            raise HoldExpired(consumer_uuid)
        raise NoAllocations(consumer_uuid)
    if check_generation and generation != consumer.generation:
        raise ConsumerGenerationConflict(consumer_uuid, consumer.generation, generation)
    if expires_at is None:
        return  # confirmed already
    touched = providers.by_uuids(conn, list(dict.fromkeys(a.provider_uuid for a in found)))
    try:
        store.bump_providers(conn, touched)
    except ConcurrentUpdate as exc:
        raise ProviderChanged(exc.uuid) from exc
    if holds.state(conn, consumer_uuid)[1]:
        raise HoldExpired(consumer_uuid)
    holds.note(conn, holds.CONFIRMED, holds.release(conn, [consumer_uuid]))
    consumers.bump_generations(conn, [consumer])


def delete(conn: Connection, consumer_uuid: str) -> None:
    """DELETE /allocations/{consumer}: no generations involved, as upstream."""
    if not store.delete_for_consumer(conn, consumer_uuid):
        raise NoAllocations(consumer_uuid)


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
    rc_ids, inventories = figures.classes_and_inventories(
        conn, [p.id for p in touched], [c.resource_class for c in claims]
    )
    unknown = [c.resource_class for c in claims if c.resource_class not in rc_ids]
    if unknown:
        raise UnknownResourceClass(tuple(dict.fromkeys(unknown)))
    try:
        store.bump_providers(conn, touched)
    except ConcurrentUpdate as exc:
        raise ProviderChanged(exc.uuid) from exc  # generations we read, not the client's
    consumer_uuids = [item.consumer_uuid for item in wanted]
    removed = figures.remove(conn, consumer_uuids, [p.id for p in touched], rc_ids.values())
    if claims:
        used_now = figures.usage(
            conn, {c.provider.id for c in claims}, {rc_ids[c.resource_class] for c in claims}
        )
        capacity.check(claims, rc_ids, inventories, used_now, removed)
    rows: list[dict[str, int | str]] = [
        {
            "resource_provider_id": c.provider.id,
            "resource_class_id": rc_ids[c.resource_class],
            "consumer_id": c.consumer_uuid,
            "used": c.amount,
        }
        for c in claims
        if c.amount > 0
    ]
    store.add(conn, rows)
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
    rows = store.held_by(conn, consumer_uuids)
    unseen = {row.provider_uuid for row in rows} - set(known)
    if unseen:
        where = tables.resource_providers.c.uuid.in_(unseen)
        known = {**known, **{p.uuid: p for p in providers.query(conn, where)}}
    return [(row.consumer_id, known[row.provider_uuid], row.name) for row in rows]
