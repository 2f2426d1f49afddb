"""SQL for each request group: which providers (in which trees) can serve it.

A bounded number of statements per request, whatever the number of
providers: one capacity query per requested resource class, then one each
for the providers of the trees involved, their traits, their aggregates and
the sharing providers' aggregate neighbours. Per-group filtering of those
rows happens here in Python; combining groups into candidates is merge.py.
"""

from __future__ import annotations

from collections import defaultdict

import sqlalchemy as sa
from sqlalchemy.engine import Connection

from placement_svc import errors
from placement_svc.candidates.model import Found, Provider, Room
from placement_svc.candidates.request import Request, RequestGroup
from placement_svc.db import filters, names, tables

SHARING_TRAIT = "MISC_SHARES_VIA_AGGREGATE"
RP = tables.resource_providers
INV = tables.inventories
RPT = tables.resource_provider_traits
RPA = tables.resource_provider_aggregates
AGG = tables.placement_aggregates


def search(conn: Connection, request: Request) -> Found:
    found = Found()
    trait_ids = names.trait_ids(conn, request.trait_names() | {SHARING_TRAIT})
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
    for rc, amount in smallest.items():
        if amount > tables.MAX_INT:  # no inventory can hold it (max_unit is an INT)
            continue
        for row in conn.execute(_room_query(rc_ids[rc], amount)).all():
            found.room[(row.resource_provider_id, rc)] = Room(
                row.free,
                row.min_unit,
                row.max_unit,
                row.step_size,
                int((row.total - row.reserved) * row.allocation_ratio),
                int(row.used),
            )
    with_room = {pid for pid, _rc in found.room}
    if not with_room and all(g.resources for g in request.groups.values()):
        return found
    # 2. The trees those providers are in, and every provider of them.
    _load_trees(conn, found, with_room)
    # 3. Sharing providers and the trees they share with.
    _load_sharing(conn, found, trait_ids[SHARING_TRAIT] if SHARING_TRAIT in trait_ids else None)
    # 4. Traits and aggregates of every provider loaded.
    found.traits = _traits(conn, found.providers)
    # Aggregates matter only to member_of (sharing has its own query above).
    if any(group.member_of for group in request.groups.values()):
        aggregates = _aggregates(conn, found.providers)
    else:
        aggregates = {}
    trees = {p.root_id: None for p in found.providers.values()}
    for suffix, group in request.groups.items():
        found.options[suffix] = _group_options(found, group, aggregates, request)
    found.roots = _anchors(found, request, sorted(trees))
    return found


def _room_query(rc_id: int, amount: int):
    usage = filters.usage_subquery(rc_id)
    used = sa.func.coalesce(usage.c.used, 0)
    free = (INV.c.total - INV.c.reserved) * INV.c.allocation_ratio - used
    return (
        sa.select(
            INV.c.resource_provider_id,
            free.label("free"),
            INV.c.min_unit,
            INV.c.max_unit,
            INV.c.step_size,
            INV.c.total,
            INV.c.reserved,
            INV.c.allocation_ratio,
            used.label("used"),
        )
        .select_from(
            INV.outerjoin(usage, usage.c.resource_provider_id == INV.c.resource_provider_id)
        )
        .where(INV.c.resource_class_id == rc_id, free >= amount, INV.c.max_unit >= amount)
    )


def _load_trees(conn, found: Found, provider_ids: set[int]) -> None:
    if not provider_ids:
        return
    roots = sa.select(RP.c.root_provider_id).where(RP.c.id.in_(provider_ids))
    rows = conn.execute(
        sa.select(RP.c.id, RP.c.uuid, RP.c.parent_provider_id, RP.c.root_provider_id).where(
            RP.c.root_provider_id.in_(roots.scalar_subquery())
        )
    ).all()
    for row in rows:
        found.providers[row.id] = Provider(
            row.id, row.uuid, row.parent_provider_id, row.root_provider_id
        )


def _load_sharing(conn, found: Found, sharing_trait_id: int | None) -> None:
    if sharing_trait_id is None:
        return
    found.sharing = {
        pid
        for (pid,) in conn.execute(
            sa.select(RPT.c.resource_provider_id).where(RPT.c.trait_id == sharing_trait_id)
        )
        if pid in found.providers
    }
    if not found.sharing:
        return
    mine = RPA.alias("mine")
    theirs = RPA.alias("theirs")
    rows = conn.execute(
        sa.select(mine.c.resource_provider_id, RP.c.root_provider_id)
        .select_from(
            mine.join(theirs, theirs.c.aggregate_id == mine.c.aggregate_id).join(
                RP, RP.c.id == theirs.c.resource_provider_id
            )
        )
        .where(mine.c.resource_provider_id.in_(found.sharing))
        .distinct()
    ).all()
    for sharing_id, root_id in rows:
        found.shares_with.setdefault(sharing_id, set()).add(root_id)
    for sharing_id in found.sharing:
        found.shares_with.setdefault(sharing_id, set()).add(found.providers[sharing_id].root_id)
    # The trees shared with must be loaded too (their providers may serve other groups).
    missing_roots = set().union(*found.shares_with.values()) - {
        p.root_id for p in found.providers.values()
    }
    if missing_roots:
        rows = conn.execute(
            sa.select(RP.c.id, RP.c.uuid, RP.c.parent_provider_id, RP.c.root_provider_id).where(
                RP.c.root_provider_id.in_(missing_roots)
            )
        ).all()
        for row in rows:
            found.providers[row.id] = Provider(
                row.id, row.uuid, row.parent_provider_id, row.root_provider_id
            )


