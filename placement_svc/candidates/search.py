"""The SQL of GET /allocation_candidates: what a request's groups could use.

A bounded number of statements per request, whatever the number of
providers: the ids of the requested traits and classes, the world
generation (and, when it has moved, the shape of the cloud again: see
world.py), and the used amounts of the requested classes. ``of_world``
(pure) makes of those the request's Found: the room of the requested
classes and the providers of the trees involved; which providers may serve
which group is decided from it by eligibility.py (pure), combining groups
into candidates is merge.py and walk.py.
"""

from __future__ import annotations

from bisect import bisect_left, bisect_right
from collections.abc import Callable, Iterable, Sequence
from typing import Any, NamedTuple

import sqlalchemy as sa
from sqlalchemy.engine import Connection
from sqlalchemy.sql.elements import ColumnElement

from placement_svc.candidates import eligibility, world
from placement_svc.candidates.model import Found, Provider, Room, UnknownNames
from placement_svc.candidates.request import Request
from placement_svc.db import names, tables

SHARING_TRAIT = world.SHARING_TRAIT
RP = tables.resource_providers
INV = tables.inventories
ALLOC = tables.allocations
TRAIT = tables.traits
RPT = tables.resource_provider_traits
RPA = tables.resource_provider_aggregates
AGG = tables.placement_aggregates


def search(
    conn: Connection,
    request: Request,
    worlds: world.Worlds | None = None,
    first: int | None = None,
) -> Found:
    """What the request's groups could use, from the shape of the cloud this
    process keeps for the database (``worlds``; by default the one kept for
    the connection's engine) and usages read now.

    With ``first``, only the first ``first`` anchors (in id order) and the
    sharing providers' trees are searched, when there are more: the Found
    then says it is not ``complete``, and its anchors are a prefix of the
    whole search's. The depth-first walk (no random order) takes tree after
    tree in that order, so the candidates of those trees are the first ones
    of the whole answer.
    """
    shape = (worlds or world.of(conn.engine)).current(conn)
    trait_ids = _ids(shape.all_traits, request.trait_names(), conn, names.trait_ids)
    unknown = sorted(request.trait_names() - set(trait_ids))
    if unknown:
        raise UnknownNames(traits=unknown, classes=[])
    rc_ids = _ids(shape.class_ids, request.resource_classes(), conn, names.resource_class_ids)
    unknown = sorted(request.resource_classes() - set(rc_ids))
    if unknown:
        raise UnknownNames(traits=[], classes=unknown)
    # Room for every requested class, on providers that can take the least amount.
    smallest: dict[str, int] = {}
    for group in request.groups.values():
        for rc, amount in group.resources.items():
            smallest[rc] = min(amount, smallest.get(rc, amount))
    wanted = {
        rc_ids[rc]: (rc, amount)
        for rc, amount in smallest.items()
        if amount <= tables.MAX_INT  # no inventory can hold more (max_unit is an INT)
    }
    cut = None if first is None else window(shape, request, wanted, first)
    used = used_amounts(conn, sorted(wanted), None if cut is None else _id_range(shape, cut[0]))
    return searched(shape, request, wanted, used, cut)


def _ids(
    known: dict[str, int],
    wanted: Iterable[str],
    conn: Connection,
    look_up: Callable[[Connection, Iterable[str]], dict[str, int]],
) -> dict[str, int]:
    """name -> id of the names that exist: from the shape of the cloud,
    which holds every trait and class (writes to either move the world
    generation); a name it does not hold is looked up in the database
    anyway, which compares names its own way (MariaDB ignores trailing
    spaces) as the request's filters will."""
    found, missing = {}, []
    for name in wanted:
        if name in known:
            found[name] = known[name]
        else:
            missing.append(name)
    if missing:
        found.update(look_up(conn, missing))
    return found


def window(
    shape: world.World, request: Request, wanted: dict[int, tuple[str, int]], first: int
) -> tuple[set[int], int] | None:
    """The trees (roots) a search of the first ``first`` anchors reads, and
    the last of those anchors; None when there are no more anchors than
    that. Besides those anchors, the trees of the sharing providers. Pure."""
    trees = shape.trees(frozenset(wanted))
    key = (
        "anchors",
        frozenset(wanted),
        frozenset(request.root_required),
        frozenset(request.root_forbidden),
        repr(request.root_member_of),  # equal filters, equal reprs
    )
    anchors = shape.remember(
        key,
        lambda: eligibility.roots_meeting(request, trees.roots, shape.traits, shape.aggregates),
    )
    if len(anchors) <= first:
        return None
    roots = set(anchors[:first])
    roots.update(shape.providers[pid].root_id for pid in trees.sharing)
    return roots, anchors[first - 1]


