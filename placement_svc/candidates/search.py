"""SQL for each request group: which providers (in which trees) can serve it.

A bounded number of statements per request, whatever the number of
providers: one capacity query per requested resource class, then one each
for the providers of the trees involved, their traits, their aggregates and
the sharing providers' aggregate neighbours. Per-group filtering of those
rows happens here in Python; combining groups into candidates is merge.py.
"""

from __future__ import annotations

import sqlalchemy as sa
from sqlalchemy.engine import Connection

from placement_svc import errors
from placement_svc.candidates.model import Found, Provider, Room
from placement_svc.candidates.request import Request, RequestGroup
from placement_svc.db import filters, names, tables

SHARING_TRAIT = "MISC_SHARES_VIA_AGGREGATE"
RP = tables.resource_providers
INV = tables.inventories
ALLOC = tables.allocations
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
    wanted = {
        rc_ids[rc]: (rc, amount)
        for rc, amount in smallest.items()
        if amount <= tables.MAX_INT  # no inventory can hold more (max_unit is an INT)
    }
    with_room = _load_room(conn, found, wanted)
    if not with_room and all(g.resources for g in request.groups.values()):
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
    in_trees = RP.c.root_provider_id.in_(trees)
    _load_providers(conn, found, in_trees)
    # 3. Sharing providers and the trees they share with.
    missing_roots = _load_sharing(
        conn, found, trait_ids[SHARING_TRAIT] if SHARING_TRAIT in trait_ids else None
    )
    if missing_roots:
        more = RP.c.root_provider_id.in_(sorted(missing_roots))
        _load_providers(conn, found, more)
        in_trees = in_trees | more
    # 4. Traits and aggregates of every provider loaded.
    found.traits = _traits(conn, found.providers, in_trees)
    # Aggregates matter only to member_of (sharing has its own query above).
    if any(group.member_of for group in request.groups.values()):
        aggregates = _aggregates(conn, found.providers, in_trees)
    else:
        aggregates = {}
    for suffix, group in request.groups.items():
        found.options[suffix] = _group_options(found, group, aggregates, with_room)
    found.roots = _anchors(found, request, sorted({p.root_id for p in found.providers.values()}))
    return found


def _load_room(conn, found: Found, wanted: dict[int, tuple[str, int]]) -> dict[str, list[int]]:
    """Room of the requested classes: class -> providers (in id order) with room
    for the class's smallest amount.

    Two plain reads, inventories and the used amounts of those classes, and the
    arithmetic in Python: cheaper on every backend than joining an aggregate
    and filtering in SQL, and every row read also serves the provider
    summaries (found.inventory), so they need not read these classes again.
    """
    with_room: dict[str, list[int]] = {}
    if not wanted:
        return with_room
    ids = sorted(wanted)
    used = {
        (pid, rc_id): int(amount)
        for pid, rc_id, amount in conn.execute(
            sa.select(
                ALLOC.c.resource_provider_id,
                ALLOC.c.resource_class_id,
                sa.func.sum(ALLOC.c.used),
            )
            .where(ALLOC.c.resource_class_id.in_(ids))
            .group_by(ALLOC.c.resource_provider_id, ALLOC.c.resource_class_id)
        ).all()
    }
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
        ).where(INV.c.resource_class_id.in_(ids))
    ).all()
    room = found.room
    inventory = found.inventory
    for pid, rc_id, total, reserved, ratio, min_unit, max_unit, step_size in rows:
        rc, amount = wanted[rc_id]
        taken = used.get((pid, rc_id), 0)
        capacity = (total - reserved) * ratio
        per_class = inventory.get(pid)
        if per_class is None:
            per_class = inventory[pid] = {}
        per_class[rc] = (int(capacity), taken)
        free = capacity - taken
        if free >= amount and max_unit >= amount:
            room[(pid, rc)] = Room(free, min_unit, max_unit, step_size, int(capacity), taken)
            holders = with_room.get(rc)
            if holders is None:
                holders = with_room[rc] = []
            holders.append(pid)
    for holders in with_room.values():
        holders.sort()
    return with_room


def _load_providers(conn, found: Found, where) -> None:
    providers = found.providers
    for pid, uuid, parent_id, root_id in conn.execute(
        sa.select(RP.c.id, RP.c.uuid, RP.c.parent_provider_id, RP.c.root_provider_id).where(where)
    ).all():
        providers[pid] = Provider(pid, uuid, parent_id, root_id)