def _traits(conn, providers) -> dict[int, frozenset[str]]:
    by_provider: dict[int, set[str]] = defaultdict(set)
    if providers:
        rows = conn.execute(
            sa.select(RPT.c.resource_provider_id, tables.traits.c.name)
            .join(tables.traits, tables.traits.c.id == RPT.c.trait_id)
            .where(RPT.c.resource_provider_id.in_(list(providers)))
        ).all()
        for pid, name in rows:
            by_provider[pid].add(name)
    return {pid: frozenset(by_provider.get(pid, ())) for pid in providers}


def _aggregates(conn, providers) -> dict[int, frozenset[str]]:
    by_provider: dict[int, set[str]] = defaultdict(set)
    if providers:
        rows = conn.execute(
            sa.select(RPA.c.resource_provider_id, AGG.c.uuid)
            .join(AGG, AGG.c.id == RPA.c.aggregate_id)
            .where(RPA.c.resource_provider_id.in_(list(providers)))
        ).all()
        for pid, uuid in rows:
            by_provider[pid].add(uuid)
    return {pid: frozenset(by_provider.get(pid, ())) for pid in providers}


def _group_options(found: Found, group: RequestGroup, aggregates, request) -> dict:
    """Providers that may serve the group (per class for the unsuffixed group)."""
    tree_root = None
    if group.in_tree is not None:
        tree = next((p for p in found.providers.values() if p.uuid == group.in_tree), None)
        tree_root = tree.root_id if tree is not None else -1

    unconstrained = tree_root is None and not group.member_of and not group.required

    def eligible(pid: int) -> bool:
        if unconstrained:
            return True
        provider = found.providers[pid]
        if tree_root is not None and provider.root_id != tree_root:
            return False
        # For the unsuffixed group an aggregate on a root spans its tree: the
        # provider itself or its root must meet every member_of. A sharing
        # provider, and a granular group's provider, must meet them itself.
        if group.member_of:
            holders = [aggregates[pid]]
            if not group.same_provider and pid not in found.sharing:
                holders.append(aggregates.get(provider.root_id, frozenset()))
            if group.member_of.any_of and not any(
                all(mine & any_of for any_of in group.member_of.any_of) for mine in holders
            ):
                return False
            if any(mine & group.member_of.forbidden for mine in holders):
                return False
        traits = found.traits[pid]
        if traits & group.required.forbidden:
            return False
        if group.same_provider and any(not (traits & any_of) for any_of in group.required.any_of):
            return False
        return True

    ordered = sorted(found.providers)
    if not group.same_provider:
        return {
            rc: [
                pid
                for pid in ordered
                if (pid, rc) in found.room and found.room[(pid, rc)].fits(amount) and eligible(pid)
            ]
            for rc, amount in group.resources.items()
        }
    return {
        None: [
            pid
            for pid in ordered
            if all(
                (pid, rc) in found.room and found.room[(pid, rc)].fits(amount)
                for rc, amount in group.resources.items()
            )
            and eligible(pid)
        ]
    }


def _anchors(found: Found, request: Request, roots: list[int]) -> list[int]:
    """Trees a candidate may be built on: root_required is checked on the root."""
    if not (request.root_required or request.root_forbidden):
        return roots
    return [
        root
        for root in roots
        if request.root_required <= found.traits[root]
        and not (request.root_forbidden & found.traits[root])
    ]


def inventories_of(
    conn: Connection, found: Found, provider_ids: set[int], requested: set[str]
) -> dict[int, dict[str, tuple]]:
    """provider -> class -> (capacity, used), for provider summaries.

    The room queries already read the requested classes of every provider
    with room; only the other classes, and the requested ones of providers
    the room queries skipped, are read here, in one query.
    """
    result: dict[int, dict[str, tuple]] = {}
    unsure = set()
    for pid in provider_ids:
        for rc in requested:
            room = found.room.get((pid, rc))
            if room is None:
                unsure.add(pid)
            else:
                result.setdefault(pid, {})[rc] = (room.capacity, room.used)
    if not provider_ids:
        return result
    usage = filters.usage_subquery()
    rc = tables.resource_classes
    other_classes = rc.c.name.not_in(requested) if requested else sa.true()
    wanted = INV.c.resource_provider_id.in_(provider_ids) & other_classes
    if unsure:
        wanted = wanted | INV.c.resource_provider_id.in_(unsure)
    rows = conn.execute(
        sa.select(
            INV.c.resource_provider_id,
            rc.c.name,
            INV.c.total,
            INV.c.reserved,
            INV.c.allocation_ratio,
            sa.func.coalesce(usage.c.used, 0).label("used"),
        )
        .select_from(
            INV.join(rc, rc.c.id == INV.c.resource_class_id).outerjoin(
                usage,
                sa.and_(
                    usage.c.resource_provider_id == INV.c.resource_provider_id,
                    usage.c.resource_class_id == INV.c.resource_class_id,
                ),
            )
        )
        .where(wanted)
    ).all()
    for row in rows:
        capacity = int((row.total - row.reserved) * row.allocation_ratio)
        result.setdefault(row.resource_provider_id, {})[row.name] = (capacity, int(row.used))
    return result
