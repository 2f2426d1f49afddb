"""Which providers may serve each request group, and which trees may anchor a
candidate: the rules, on what the search loaded. Pure: no SQL, no web.

search.py reads rows into a Found (providers, room, traits, aggregates,
sharing); the rules here decide from that data alone, so they can be tested
on a hand-built Found. Per group: room for its amounts, forbidden traits,
the any-of trait sets of a granular group, member_of (any-of and forbidden
aggregates) and in_tree. Request-wide: root_required / root_forbidden and
root_member_of on the anchors. A new request-wide filter goes here (with its parsing in
request.py); rules that need several providers at once (group_policy,
same_subtree, the unsuffixed group's collective traits) are the walk's
(walk.py).

A sharing provider may serve the unsuffixed group in its own tree and in
the trees it shares with, under different rules (``sharing_trees``): where
those rules narrow its trees, ``apply`` says which in ``Found.reach``.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from typing import Any

from placement_svc.candidates.model import Found
from placement_svc.candidates.request import Request, RequestGroup

# A group's options: per requested class for the unsuffixed group (it may
# spread over several providers), under None for a granular group as a whole.
Options = dict[str | None, list[int]]
_NONE: frozenset[str] = frozenset()
# A provider's traits, aggregates (None: no member_of) and root's aggregates
# (None: they do not count): all a verdict depends on.
_Key = tuple[frozenset[str], frozenset[str] | None, frozenset[str] | None]


def apply(found: Found, request: Request) -> None:
    """Fill ``found.options`` (and where it narrows, ``found.reach``) for
    every group and ``found.roots``."""
    for suffix, group in request.groups.items():
        options = found.options[suffix] = group_options(found, group)
        if found.sharing and narrows(group):
            found.reach[suffix] = _sharing_reach(found, group, options)
    found.roots = anchors(found, request)


def narrows(group: RequestGroup) -> bool:
    """Whether the group's rules can keep a sharing provider from some of
    the trees it shares with: the unsuffixed group's in_tree and member_of
    (a granular group's provider serves every tree it shares with)."""
    return not group.same_provider and (group.in_tree is not None or bool(group.member_of))


def _sharing_reach(
    found: Found, group: RequestGroup, options: Options
) -> dict[int, frozenset[int]]:
    """The trees each sharing provider among the group's options may serve."""
    sharing = found.sharing
    offered = {pid for pids in options.values() for pid in pids if pid in sharing}
    if not offered:
        return {}
    shape, in_tree = found.world, group.in_tree
    if shape is None or in_tree is None:
        tree_root = in_tree_root(found.providers, in_tree)
    else:  # a look at every provider: once per shape of the cloud
        tree_root = shape.remember(
            ("in_tree root", in_tree), lambda: in_tree_root(shape.providers, in_tree)
        )
    return {
        pid: sharing_trees(
            group, pid, found.providers, found.aggregates, found.shares_with, tree_root
        )
        for pid in sorted(offered)
    }


def sharing_trees(
    group: RequestGroup,
    pid: int,
    providers: Mapping[int, Any],
    aggregates: Mapping[int, frozenset[str]],
    shares_with: Mapping[int, Iterable[int]],
    tree_root: int | None,
) -> frozenset[int]:
    """The trees the sharing provider ``pid`` may serve for the unsuffixed
    group, traits aside (``tree_root``: the root of the group's in_tree,
    see ``in_tree_root``). In its own tree it is judged as every provider of
    that tree is: in_tree, and member_of met by its own aggregates or by
    its root's. Another tree it serves as a sharing provider only: never
    under in_tree (which keeps the whole group in the one tree), member_of
    met by its own aggregates, and no forbidden aggregate on it nor on that
    tree's root. These are upstream's rules, which it applies per provider
    and anchor tree."""
    root = providers[pid].root_id
    mine = aggregates.get(pid, _NONE)
    member_of = group.member_of
    trees = set()
    if (tree_root is None or root == tree_root) and aggregates_allow(
        group, [mine, aggregates.get(root, _NONE)]
    ):
        trees.add(root)
    if tree_root is None and aggregates_allow(group, [mine]):
        forbidden = member_of.forbidden
        trees.update(
            tree
            for tree in shares_with.get(pid, ())
            if tree != root and not (aggregates.get(tree, _NONE) & forbidden)
        )
    return frozenset(trees)


def group_options(found: Found, group: RequestGroup) -> Options:
    """Providers that may serve the group (per class for the unsuffixed
    group), in id order: those with room for the amounts that pass the
    group's trait, aggregate and tree rules."""
    eligible = _kept_eligibility(found, group)
    room, with_room, providers = found.room, found.with_room, found.providers
    if not group.same_provider:
        if eligible is _always:  # room alone decides
            return {
                rc: [
                    pid
                    for pid in with_room.get(rc, ())
                    if pid in providers and room[(pid, rc)].fits(amount)
                ]
                for rc, amount in group.resources.items()
            }
        return {
            rc: [
                pid
                for pid in with_room.get(rc, ())
                if pid in providers and eligible(pid) and room[(pid, rc)].fits(amount)
            ]
            for rc, amount in group.resources.items()
        }
    if not group.resources:  # a resourceless group: any provider that qualifies
        return {None: [pid for pid in sorted(providers) if eligible(pid)]}
    # One provider serves the whole group: start from the class fewest hold.
    scarcest = min(group.resources, key=lambda rc: len(with_room.get(rc, ())))
    return {
        None: [
            pid
            for pid in with_room.get(scarcest, ())
            if pid in providers
            and all(
                (pid, rc) in room and room[(pid, rc)].fits(amount)
                for rc, amount in group.resources.items()
            )
            and eligible(pid)
        ]
    }


def _kept_eligibility(found: Found, group: RequestGroup) -> Callable[[int], bool]:
    """``_eligibility``; with the shape of the cloud at hand (``found.world``),
    as the set of every provider of it the group's rules allow, worked out
    once per shape: room aside, the verdict depends on the shape alone."""
    shape = found.world
    if shape is None:
        return _eligibility(found, group)
    eligible = _eligibility(found, group, shape.providers)
    if eligible is _always:
        return _always
    required, member_of = group.required, group.member_of
    key = (
        "eligible",
        group.same_provider,
        tuple(required.any_of),
        frozenset(required.forbidden),
        tuple(member_of.any_of),
        frozenset(member_of.forbidden),
        group.in_tree,
        frozenset(found.sharing),
    )
    allowed = shape.remember(
        key, lambda: frozenset(pid for pid in shape.providers if eligible(pid))
    )
    return allowed.__contains__


def _eligibility(
    found: Found, group: RequestGroup, every: Mapping[int, Any] | None = None
) -> Callable[[int], bool]:
    """provider id -> whether the group's traits, member_of and in_tree allow
    it (room aside). Verdicts are kept by (traits, aggregates, root's
    aggregates): the sets are interned, so the thousands of providers of a
    cloud share a few keys and the rules run a few times per request."""
    providers = found.providers if every is None else every
    tree_root = in_tree_root(providers, group.in_tree)
    # The traits one provider is judged by: forbidden ones, and a granular
    # group's any-of sets (the unsuffixed group's are met collectively).
    judged = group.required.forbidden or (group.same_provider and group.required.any_of)
    if tree_root is None and not group.member_of and not judged:
        return _always
    traits, sharing = found.traits, found.sharing
    aggregates = found.aggregates
    spreads = not group.same_provider
    by_aggregate = bool(group.member_of)  # once, not once per provider
    verdicts: dict[_Key, bool] = {}
    # The unsuffixed group's sharing providers: those that may serve some
    # tree (sharing_trees), their traits judged below as any provider's.
    narrowed = spreads and narrows(group) and bool(sharing)

    def eligible(pid: int) -> bool:
        provider = providers[pid]
        if narrowed and pid in sharing:
            shares_with = found.shares_with
            if not sharing_trees(group, pid, providers, aggregates, shares_with, tree_root):
                return False
            return qualifies(group, traits[pid], None, None)
        if tree_root is not None and provider.root_id != tree_root:
            return False
        mine = root_aggregates = None
        if by_aggregate:
            mine = aggregates.get(pid, _NONE)
            # For the unsuffixed group an aggregate on a root spans its tree:
            # the provider itself or its root must meet every member_of. A
            # granular group's provider must meet them itself.
            if spreads:
                root_aggregates = aggregates.get(provider.root_id, _NONE)
        key = (traits[pid], mine, root_aggregates)
        verdict = verdicts.get(key)
        if verdict is None:
            verdict = verdicts[key] = qualifies(group, *key)
        return verdict

    return eligible


def _always(pid: int) -> bool:
    return True


def in_tree_root(providers: Mapping[int, Any], in_tree: str | None) -> int | None:
    """The root of the in_tree provider; -1 (no tree) for an unknown uuid,
    None without in_tree."""
    if in_tree is None:
        return None
    tree = next((p for p in providers.values() if p.uuid == in_tree), None)
    return tree.root_id if tree is not None else -1


def qualifies(
    group: RequestGroup,
    traits: frozenset[str],
    mine: frozenset[str] | None,
    root_aggregates: frozenset[str] | None,
) -> bool:
    """The group's member_of and trait rules for one provider's traits and
    aggregates (``mine``; None when the group has no member_of) and, for the
    unsuffixed group, its root's (``root_aggregates``; None when they do not
    count). The unsuffixed group's any-of traits are met by its providers
    together, so the walk (walk.py) checks them, not this."""
    member_of = group.member_of
    if member_of and mine is not None:
        holders = [mine] if root_aggregates is None else [mine, root_aggregates]
        if not aggregates_allow(group, holders):
            return False
    if traits & group.required.forbidden:
        return False
    if group.same_provider and any(not (traits & any_of) for any_of in group.required.any_of):
        return False
    return True


def aggregates_allow(group: RequestGroup, holders: list[frozenset[str]]) -> bool:
    """The group's member_of, met by one of ``holders`` (aggregate sets)
    alone: every any-of list has one of its aggregates there; and no
    forbidden aggregate is in any of them."""
    member_of = group.member_of
    if member_of.any_of and not any(
        all(held & any_of for any_of in member_of.any_of) for held in holders
    ):
        return False
    return not any(held & member_of.forbidden for held in holders)


def anchors(found: Found, request: Request) -> list[int]:
    """Trees a candidate may be built on, in id order: every loaded tree
    whose root meets root_required, root_forbidden and root_member_of. The
    rules are the root's alone: a child's traits or aggregates, and the
    sharing providers a candidate may add, do not count."""
    roots = sorted({p.root_id for p in found.providers.values()})
    return roots_meeting(request, roots, found.traits, found.aggregates)


def roots_meeting(
    request: Request,
    roots: list[int],
    traits: dict[int, frozenset[str]],
    aggregates: dict[int, frozenset[str]],
) -> list[int]:
    """Those of ``roots`` (in their order) that meet the request's root rules."""
    if request.root_required or request.root_forbidden:
        required, forbidden = request.root_required, request.root_forbidden
        roots = [r for r in roots if required <= traits[r] and not (forbidden & traits[r])]
    if request.root_member_of:
        roots = [r for r in roots if in_aggregates(request, aggregates.get(r, _NONE))]
    return roots


def in_aggregates(request: Request, held: frozenset[str]) -> bool:
    """Whether a root in aggregates ``held`` meets root_member_of: one of
    each any-of list (every repetition must hold), none of the forbidden."""
    member_of = request.root_member_of
    return all(held & any_of for any_of in member_of.any_of) and not (held & member_of.forbidden)
