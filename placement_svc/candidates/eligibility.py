"""Which providers may serve each request group, and which trees may anchor a
candidate: the rules, as ordered lists of named filters, on what the search
loaded (a Found, or one built by hand in a test). Pure: no SQL, no web.

A group's rules of one provider are ``rules(group, cloud)``, in this order,
those the group asks: in_tree, member_of, forbidden_aggregates,
required_traits, forbidden_traits, any_of_traits; then room for each
requested class (``Room.fits``; for the unsuffixed group each class on its
own, as it may spread). The walk's options (``group_options``) are the
providers that pass them all; an explanation's funnel (explain/funnel.py)
counts what each leaves, by the same ``sift``. The request's rules of an
anchor are ``root_rules``: root_required, root_member_of. A new
request-wide filter is one more ``Rule`` there (its parsing in request.py):
the anchors and an explanation's request filters both come from that list.
Rules of several providers at once (group_policy, same_subtree, the
unsuffixed group's collective traits) are the walk's (walk.py).

A sharing provider may serve the unsuffixed group in its own tree and in
the trees it shares with, under different rules (``sharing_trees``): where
those rules narrow its trees, ``apply`` says which in ``Found.reach``.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from collections.abc import Set as AbstractSet
from typing import Any, NamedTuple, Protocol

from placement_svc.candidates.model import Found, Provider
from placement_svc.candidates.request import Request, RequestGroup

# A group's options: per requested class for the unsuffixed group (it may
# spread over several providers), under None for a granular group as a whole.
Options = dict[str | None, list[int]]
_NONE: frozenset[str] = frozenset()


class Cloud(Protocol):
    """What the rules read of a cloud: a Found, the whole shape of the cloud
    beside one (``_Whole``), or an explanation's view of it."""

    @property
    def providers(self) -> Mapping[int, Provider]: ...

    @property
    def traits(self) -> Mapping[int, frozenset[str]]: ...

    @property
    def aggregates(self) -> Mapping[int, frozenset[str]]: ...

    @property
    def sharing(self) -> AbstractSet[int]: ...

    @property
    def shares_with(self) -> Mapping[int, AbstractSet[int]]: ...


class _Whole(NamedTuple):
    """Every provider of the shape of the cloud, with a Found's other data."""

    providers: Mapping[int, Provider]
    traits: Mapping[int, frozenset[str]]
    aggregates: Mapping[int, frozenset[str]]
    sharing: AbstractSet[int]
    shares_with: Mapping[int, AbstractSet[int]]


class Rule(NamedTuple):
    """One named filter: ``name`` is what an explanation calls it, ``asked``
    the values of the query it comes from, as the query writes them, and
    ``passes(id)`` whether a provider (an anchor's root, for a request-wide
    rule) meets it."""

    name: str
    asked: list[str]
    passes: Callable[[int], bool]


def sift(rules: Sequence[Rule], ids: Iterable[int]) -> Iterator[tuple[Rule, list[int]]]:
    """Each rule in turn, with what is left of ``ids`` (in their order)
    after it and every rule before it."""
    left = list(ids)
    for rule in rules:
        left = list(filter(rule.passes, left))
        yield rule, left


def asked(rules: Sequence[Rule]) -> tuple[tuple[str, tuple[str, ...]], ...]:
    """What ``rules`` ask, by name and value: equal for rules that decide
    alike on one cloud, so what they decide can be kept under it."""
    return tuple((rule.name, tuple(rule.asked)) for rule in rules)


def passing(rules: Sequence[Rule], ids: Iterable[int]) -> list[int]:
    """Those of ``ids`` (in their order) every rule passes: ``sift``'s last."""
    left = list(ids)
    for _rule, kept in sift(rules, left):
        left = kept
    return left


def rules(group: RequestGroup, cloud: Cloud) -> list[Rule]:
    """The group's rules of one provider, room aside, in their order (see
    the module's docstring): only those the group asks. Each reads of a
    provider its tree, traits and aggregates (for the unsuffixed group its
    root's aggregates too: an aggregate on a root spans its tree); a sharing
    provider whose trees the group narrows (``narrowed``) passes
    forbidden_aggregates when ``sharing_trees`` leaves it a tree. Required
    traits are a granular group's provider's own; the unsuffixed group's
    providers meet them together, a rule of the walk."""
    found: list[Rule] = []
    providers, traits = cloud.providers, cloud.traits

    looked_up: list[int | None] = []

    def tree_root() -> int | None:  # a look at every provider: only if a rule asks
        if not looked_up:
            looked_up.append(in_tree_root(providers, group.in_tree))
        return looked_up[0]

    if group.in_tree is not None:
        found.append(
            Rule("in_tree", [group.in_tree], lambda pid: providers[pid].root_id == tree_root())
        )
    member_of = group.member_of
    if member_of.any_of:
        any_of = member_of.any_of

        def member(pid: int) -> bool:
            return any(all(held & one for one in any_of) for held in holders(cloud, group, pid))

        found.append(Rule("member_of", [listed(one) for one in any_of], member))
    if member_of.forbidden:
        forbidden = member_of.forbidden

        def unforbidden(pid: int) -> bool:
            if narrowed(cloud, group, pid):
                aggregates, shares_with = cloud.aggregates, cloud.shares_with
                return bool(
                    sharing_trees(group, pid, providers, aggregates, shares_with, tree_root())
                )
            return not any(held & forbidden for held in holders(cloud, group, pid))

        shown = [f"!{agg}" for agg in sorted(forbidden)]
        found.append(Rule("forbidden_aggregates", shown, unforbidden))
    required = group.required
    alone = [one for one in required.any_of if len(one) == 1]
    either = [one for one in required.any_of if len(one) > 1]
    if group.same_provider and alone:
        names = frozenset().union(*alone)
        found.append(Rule("required_traits", sorted(names), lambda pid: names <= traits[pid]))
    if required.forbidden:
        banned = frozenset(required.forbidden)
        shown = [f"!{trait}" for trait in sorted(banned)]
        found.append(Rule("forbidden_traits", shown, lambda pid: not (traits[pid] & banned)))
    if group.same_provider and either:
        shown = [listed(one) for one in either]
        found.append(
            Rule("any_of_traits", shown, lambda pid: all(traits[pid] & one for one in either))
        )
    return found