def _load_sharing(conn, found: Found, sharing_trait_id: int | None) -> set[int]:
    """Sharing providers among those loaded and the roots they share with;
    returns the roots of trees shared with that are not loaded yet."""
    if sharing_trait_id is None:
        return set()
    found.sharing = {
        pid
        for (pid,) in conn.execute(
            sa.select(RPT.c.resource_provider_id).where(RPT.c.trait_id == sharing_trait_id)
        ).all()
        if pid in found.providers
    }
    if not found.sharing:
        return set()
    mine = RPA.alias("mine")
    theirs = RPA.alias("theirs")
    rows = conn.execute(
        sa.select(mine.c.resource_provider_id, RP.c.root_provider_id)
        .select_from(
            mine.join(theirs, theirs.c.aggregate_id == mine.c.aggregate_id).join(
                RP, RP.c.id == theirs.c.resource_provider_id
            )
        )
        .where(mine.c.resource_provider_id.in_(sorted(found.sharing)))
        .distinct()
    ).all()
    for sharing_id, root_id in rows:
        found.shares_with.setdefault(sharing_id, set()).add(root_id)
    for sharing_id in found.sharing:
        found.shares_with.setdefault(sharing_id, set()).add(found.providers[sharing_id].root_id)
    # The trees shared with must be loaded too (their providers may serve other groups).
    return set().union(*found.shares_with.values()) - {p.root_id for p in found.providers.values()}


def _by_provider(rows, providers) -> dict[int, frozenset[str]]:
    """(provider, name) rows -> provider -> names; equal sets are one object,
    and every provider loaded gets one (empty if it has none)."""
    names_of: dict[int, list[str]] = {}
    for pid, name in rows:
        held = names_of.get(pid)
        if held is None:
            names_of[pid] = [name]
        else:
            held.append(name)
    shared: dict[tuple, frozenset[str]] = {(): frozenset()}
    result = {}
    for pid in providers:
        key = tuple(sorted(names_of.get(pid, ())))
        value = shared.get(key)
        if value is None:
            value = shared[key] = frozenset(key)
        result[pid] = value
    return result


def _traits(conn, providers, in_trees) -> dict[int, frozenset[str]]:
    if not providers:
        return {}
    rows = conn.execute(
        sa.select(RPT.c.resource_provider_id, tables.traits.c.name)
        .select_from(
            RPT.join(tables.traits, tables.traits.c.id == RPT.c.trait_id).join(
                RP, RP.c.id == RPT.c.resource_provider_id
            )
        )
        .where(in_trees)
    ).all()
    return _by_provider(rows, providers)


def _aggregates(conn, providers, in_trees) -> dict[int, frozenset[str]]:
    if not providers:
        return {}
    rows = conn.execute(
        sa.select(RPA.c.resource_provider_id, AGG.c.uuid)
        .select_from(
            RPA.join(AGG, AGG.c.id == RPA.c.aggregate_id).join(
                RP, RP.c.id == RPA.c.resource_provider_id
            )
        )
        .where(in_trees)
    ).all()
    return _by_provider(rows, providers)


def _group_options(found: Found, group: RequestGroup, aggregates, with_room) -> dict:
    """Providers that may serve the group (per class for the unsuffixed group),
    in id order."""
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

    room = found.room
    if not group.same_provider:
        return {
            rc: [
                pid
                for pid in with_room.get(rc, ())
                if pid in found.providers and room[(pid, rc)].fits(amount) and eligible(pid)
            ]
            for rc, amount in group.resources.items()
        }
    if not group.resources:  # a resourceless group: any provider that qualifies
        return {None: [pid for pid in sorted(found.providers) if eligible(pid)]}
    # One provider serves the whole group: start from the class fewest hold.
    scarcest = min(group.resources, key=lambda rc: len(with_room.get(rc, ())))
    return {
        None: [
            pid
            for pid in with_room.get(scarcest, ())
            if pid in found.providers
            and all(
                (pid, rc) in room and room[(pid, rc)].fits(amount)
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
    conn: Connection, found: Found, provider_ids: set[int], requested: set[str], every_class: bool
) -> dict[int, dict[str, tuple]]:
    """provider -> class -> (capacity, used), for provider summaries: the
    requested classes, and with ``every_class`` (1.27+) all the others too.

    The room query already read the requested classes of every provider in
    the trees searched; only the other classes are read here, in one query
    over the same trees.
    """
    result: dict[int, dict[str, tuple]] = {}
    for pid in provider_ids:
        result[pid] = dict(found.inventory.get(pid, ()))
    if not (provider_ids and every_class):
        return result
    roots = {found.providers[pid].root_id for pid in provider_ids}
    usage = filters.usage_subquery()
    rc = tables.resource_classes
    rows = conn.execute(
        sa.select(
            INV.c.resource_provider_id,
            rc.c.name,
            INV.c.total,
            INV.c.reserved,
            INV.c.allocation_ratio,
            sa.func.coalesce(usage.c.used, 0),
        )
        .select_from(
            INV.join(rc, rc.c.id == INV.c.resource_class_id)
            .join(RP, RP.c.id == INV.c.resource_provider_id)
            .outerjoin(
                usage,
                sa.and_(
                    usage.c.resource_provider_id == INV.c.resource_provider_id,
                    usage.c.resource_class_id == INV.c.resource_class_id,
                ),
            )
        )
        .where(filters.ids_in(RP.c.root_provider_id, roots), rc.c.name.not_in(sorted(requested))),
        execution_options=filters.NO_STATEMENT_CACHE,
    ).all()
    for pid, name, total, reserved, ratio, used in rows:
        per_class = result.get(pid)
        if per_class is not None:
            per_class[name] = (int((total - reserved) * ratio), int(used))
    return result
