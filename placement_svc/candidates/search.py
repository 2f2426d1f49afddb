"""The SQL of GET /allocation_candidates: what a request's groups could use.

A bounded number of statements per request, whatever the number of
providers: the room of the requested classes, then the providers of the
trees involved with their traits, the sharing providers' aggregate
neighbours and, for member_of, the providers' aggregates (for root_member_of
alone, the roots'). The rows become a Found; which providers may serve which
group is decided from it by eligibility.py (pure), combining groups into
candidates is merge.py.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

import sqlalchemy as sa
from sqlalchemy.engine import Connection
from sqlalchemy.sql.elements import ColumnElement

from placement_svc import errors
from placement_svc.candidates import eligibility
from placement_svc.candidates.model import Found, Provider, Room
from placement_svc.candidates.request import Request
from placement_svc.db import names, tables

SHARING_TRAIT = "MISC_SHARES_VIA_AGGREGATE"
RP = tables.resource_providers
INV = tables.inventories
ALLOC = tables.allocations
TRAIT = tables.traits
RPT = tables.resource_provider_traits
RPA = tables.resource_provider_aggregates
AGG = tables.placement_aggregates


def search(conn: Connection, request: Request) -> Found:
    found = Found()
    trait_ids = names.trait_ids(conn, request.trait_names())
    unknown = sorted(request.trait_names() - set(trait_ids))
    if unknown:
        raise errors.BadRequest(f"No such trait(s): {', '.join(unknown)}.")
    rc_ids = names.resource_class_ids(conn, request.resource_classes())
    unknown = sorted(request.resource_classes() - set(rc_ids))
    if unknown:
        raise errors.BadRequest(
            f"Invalid resource class in resources parameter: No such resource class "
            f"{', '.join(unknown)}."
        )
    # 1. Room for every requested class, on providers that can take the least amount.
    smallest: dict[str, int] = {}
    for group in request.groups.values():
        for rc, amount in group.resources.items():
            smallest[rc] = min(amount, smallest.get(rc, amount))
    wanted = {
        rc_ids[rc]: (rc, amount)
        for rc, amount in smallest.items()
        if amount <= tables.MAX_INT  # no inventory can hold more (max_unit is an INT)
    }
    found.with_room = _load_room(conn, found, wanted)
    if not found.with_room and all(g.resources for g in request.groups.values()):
        return found
    # 2. Every provider of the trees holding the requested classes.
    trees = (
        sa.select(RP.c.root_provider_id)
        .where(
            RP.c.id.in_(
                sa.select(INV.c.resource_provider_id).where(
                    INV.c.resource_class_id.in_(sorted(wanted))
                )
            )
        )
        .scalar_subquery()
    )
    in_trees: ColumnElement[bool] = RP.c.root_provider_id.in_(trees)
    trait_names: dict[int, list[str]] = {}
    _load_providers(conn, found, in_trees, trait_names)
    # 3. Sharing providers and the trees they share with.
    found.sharing = {pid for pid, held in trait_names.items() if SHARING_TRAIT in held}
    missing_roots = _load_sharing(conn, found)
    if missing_roots:
        more = RP.c.root_provider_id.in_(sorted(missing_roots))
        _load_providers(conn, found, more, trait_names)
        in_trees = in_trees | more
    found.traits = interned(trait_names, found.providers)
    # Aggregates matter only to member_of (sharing has its own query above)
    # and to root_member_of, which reads the roots' alone.
    if any(group.member_of for group in request.groups.values()):
        found.aggregates = aggregates_of(conn, found.providers, in_trees)
    elif request.root_member_of:
        roots = in_trees & (RP.c.id == RP.c.root_provider_id)
        found.aggregates = aggregates_of(conn, found.providers, roots)
    eligibility.apply(found, request)
    return found


def _load_room(
    conn: Connection, found: Found, wanted: dict[int, tuple[str, int]]
) -> dict[str, list[int]]:
    """Room of the requested classes: class -> providers (in id order) with room
    for the class's smallest amount.

    Two plain reads, inventories and the used amounts of those classes, and the
    arithmetic in Python: cheaper on every backend than joining an aggregate
    and filtering in SQL. Every row read also serves the provider summaries
    (found.room, found.full), so they need not read these classes again.
    """
    with_room: dict[str, list[int]] = {}
    if not wanted:
        return with_room
    used, rows = inventories(conn, sorted(wanted))
    room, full = found.room, found.full
    per_class = {
        rc_id: (rc, amount, used[rc_id], with_room.setdefault(rc, []).append)
        for rc_id, (rc, amount) in wanted.items()
    }
    for pid, rc_id, total, reserved, ratio, min_unit, max_unit, step_size in rows:
        rc, amount, used_of, hold = per_class[rc_id]
        taken = used_of.get(pid, 0)
        capacity = (total - reserved) * ratio
        free = capacity - taken
        if free >= amount and max_unit >= amount:
            room[(pid, rc)] = Room(free, min_unit, max_unit, step_size, int(capacity), taken)
            hold(pid)
        else:
            full[(pid, rc)] = (int(capacity), taken)
    for holders in with_room.values():
        holders.sort()
    return {rc: holders for rc, holders in with_room.items() if holders}


def inventories(
    conn: Connection, rc_ids: list[int]
) -> tuple[dict[int, dict[int, int]], Sequence[Any]]:
    """Every inventory of these classes, and their used amounts (class ->
    provider -> used): two plain reads. The rows are (provider, class,
    total, reserved, allocation_ratio, min_unit, max_unit, step_size)."""
    used: dict[int, dict[int, int]] = {rc_id: {} for rc_id in rc_ids}
    for pid, rc_id, amount in conn.execute(
        sa.select(
            ALLOC.c.resource_provider_id,
            ALLOC.c.resource_class_id,
            sa.func.sum(ALLOC.c.used),
        )
        .where(ALLOC.c.resource_class_id.in_(rc_ids))
        .group_by(ALLOC.c.resource_provider_id, ALLOC.c.resource_class_id)
    ).all():
        used[rc_id][pid] = int(amount)
    rows = conn.execute(
        sa.select(
            INV.c.resource_provider_id,
            INV.c.resource_class_id,
            INV.c.total,
            INV.c.reserved,
            INV.c.allocation_ratio,
            INV.c.min_unit,
            INV.c.max_unit,
            INV.c.step_size,
        ).where(INV.c.resource_class_id.in_(rc_ids))
    ).all()
    return used, rows


def _load_providers(
    conn: Connection, found: Found, where: ColumnElement[bool], trait_names: dict[int, list[str]]
) -> None:
    """The providers matching ``where``, with the names of their traits (one
    statement: a provider comes once per trait, or once with none)."""
    providers, trait_ids = found.providers, found.trait_ids
    rows = conn.execute(
        sa.select(
            RP.c.id,
            RP.c.uuid,
            RP.c.parent_provider_id,
            RP.c.root_provider_id,
            TRAIT.c.name,
            TRAIT.c.id,
        )
        .select_from(
            RP.outerjoin(RPT, RPT.c.resource_provider_id == RP.c.id).outerjoin(
                TRAIT, TRAIT.c.id == RPT.c.trait_id
            )
        )
        .where(where)
    ).all()
    for pid, uuid, parent_id, root_id, trait, trait_id in rows:
        if pid not in providers:
            providers[pid] = Provider(pid, uuid, parent_id, root_id)
        if trait is not None:
            trait_ids[trait] = trait_id
            held = trait_names.get(pid)
            if held is None:
                trait_names[pid] = [trait]
            else:
                held.append(trait)


def _load_sharing(conn: Connection, found: Found) -> set[int]:
    """The roots each sharing provider shares with (through an aggregate);
    returns the roots of trees shared with that are not loaded yet."""
    if not found.sharing:
        return set()
    found.shares_with = shared_roots(conn, found.sharing, found.providers)
    # The trees shared with must be loaded too (their providers may serve other groups).
    return set().union(*found.shares_with.values()) - {p.root_id for p in found.providers.values()}


def shared_roots(
    conn: Connection, sharing: set[int], providers: dict[int, Provider]
) -> dict[int, set[int]]:
    """sharing provider -> the roots of the trees it shares with: those of
    every provider in one of its aggregates, and its own."""
    mine = RPA.alias("mine")
    theirs = RPA.alias("theirs")
    rows = conn.execute(
        sa.select(mine.c.resource_provider_id, RP.c.root_provider_id)
        .select_from(
            mine.join(theirs, theirs.c.aggregate_id == mine.c.aggregate_id).join(
                RP, RP.c.id == theirs.c.resource_provider_id
            )
        )
        .where(mine.c.resource_provider_id.in_(sorted(sharing)))
        .distinct()
    ).all()
    shares_with: dict[int, set[int]] = {pid: {providers[pid].root_id} for pid in sharing}
    for sharing_id, root_id in rows:
        shares_with[sharing_id].add(root_id)
    return shares_with


def interned(names_of: dict[int, list[str]], providers: Iterable[int]) -> dict[int, frozenset[str]]:
    """provider -> its names as a frozenset, for every provider given (empty if
    it has none); equal sets are one object."""
    shared: dict[tuple[str, ...], frozenset[str]] = {(): frozenset()}
    result = {}
    for pid in providers:
        key = tuple(sorted(names_of.get(pid, ())))
        value = shared.get(key)
        if value is None:
            value = shared[key] = frozenset(key)
        result[pid] = value
    return result


def aggregates_of(
    conn: Connection, providers: dict[int, Provider], in_trees: ColumnElement[bool]
) -> dict[int, frozenset[str]]:
    if not providers:
        return {}
    names_of: dict[int, list[str]] = {}
    for pid, uuid in conn.execute(
        sa.select(RPA.c.resource_provider_id, AGG.c.uuid)
        .select_from(
            RPA.join(AGG, AGG.c.id == RPA.c.aggregate_id).join(
                RP, RP.c.id == RPA.c.resource_provider_id
            )
        )
        .where(in_trees)
    ).all():
        names_of.setdefault(pid, []).append(uuid)
    return interned(names_of, providers)


def provider_names(conn: Connection, ids: Iterable[int]) -> dict[int, str]:
    """provider id -> name, for the few an answer names (a Found has no names)."""
    wanted = sorted(set(ids))
    if not wanted:
        return {}
    return dict(conn.execute(sa.select(RP.c.id, RP.c.name).where(RP.c.id.in_(wanted))).all())