def searched(
    shape: world.World,
    request: Request,
    wanted: dict[int, tuple[str, int]],
    used: dict[int, dict[int, int]],
    cut: tuple[set[int], int] | None = None,
) -> Found:
    """The request's Found from the shape and the used amounts, with the
    eligibility rules applied; with ``cut`` (see ``window``) of its trees
    alone, the anchors up to its last. Pure."""
    found = of_world(shape, wanted, used, None if cut is None else cut[0])
    found.complete = cut is None
    if not found.with_room and all(g.resources for g in request.groups.values()):
        return found
    eligibility.apply(found, request)
    if cut is not None:
        found.roots = [root for root in found.roots if root <= cut[1]]
    return found


def _id_range(shape: world.World, window: set[int] | None) -> tuple[int, int] | None:
    """The smallest and largest provider id of the trees in ``window``."""
    if window is None:
        return None
    ids = [pid for root in window for pid in shape.members.get(root, ())]
    return (min(ids), max(ids)) if ids else (0, -1)


def of_world(
    shape: world.World,
    wanted: dict[int, tuple[str, int]],
    used: dict[int, dict[int, int]],
    window: set[int] | None = None,
) -> Found:
    """The Found of a request for ``wanted`` (class id -> (class, smallest
    amount asked)), from the shape of the cloud and the used amounts (class
    id -> provider -> used) of those classes; with ``window``, of those
    trees alone (roots). Pure.

    Room: every inventory of a wanted class, with or without room (provider
    summaries show both). Providers: those of the trees holding an inventory
    of a wanted class, and of the trees their sharing providers share with.
    """
    found = Found()
    trees = shape.trees(frozenset(wanted))
    providers = shape.providers
    inside: set[int] | None = None
    if window is not None:
        inside = {pid for root in window for pid in shape.members.get(root, ())}
        lowest, highest = (min(inside), max(inside)) if inside else (0, -1)
    room, full, with_room = found.room, found.full, found.with_room
    for rc_id, (rc, amount) in wanted.items():
        used_of = used.get(rc_id, {})
        if inside is None:
            _room_of_class(shape, rc_id, rc, amount, used_of, found)
            continue
        holders: list[int] = []
        hold = holders.append
        stock = shape.stock.get(rc_id, [])
        if inside is not None:  # the stock of the window's id range
            ids = shape.stock_ids[rc_id] if stock else []
            stock = stock[bisect_left(ids, lowest) : bisect_right(ids, highest)]
        for pid, capacity, whole, min_unit, max_unit, step_size, idle in stock:
            if inside is not None and pid not in inside:
                continue
            taken = used_of.get(pid)
            if taken is None:  # nothing used: the world's own Room
                if capacity >= amount and max_unit >= amount:
                    room[(pid, rc)] = idle
                    hold(pid)
                else:
                    full[(pid, rc)] = (whole, 0)
                continue
            free = capacity - taken
            if free >= amount and max_unit >= amount:
                room[(pid, rc)] = Room(free, min_unit, max_unit, step_size, whole, taken)
                hold(pid)
            else:
                full[(pid, rc)] = (whole, taken)
        if holders:
            with_room[rc] = holders
    found.sharing = set(trees.sharing)
    found.shares_with = {pid: set(shape.shares_with[pid]) for pid in trees.sharing}
    if inside is not None:
        found.providers = {pid: providers[pid] for pid in sorted(inside)}
        found.members = {
            root: shape.members[root] for root in window or () if root in shape.members
        }
    elif len(trees.all_roots) == len(shape.roots):
        found.providers = providers  # the world's own: read, never changed
        found.members = shape.members
    else:
        roots = trees.all_roots
        found.providers = {pid: p for pid, p in providers.items() if p.root_id in roots}
        found.members = {root: shape.members[root] for root in roots}
    found.traits, found.trait_ids = shape.traits, shape.trait_ids
    found.aggregates = shape.aggregates
    found.world = shape
    return found