def holders(
    cloud: Cloud, group: RequestGroup, pid: int, away: bool = False
) -> list[frozenset[str]]:
    """Whose aggregates meet the group's member_of for ``pid``: its own,
    and for the unsuffixed group in its own tree its root's too (``away``:
    a sharing provider serving another tree, where they do not count)."""
    mine = cloud.aggregates.get(pid, _NONE)
    if group.same_provider or away:
        return [mine]
    return [mine, cloud.aggregates.get(cloud.providers[pid].root_id, _NONE)]


def narrowed(cloud: Cloud, group: RequestGroup, pid: int) -> bool:
    """Whether the group's rules may keep ``pid``, a sharing provider, from
    some of the trees it shares with (``sharing_trees``)."""
    return pid in cloud.sharing and narrows(group)


def listed(names: frozenset[str]) -> str:
    """One any-of list as the query writes it."""
    ordered = sorted(names)
    return ordered[0] if len(ordered) == 1 else "in:" + ",".join(ordered)


def apply(found: Found, request: Request) -> None:
    """Fill ``found.options`` (and where it narrows, ``found.reach``) for
    every group and ``found.roots``."""
    made: dict[tuple, Options] = {}
    for suffix, group in request.groups.items():
        # Groups that ask the same share one Options, lists and all (read,
        # never changed): walk.options_by_root then indexes them once too.
        key = group.asks()
        if key not in made:
            made[key] = group_options(found, group)
        options = found.options[suffix] = made[key]
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
    group's rules."""
    allowed = _allowed(found, group)
    room, with_room, providers = found.room, found.with_room, found.providers
    if not group.same_provider:
        if allowed is _always:  # room alone decides
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
                if pid in providers and allowed(pid) and room[(pid, rc)].fits(amount)
            ]
            for rc, amount in group.resources.items()
        }
    if not group.resources:  # a resourceless group: any provider that qualifies
        return {None: [pid for pid in sorted(providers) if allowed(pid)]}
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
            and allowed(pid)
        ]
    }


def _allowed(found: Found, group: RequestGroup) -> Callable[[int], bool]:
    """provider id -> whether every rule of the group passes it (room
    aside): what ``passing`` leaves of every provider (of the cloud, with
    its shape at hand, ``found.world``: worked out once per shape)."""
    shape = found.world
    cloud: Cloud = found
    if shape is not None:
        cloud = _Whole(
            shape.providers, found.traits, found.aggregates, found.sharing, found.shares_with
        )

    checks = rules(group, cloud)
    if not checks:
        return _always
    if shape is None:
        return frozenset(passing(checks, cloud.providers)).__contains__
    key = ("eligible", group.same_provider, asked(checks), frozenset(found.sharing))
    allowed = shape.remember(key, lambda: frozenset(passing(checks, cloud.providers)))
    return allowed.__contains__


def _always(pid: int) -> bool:
    return True


def in_tree_root(providers: Mapping[int, Any], in_tree: str | None) -> int | None:
    """The root of the in_tree provider; -1 (no tree) for an unknown uuid,
    None without in_tree."""
    if in_tree is None:
        return None
    tree = next((p for p in providers.values() if p.uuid == in_tree), None)
    return tree.root_id if tree is not None else -1


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
    whose root passes the request's rules (``root_rules``). The rules are
    the root's alone: a child's traits or aggregates, and the sharing
    providers a candidate may add, do not count."""
    roots = sorted({p.root_id for p in found.providers.values()})
    return passing(root_rules(request, found.traits, found.aggregates), roots)


def root_rules(
    request: Request,
    traits: Mapping[int, frozenset[str]],
    aggregates: Mapping[int, frozenset[str]],
) -> list[Rule]:
    """The request's rules of an anchor (a root, with these ``traits`` and
    ``aggregates``), in order, those asked: root_required (required and
    ``!`` forbidden traits), root_member_of (an aggregate of each any-of
    list, none of the forbidden)."""
    found: list[Rule] = []
    if request.root_required or request.root_forbidden:
        required, forbidden = frozenset(request.root_required), frozenset(request.root_forbidden)

        def holds(root: int) -> bool:
            return required <= traits[root] and not (forbidden & traits[root])

        shown = sorted(required) + [f"!{trait}" for trait in sorted(forbidden)]
        found.append(Rule("root_required", shown, holds))
    member_of = request.root_member_of
    if member_of:
        any_of, banned = member_of.any_of, frozenset(member_of.forbidden)

        def member(root: int) -> bool:
            held = aggregates.get(root, _NONE)
            return all(held & one for one in any_of) and not (held & banned)

        shown = [listed(one) for one in any_of] + [f"!{agg}" for agg in sorted(banned)]
        found.append(Rule("root_member_of", shown, member))
    return found
