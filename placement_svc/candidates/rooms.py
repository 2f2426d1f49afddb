"""A request's Found, made of the shape of the cloud this process keeps
(world.py) and the used amounts the search read: the room of each
requested class, the providers of the trees that hold one, the sharing
providers among them and the trees they share with; then which providers
may serve which group (eligibility.py). Pure: search.py reads, this makes.

With ``first`` anchors only (see ``window``), a Found of the first trees
alone, whose anchors are a prefix of the whole search's.
"""

from __future__ import annotations

from bisect import bisect_left, bisect_right
from collections.abc import Mapping
from functools import partial
from typing import Any, NamedTuple

from placement_svc.candidates import eligibility, rank, world
from placement_svc.candidates.model import Fill, Found, Room
from placement_svc.candidates.request import Request, RequestGroup
from placement_svc.db import tables

# A class id -> (the class as the request names it, its smallest amount asked).
Wanted = dict[int, tuple[str, int]]


def weighed(request: Request, rc_ids: Mapping[str, int]) -> tuple[Wanted, Wanted]:
    """The requested classes (``rc_ids``: name -> id) with their smallest
    amount asked, the room a provider needs to serve any group of them: those
    an inventory can hold, and those beyond (past MAX_INT: max_unit is an
    INT), which choose no tree but whose inventories an explanation counts."""
    smallest: dict[str, int] = {}
    for group in request.groups.values():
        for rc, amount in group.resources.items():
            smallest[rc] = min(amount, smallest.get(rc, amount))
    wanted: Wanted = {}
    beyond: Wanted = {}
    for rc, amount in smallest.items():
        (wanted if amount <= tables.MAX_INT else beyond)[rc_ids[rc]] = (rc, amount)
    return wanted, beyond


def window(
    shape: world.World, request: Request, wanted: dict[int, tuple[str, int]], first: int
) -> tuple[set[int], int] | None:
    """The trees (roots) a search of the first ``first`` anchors reads, and
    the last of those anchors; None when there are no more anchors than
    that. Besides those anchors, the trees of the sharing providers. Pure."""
    trees = shape.trees(frozenset(wanted))
    found = anchors(shape, request, wanted)
    if len(found) <= first:
        return None
    roots = set(found[:first])
    roots.update(shape.providers[pid].root_id for pid in trees.sharing)
    return roots, found[first - 1]


def anchors(shape: world.World, request: Request, wanted: dict[int, tuple[str, int]]) -> list[int]:
    """The roots, in id order, of the trees holding a wanted class that
    pass the request's rules of the root (kept per world). Pure."""
    trees = shape.trees(frozenset(wanted))
    rules = eligibility.root_rules(request, shape.traits, shape.aggregates)
    key = ("anchors", frozenset(wanted), eligibility.asked(rules))
    return shape.remember(key, lambda: eligibility.passing(rules, trees.roots))


def found(
    shape: world.World,
    request: Request,
    wanted: dict[int, tuple[str, int]],
    used: dict[int, dict[int, int]],
    cut: tuple[set[int], int] | None = None,
    beyond: dict[int, tuple[str, int]] | None = None,
    answer_only: bool = False,
) -> Found:
    """The request's Found from the shape and the used amounts, with the
    eligibility rules applied; with ``cut`` (see ``window``) of its trees
    alone, the anchors up to its last. Pure.

    ``answer_only``: for the answer alone (not an explanation, which counts
    what the rules leave), a Found that can give no candidate, a requested
    class without a provider with room for it, is left without the rules:
    it has no anchor, and the walk has nothing to do."""
    made = of_world(shape, wanted, used, None if cut is None else cut[0], beyond)
    made.complete = cut is None
    if not made.with_room and all(g.resources for g in request.groups.values()):
        return made
    if answer_only and hopeless(made, request):
        return made
    eligibility.apply(made, request)
    if cut is not None:
        made.roots = [root for root in made.roots if root <= cut[1]]
    return made


