"""Per request group, the providers each filter leaves: the funnel of an
explanation. Pure: reads a Cloud (cloud.py).

The filters are the engine's own, in its order: the group's rules
(eligibility.rules: in_tree, member_of, forbidden aggregates, required
traits, forbidden traits, any-of traits, those the group asks), each
counting what the ones before it left (eligibility.sift, which the walk's
options come from too), then room for each requested class. The
unsuffixed group may spread over a tree: its required traits are a rule of
the whole tree (the walk's, an explanation's merge step), and each of its
classes' room counts from the same providers, those its rules left.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

from placement_svc.candidates import eligibility
from placement_svc.candidates.explain.cloud import Cloud
from placement_svc.candidates.request import RequestGroup

ROOM_LACKS = ("inventory", "capacity", "max_unit", "min_unit", "step_size")


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


def group_funnels(
    cloud: Cloud, groups: Mapping[str, RequestGroup], until_empty: bool = False
) -> Iterator[tuple[str, Funnel]]:
    """(suffix, ``group_funnel``) for each group in order, worked out once
    for groups that ask the same (RequestGroup.asks): a request for eight
    like devices as eight groups has one funnel, eight times."""
    made: dict[tuple, Funnel] = {}
    for suffix, group in groups.items():
        key = group.asks()
        if key not in made:
            made[key] = group_funnel(cloud, group, until_empty)
        yield suffix, made[key]


def group_funnel(cloud: Cloud, group: RequestGroup, until_empty: bool = False) -> Funnel:
    """The group's funnel: every provider of the cloud, then what each of
    the group's rules (eligibility.rules, in their order) leaves of those
    the rules before it left, then room for each requested class.

    ``until_empty``: only as far as the first step that leaves no provider,
    the steps without what each room step's providers lack, and no trees
    when a step left none: what an empty answer's reason reads, and no
    more (the steps it has are those of the whole funnel)."""
    providers = sorted(cloud.providers)
    funnel = Funnel(considered=len(providers))
    left = providers
    for rule, left in eligibility.sift(eligibility.rules(group, cloud), providers):
        funnel.steps.append({"filter": rule.name, "value": rule.asked, "after": len(left)})
        if until_empty and not left:
            return funnel
    if not group.resources:
        funnel.serving[None] = left
    elif group.same_provider:
        for rc, amount in group.resources.items():
            left = _room_step(cloud, funnel, left, rc, amount, not until_empty)
            if until_empty and not left:
                return funnel
        funnel.serving[None] = left
    else:  # each class may come from another provider: each counts from the same ones
        for rc, amount in group.resources.items():
            funnel.serving[rc] = _room_step(cloud, funnel, left, rc, amount, not until_empty)
            if until_empty and not funnel.serving[rc]:
                return funnel
    funnel.trees = trees_served(cloud, group, funnel.serving)
    return funnel


def trees_served(
    cloud: Cloud, group: RequestGroup, serving: dict[str | None, list[int]]
) -> set[int]:
    """The trees in reach of a provider for every key: those the group can
    be served in."""
    trees: set[int] | None = None
    for pids in serving.values():
        reach: set[int] = set()
        for pid in pids:
            reach |= (
                serves(cloud, group, pid)
                if eligibility.narrowed(cloud, group, pid)
                else cloud.reach(pid)
            )
        trees = reach if trees is None else trees & reach
    return trees or set()


def serves(cloud: Cloud, group: RequestGroup, pid: int) -> frozenset[int]:
    """The trees a sharing provider may serve for the unsuffixed group, as
    the engine has them (eligibility.sharing_trees)."""
    providers = cloud.providers
    tree_root = eligibility.in_tree_root(providers, group.in_tree)
    return eligibility.sharing_trees(
        group, pid, providers, cloud.aggregates, cloud.shares_with, tree_root
    )


def _room_step(
    cloud: Cloud, funnel: Funnel, left: list[int], rc: str, amount: int, why: bool = True
) -> list[int]:
    """The providers of ``left`` with room for ``amount`` of ``rc``; the
    step, with (``why``) how many lack each thing room needs."""
    rooms = cloud.room
    step: dict[str, Any] = {
        "filter": "resources",
        "value": [f"{rc}:{amount}"],
        "resource_class": rc,
        "amount": amount,
    }
    if not why:  # a Found known empty from the shape (rooms.unservable) has no room at all
        kept = (
            [
                pid
                for pid in left
                if (room := rooms.get((pid, rc))) is not None and room.fits(amount)
            ]
            if rooms
            else []
        )
        funnel.steps.append({**step, "after": len(kept)})
        return kept
    lacking = dict.fromkeys(ROOM_LACKS, 0)
    kept = []
    for pid in left:
        room = rooms.get((pid, rc))
        if room is None:
            lacking["inventory"] += 1
        elif room.fits(amount):  # most rooms: no reason to name
            kept.append(pid)
        else:
            for kind in room.lacks(amount):
                lacking[kind] += 1
    funnel.steps.append({**step, "after": len(kept), "lacking": lacking})
    return kept