class _Idle(NamedTuple):
    """One class's room for one amount while nothing is allocated: what
    ``of_world`` starts from (kept per world), the used providers' room
    then written over it."""

    room: dict[tuple[int, str], Room]
    full: dict[tuple[int, str], tuple[int, int]]
    holders: list[int]  # in id order
    stock: dict[int, world.Stock]


def _idle(shape: world.World, rc_id: int, rc: str, amount: int) -> _Idle:
    idle = _Idle({}, {}, [], {})
    for item in shape.stock.get(rc_id, []):
        idle.stock[item.provider] = item
        if item.capacity >= amount and item.max_unit >= amount:
            idle.room[(item.provider, rc)] = item.idle
            idle.holders.append(item.provider)
        else:
            idle.full[(item.provider, rc)] = (item.whole, 0)
    return idle


def _room_of_class(
    shape: world.World,
    rc_id: int,
    rc: str,
    amount: int,
    used_of: dict[int, int],
    found: Found,
) -> None:
    """``of_world``'s room, full and with_room for one class, every tree of
    the cloud: the idle room kept in the world, then the room of the
    providers something is allocated from."""
    idle = shape.remember(("idle", rc_id, amount), lambda: _idle(shape, rc_id, rc, amount))
    room, full = found.room, found.full
    room.update(idle.room)
    full.update(idle.full)
    dropped = set()
    for pid, taken in used_of.items():
        item = idle.stock.get(pid)
        if item is None:  # allocated from an inventory there is no more
            continue
        free = item.capacity - taken
        if free >= amount and item.max_unit >= amount:
            room[(pid, rc)] = Room(
                free, item.min_unit, item.max_unit, item.step_size, item.whole, taken
            )
        else:
            room.pop((pid, rc), None)
            full[(pid, rc)] = (item.whole, taken)
            dropped.add(pid)
    holders = [pid for pid in idle.holders if pid not in dropped]
    if holders:
        found.with_room[rc] = holders


def used_amounts(
    conn: Connection, rc_ids: list[int], id_range: tuple[int, int] | None = None
) -> dict[int, dict[int, int]]:
    """class id -> provider -> the amount allocated, for these classes (and
    the providers with an id in ``id_range``, both ends included): one
    grouped read, in the request's transaction."""
    used: dict[int, dict[int, int]] = {rc_id: {} for rc_id in rc_ids}
    if not rc_ids:
        return used
    if id_range is None:
        rows = conn.execute(_USED, {"classes": rc_ids})
    else:
        lowest, highest = id_range
        rows = conn.execute(
            _USED_IN_RANGE, {"classes": rc_ids, "lowest": lowest, "highest": highest}
        )
    for pid, rc_id, amount in rows.all():
        used[rc_id][pid] = int(amount)
    return used


def _used_statement(in_range: bool) -> sa.Select[Any]:
    """used_amounts' read, built once (every candidates request runs it)."""
    stmt = sa.select(
        ALLOC.c.resource_provider_id,
        ALLOC.c.resource_class_id,
        sa.func.sum(ALLOC.c.used),
    ).where(ALLOC.c.resource_class_id.in_(sa.bindparam("classes", expanding=True)))
    if in_range:
        stmt = stmt.where(
            ALLOC.c.resource_provider_id.between(sa.bindparam("lowest"), sa.bindparam("highest"))
        )
    return stmt.group_by(ALLOC.c.resource_provider_id, ALLOC.c.resource_class_id)


_USED = _used_statement(in_range=False)
_USED_IN_RANGE = _used_statement(in_range=True)


def inventories(
    conn: Connection, rc_ids: list[int]
) -> tuple[dict[int, dict[int, int]], Sequence[Any]]:
    """Every inventory of these classes, and their used amounts (class ->
    provider -> used): two plain reads. The rows are (provider, class,
    total, reserved, allocation_ratio, min_unit, max_unit, step_size)."""
    used = used_amounts(conn, rc_ids)
    rows = conn.execute(
        sa.select(*world.INVENTORY_COLUMNS).where(INV.c.resource_class_id.in_(rc_ids))
    ).all()
    return used, rows


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
    return world.interned(names_of, providers)


def provider_names(conn: Connection, ids: Iterable[int]) -> dict[int, str]:
    """provider id -> name, for the few an answer names (a Found has no names)."""
    wanted = sorted(set(ids))
    if not wanted:
        return {}
    return dict(conn.execute(sa.select(RP.c.id, RP.c.name).where(RP.c.id.in_(wanted))).all())