def thresholds(shape: world.World, rc_id: int) -> list[float]:
    """The most of a class each of its inventories could give while nothing
    is allocated (the least of its capacity and max_unit), each value once,
    in order: an inventory has room for an amount of it, idle, exactly when
    its threshold is that amount or more. Kept per world."""

    def made() -> list[float]:
        return sorted({min(item.capacity, item.max_unit) for item in shape.stock.get(rc_id, ())})

    return shape.remember(("thresholds", rc_id), made)


def unservable(
    shape: world.World,
    request: Request,
    wanted: Wanted,
    beyond: Wanted,
) -> Found | None:
    """The Found of an answer known empty before any usage is read, or None.

    When no inventory of the cloud could hold the first amount of the first
    group with resources even were nothing allocated (more VCPU than any
    host has, the commonest empty answer), the answer is empty, and the
    reason an explanation gives is that very step (its only steps before are
    rules, which read the shape alone). The Found has the classes, the trees
    and the shape, but no room at all: the walk has nothing to do, and an
    explanation of it (funnel.group_funnel, ``until_empty``) stops at that
    step as the whole one would. For the answer alone, never an explanation
    (which counts every step)."""
    first = next((group for group in request.groups.values() if group.resources), None)
    if first is None:
        return None
    rc, amount = next(iter(first.resources.items()))
    rc_id = next(i for i, (name, _smallest) in {**wanted, **beyond}.items() if name == rc)
    if rc_id in wanted:
        ceiling = thresholds(shape, rc_id)
        if ceiling and ceiling[-1] >= amount:
            return None
    made = Found()
    made.classes = {name: rc_id for rc_id, (name, _smallest) in {**wanted, **beyond}.items()}
    _place(made, shape, shape.trees(frozenset(wanted)))
    return made


def hopeless(found: Found, request: Request) -> bool:
    """No candidate can come of ``found``: a class some group asks for has
    no provider with room for the smallest amount asked of it (those past
    MAX_INT have none). Each class of a group comes from one provider, so
    that group can be served nowhere. The converse does not hold."""
    with_room = found.with_room
    return any(rc not in with_room for g in request.groups.values() for rc in g.resources)


def id_range(shape: world.World, window: set[int] | None) -> tuple[int, int] | None:
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
    beyond: dict[int, tuple[str, int]] | None = None,
) -> Found:
    """The Found of a request for ``wanted`` (class id -> (class, smallest
    amount asked)), from the shape of the cloud and the used amounts (class
    id -> provider -> used) of those classes; with ``window``, of those
    trees alone (roots). Pure.

    Room: every inventory of a wanted class, with or without room (provider
    summaries show both). Providers: those of the trees holding an inventory
    of a wanted class, and of the trees their sharing providers share with.
    ``beyond``: classes asked in an amount no inventory can hold (past
    MAX_INT), which choose no tree; their inventories are in ``full``, for
    an explanation to count.
    """
    found = Found()
    trees = shape.trees(frozenset(wanted))
    if beyond:
        wanted = {**wanted, **beyond}
    found.classes = {rc: rc_id for rc_id, (rc, _amount) in wanted.items()}
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
                    full[(pid, rc)] = idle
                continue
            free = capacity - taken
            mine = Room(free, min_unit, max_unit, step_size, whole, taken)
            if free >= amount and max_unit >= amount:
                room[(pid, rc)] = mine
                hold(pid)
            else:
                full[(pid, rc)] = mine
        if holders:
            with_room[rc] = holders
    if inside is not None:
        found.providers = {pid: providers[pid] for pid in sorted(inside)}
        found.members = {
            root: shape.members[root] for root in window or () if root in shape.members
        }
    _place(found, shape, trees, whole=inside is None)
    return found


