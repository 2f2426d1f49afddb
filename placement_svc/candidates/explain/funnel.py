"""Per request group, the providers each filter leaves: the funnel of an
explanation. Pure: reads a Survey (survey.py).

The filters come in a fixed order (in_tree, member_of, forbidden
aggregates, required traits, forbidden traits, any-of traits, then room for
each requested class) and each counts the providers the ones before it
left. The rules are eligibility.py's, said one at a time; a test holds the
two to the same providers. Two differences of the unsuffixed group follow
the engine: it may spread over a tree, so its required traits are a rule of
the whole tree (the walk's, an explanation's merge step) and each of its
classes' room counts from the same providers, those the other filters left;
and an aggregate on the root of a provider's tree counts for member_of as
if it were the provider's own.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from placement_svc.candidates import eligibility
from placement_svc.candidates.model import Survey
from placement_svc.candidates.request import RequestGroup

_NONE: frozenset[str] = frozenset()
ROOM_LACKS = ("inventory", "capacity", "max_unit", "min_unit", "step_size")

# A filter of a group: its name, what the request asked (as in the query)
# and whether a provider passes it.
Filter = tuple[str, list[str], Callable[[int], bool]]


@dataclass
class Funnel:
    """One group's funnel and what is left at its end: per requested class
    for the unsuffixed group, under None for a granular group (the shape of
    Found.options)."""

    considered: int
    steps: list[dict[str, Any]] = field(default_factory=list)
    serving: dict[str | None, list[int]] = field(default_factory=dict)
    trees: set[int] = field(default_factory=set)

    def body(self, group: RequestGroup) -> dict[str, Any]:
        providers = set().union(*self.serving.values()) if self.serving else set()
        return {
            "resources": dict(group.resources),
            "considered": self.considered,
            "funnel": self.steps,
            "providers": len(providers),
            "trees": len(self.trees),
        }


def group_funnel(survey: Survey, group: RequestGroup) -> Funnel:
    providers = sorted(survey.providers)
    funnel = Funnel(considered=len(providers))
    left = providers
    for name, value, passes in filters(survey, group):
        left = [pid for pid in left if passes(pid)]
        funnel.steps.append({"filter": name, "value": value, "after": len(left)})
    if not group.resources:
        funnel.serving[None] = left
    elif group.same_provider:
        for rc, amount in group.resources.items():
            left = _room_step(survey, funnel, left, rc, amount)
        funnel.serving[None] = left
    else:  # each class may come from another provider: each counts from the same ones
        for rc, amount in group.resources.items():
            funnel.serving[rc] = _room_step(survey, funnel, left, rc, amount)
    funnel.trees = trees_served(survey, group, funnel.serving)
    return funnel


def trees_served(
    survey: Survey, group: RequestGroup, serving: dict[str | None, list[int]]
) -> set[int]:
    """The trees in reach of a provider for every key: those the group can
    be served in."""
    trees: set[int] | None = None
    for pids in serving.values():
        reach: set[int] = set()
        for pid in pids:
            reach |= (
                serves(survey, group, pid) if narrowed(survey, group, pid) else survey.reach(pid)
            )
        trees = reach if trees is None else trees & reach
    return trees or set()


def narrowed(survey: Survey, group: RequestGroup, pid: int) -> bool:
    """Whether the group's rules may keep ``pid``, a sharing provider, from
    some of the trees it shares with (eligibility.sharing_trees)."""
    return pid in survey.sharing and eligibility.narrows(group)


def serves(survey: Survey, group: RequestGroup, pid: int) -> frozenset[int]:
    """The trees a sharing provider may serve for the unsuffixed group, as
    the engine has them (eligibility.sharing_trees)."""
    providers = survey.providers
    tree_root = eligibility.in_tree_root(providers, group.in_tree)
    return eligibility.sharing_trees(
        group, pid, providers, survey.aggregates, survey.shares_with, tree_root
    )


def _room_step(survey: Survey, funnel: Funnel, left: list[int], rc: str, amount: int) -> list[int]:
    lacking = dict.fromkeys(ROOM_LACKS, 0)
    kept = []
    for pid in left:
        stock = survey.stock.get((pid, rc))
        why = ("inventory",) if stock is None else stock.lacks(amount)
        for kind in why:
            lacking[kind] += 1
        if not why:
            kept.append(pid)
    funnel.steps.append(
        {
            "filter": "resources",
            "value": [f"{rc}:{amount}"],
            "resource_class": rc,
            "amount": amount,
            "after": len(kept),
            "lacking": lacking,
        }
    )
    return kept


def filters(survey: Survey, group: RequestGroup) -> list[Filter]:
    """The group's filters other than room, in the funnel's order: only
    those the request asks for."""
    found: list[Filter] = []
    providers = survey.providers
    if group.in_tree is not None:
        tree = next((p.root_id for p in providers.values() if p.uuid == group.in_tree), -1)
        found.append(("in_tree", [group.in_tree], lambda pid: providers[pid].root_id == tree))
    member_of = group.member_of
    if member_of.any_of:
        shown = [listed(agg) for agg in member_of.any_of]
        found.append(
            (
                "member_of",
                shown,
                lambda pid: any(
                    all(held & any_of for any_of in member_of.any_of)
                    for held in holders(survey, group, pid)
                ),
            )
        )
    if member_of.forbidden:
        found.append(
            (
                "forbidden_aggregates",
                [f"!{agg}" for agg in sorted(member_of.forbidden)],
                lambda pid: (
                    bool(serves(survey, group, pid))
                    if narrowed(survey, group, pid)
                    else not any(held & member_of.forbidden for held in holders(survey, group, pid))
                ),
            )
        )
    traits = survey.traits
    required = group.required
    alone = [one for one in required.any_of if len(one) == 1]
    either = [one for one in required.any_of if len(one) > 1]
    if group.same_provider and alone:
        names = frozenset().union(*alone)
        found.append(("required_traits", sorted(names), lambda pid: names <= traits[pid]))
    if required.forbidden:
        forbidden = frozenset(required.forbidden)
        found.append(
            (
                "forbidden_traits",
                [f"!{t}" for t in sorted(forbidden)],
                lambda pid: not (traits[pid] & forbidden),
            )
        )
    if group.same_provider and either:
        found.append(
            (
                "any_of_traits",
                [listed(one) for one in either],
                lambda pid: all(traits[pid] & one for one in either),
            )
        )
    return found


def holders(
    survey: Survey, group: RequestGroup, pid: int, away: bool = False
) -> list[frozenset[str]]:
    """Whose aggregates meet the group's member_of for ``pid``: its own,
    and for the unsuffixed group in its own tree its root's too (``away``:
    a sharing provider serving another tree, where they do not count)."""
    aggregates = survey.aggregates
    mine = aggregates.get(pid, _NONE)
    if group.same_provider or away:
        return [mine]
    return [mine, aggregates.get(survey.providers[pid].root_id, _NONE)]


def listed(names: frozenset[str]) -> str:
    """One any-of list as the query writes it."""
    ordered = sorted(names)
    return ordered[0] if len(ordered) == 1 else "in:" + ",".join(ordered)