def _place(found: Found, shape: world.World, trees: world.Trees, whole: bool = True) -> None:
    """What a Found holds of the shape: the sharing providers and whom they
    share with, its traits and aggregates; with ``whole`` (not a window),
    the providers and members of the trees ``trees`` searches."""
    found.sharing = set(trees.sharing)
    found.shares_with = {pid: set(shape.shares_with[pid]) for pid in trees.sharing}
    if whole and len(trees.all_roots) == len(shape.roots):
        found.providers = shape.providers  # the world's own: read, never changed
        found.members = shape.members
    elif whole:
        roots = trees.all_roots
        found.providers = {pid: p for pid, p in shape.providers.items() if p.root_id in roots}
        found.members = {root: shape.members[root] for root in roots}
    found.traits, found.trait_ids = shape.traits, shape.trait_ids
    found.aggregates = shape.aggregates
    found.world = shape


class _Idle(NamedTuple):
    """One class's room for one amount while nothing is allocated: what
    ``of_world`` starts from (kept per world), the used providers' room
    then written over it."""

    room: dict[tuple[int, str], Room]
    full: dict[tuple[int, str], Room]
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
            idle.full[(item.provider, rc)] = item.idle
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
    # Kept per threshold, not per amount: the amounts between two
    # inventories' thresholds split the providers alike, and a client asking
    # a thousand amounts cannot keep a thousand copies of the class's rooms.
    bucket = bisect_left(thresholds(shape, rc_id), amount)
    idle = shape.remember(("idle", rc_id, bucket), lambda: _idle(shape, rc_id, rc, amount))
    room, full = found.room, found.full
    room.update(idle.room)
    full.update(idle.full)
    dropped = set()
    for pid, taken in used_of.items():
        item = idle.stock.get(pid)
        if item is None:  # allocated from an inventory there is no more
            continue
        free = item.capacity - taken
        mine = Room(free, item.min_unit, item.max_unit, item.step_size, item.whole, taken)
        if free >= amount and item.max_unit >= amount:
            room[(pid, rc)] = mine
        else:
            room.pop((pid, rc), None)
            full[(pid, rc)] = mine
            dropped.add(pid)
    holders = [pid for pid in idle.holders if pid not in dropped]
    if holders:
        found.with_room[rc] = holders


def fills(
    providers: dict[int, Any],
    stock: dict[int, list[world.Stock]],
    classes: dict[str, int],
    used: dict[int, dict[int, int]],
) -> dict[str, dict[int, tuple[float, int]]]:
    """The sort keys' classes (1.48, rank.py) -> root -> (capacity, used)
    of each tree holding the class, from the inventories (in provider id
    order, per class id) and the used amounts (class id -> provider ->
    used). Pure."""
    found: dict[str, dict[int, tuple[float, int]]] = {}
    for name, rc_id in classes.items():
        per_root: dict[int, tuple[float, int]] = {}
        used_of = used.get(rc_id, {})
        for held in stock.get(rc_id, ()):
            root = providers[held.provider].root_id
            capacity, taken = per_root.get(root, (0.0, 0))
            per_root[root] = (capacity + held.capacity, taken + used_of.get(held.provider, 0))
        found[name] = per_root
    return found


def kept_fills(
    shape: world.World, classes: dict[str, int], used: dict[int, dict[int, int]]
) -> dict[str, Any]:
    """``fills`` of the whole cloud as model.Fill: the trees' capacities
    summed once per shape (in provider id order, as ``fills`` sums them),
    only the used amounts added up per request. Pure."""

    def roots() -> dict[int, int]:
        return {pid: provider.root_id for pid, provider in shape.providers.items()}

    def capacities(rc_id: int) -> dict[int, float]:
        summed = fills(shape.providers, shape.stock, {"": rc_id}, {})[""]
        return {root: capacity for root, (capacity, _used) in summed.items()}

    def holders(rc_id: int) -> tuple[frozenset[int], bool]:
        """The providers holding the class, and whether each is a root."""
        held = frozenset(shape.stock_ids.get(rc_id, ()))
        return held, all(shape.providers[pid].root_id == pid for pid in held)

    root_of = shape.remember("root of", roots)
    found: dict[str, Any] = {}
    for name, rc_id in classes.items():
        capacity = shape.remember(("capacity by root", rc_id), partial(capacities, rc_id))
        held, at_roots = shape.remember(("holders", rc_id), partial(holders, rc_id))
        used_of = used.get(rc_id, {})
        taken: dict[int, int]
        if at_roots:  # a flat cloud's: each tree's usage is its root's own
            taken = {pid: amount for pid, amount in used_of.items() if pid in held}
        else:
            taken = {}
            for pid, amount in used_of.items():
                if pid in held:
                    root = root_of[pid]
                    taken[root] = taken.get(root, 0) + amount
        found[name] = Fill(capacity, taken)
    return found


def tree_traits(shape: world.World) -> dict[int, frozenset[str]]:
    """root -> every trait some provider of its tree has (kept per shape). Pure."""

    def union() -> dict[int, frozenset[str]]:
        found: dict[int, set[str]] = {}
        for pid, provider in shape.providers.items():
            found.setdefault(provider.root_id, set()).update(shape.traits.get(pid, ()))
        return {root: frozenset(traits) for root, traits in found.items()}

    return shape.remember("tree traits", union)


def bounded(
    shape: world.World,
    request: Request,
    wanted: dict[int, tuple[str, int]],
    fills: dict[str, dict[int, tuple[float, int]]],
) -> list[rank.Bound]:
    """(bound, root) of every anchor of a ranked request (1.48), in id
    order: the best place a candidate of its tree can have (rank.Bounds).
    Pure."""
    assert request.ranking is not None
    held = tree_traits(shape) if request.ranking.prefer else {}
    bounds = rank.Bounds(
        request.ranking, rank.totals(request.groups.values()), held, shape.aggregates, fills
    )
    return bounds.placed(member_of_anchors(shape, request, anchors(shape, request, wanted)))


def member_of_anchors(shape: world.World, request: Request, roots: list[int]) -> list[int]:
    """Of ``roots``, those whose trees have, for each group with member_of,
    a provider its member_of allows (eligibility.holders: a provider's own
    aggregates, and its root's for the unsuffixed group): no other tree can
    give a candidate, in a cloud without sharing providers. The trees each
    filter allows are kept per shape. Pure."""
    for group in request.groups.values():
        member_of = group.member_of
        if not member_of:
            continue
        key = (
            "trees member_of allows",
            group.same_provider,
            tuple(sorted(tuple(sorted(one)) for one in member_of.any_of)),
            tuple(sorted(member_of.forbidden)),
        )
        able = shape.remember(key, partial(_trees_allowing, shape, group))
        roots = [root for root in roots if root in able]
    return roots


def _trees_allowing(shape: world.World, group: RequestGroup) -> frozenset[int]:
    able: set[int] = set()
    for pid, provider in shape.providers.items():
        if provider.root_id not in able and eligibility.aggregates_allow(
            group, eligibility.holders(shape, group, pid)
        ):
            able.add(provider.root_id)
    return frozenset(able)


def ranked_window(
    placed: list[rank.Bound], first: int | None
) -> tuple[tuple[set[int], int] | None, rank.Bound | None]:
    """The cut (as ``window``'s) of a ranked search of the ``first`` best
    trees of ``placed`` and the bound of the best tree it leaves out; (None,
    None) for every tree (``first`` None, or no more trees than that). Pure."""
    if first is None:
        return None, None
    order = rank.best_first(placed, first + 1)
    if len(order) <= first:
        return None, None
    best = {root for _bound, root in order[:first]}
    return (best, max(best)), order[first]


def dense(shape: world.World, rc_ids: list[int]) -> bool:
    """Whether at least half the providers of the cloud hold each of these
    classes (VCPU, say, rather than a GPU): a read of their usage then
    reads most of the allocations. Pure."""
    half = len(shape.providers) / 2
    return all(len(shape.stock_ids.get(rc_id, ())) >= half for rc_id in rc_ids)
