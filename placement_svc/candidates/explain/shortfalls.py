"""Every rule one assignment of a tree's slots breaks, in words with
numbers: the fails of an explanation's near misses. Pure: reads a Cloud.

nearmiss.py chooses the assignment (a provider for each of walk.slots)
and ranks the trees; this says what the assignment lacks, rule by rule,
each fail with what fixing it takes: the request-wide rules on the root,
each group's rules on its provider (eligibility.rules, in words), room per
provider and class for the amounts placed there together, the unsuffixed
group's traits over its providers, isolation, same_subtree and its negated
groups, and before 1.29 one provider per tree.
"""

from __future__ import annotations

from typing import Any, NamedTuple

from placement_svc.candidates import eligibility, subtree, walk
from placement_svc.candidates.explain.cloud import Cloud
from placement_svc.candidates.request import Request, RequestGroup


class Fail(NamedTuple):
    """One rule an assignment breaks: ``rule`` names it (the JSON's key),
    ``text`` says it, ``detail`` holds its numbers and names."""

    rule: str
    text: str
    detail: dict[str, Any]

    def body(self) -> dict[str, Any]:
        return {"rule": self.rule, "text": self.text, **self.detail}


def _number(value: float) -> int | float:
    return int(value) if value == int(value) else round(value, 3)


class Shortfalls:
    """One request's rules, said of one assignment at a time."""

    def __init__(self, cloud: Cloud, request: Request) -> None:
        self.cloud, self.request = cloud, request
        self.slots = walk.slots(request)
        reach: dict[int, list[int]] = {}
        for pid in sorted(cloud.providers):
            reach.setdefault(cloud.providers[pid].root_id, []).append(pid)
        for pid in sorted(cloud.sharing):
            for root in sorted(cloud.shares_with.get(pid, ())):
                if cloud.providers[pid].root_id != root:
                    reach.setdefault(root, []).append(pid)
        self.reach = reach
        self.group_fails: dict[tuple[str, int, int | None], list[Fail]] = {}
        self.in_tree = {
            suffix: eligibility.in_tree_root(cloud.providers, group.in_tree)
            for suffix, group in request.groups.items()
            if group.in_tree is not None
        }

    def ref(self, pid: int) -> dict[str, str]:
        return {"uuid": self.cloud.providers[pid].uuid, "name": self.cloud.names[pid]}

    def _root_fails(self, root: int) -> list[Fail]:
        request, cloud = self.request, self.cloud
        name, ref = cloud.names[root], {"provider": self.ref(root)}
        traits = cloud.traits[root]
        fails = [
            Fail(
                "root_required",
                f"root {name} lacks trait {trait} (root_required)",
                {**ref, "trait": trait},
            )
            for trait in sorted(request.root_required - traits)
        ]
        fails += [
            Fail(
                "root_forbidden",
                f"root {name} has forbidden trait {trait} (root_required)",
                {**ref, "trait": trait},
            )
            for trait in sorted(request.root_forbidden & traits)
        ]
        member_of = request.root_member_of
        held = cloud.aggregates.get(root, frozenset())
        fails += [
            Fail(
                "root_member_of",
                f"root {name} {_not_in(one)} (root_member_of)",
                {**ref, "aggregates": sorted(one)},
            )
            for one in member_of.any_of
            if not held & one
        ]
        fails += [
            Fail(
                "root_forbidden_aggregate",
                f"root {name} in forbidden aggregate {agg} (root_member_of)",
                {**ref, "aggregate": agg},
            )
            for agg in sorted(held & member_of.forbidden)
        ]
        return fails

    def _group_fails(self, suffix: str, pid: int, root: int) -> list[Fail]:
        """What keeps ``pid`` from the group in the tree of ``root``, room
        aside (as eligibility.rules; for a sharing provider serving another
        tree, as eligibility.sharing_trees)."""
        group = self.request.groups[suffix]
        own = self.cloud.providers[pid].root_id
        away = eligibility.narrowed(self.cloud, group, pid) and own != root
        key = (suffix, pid, root if away else None)
        known = self.group_fails.get(key)
        if known is None:
            known = self.group_fails[key] = self._work_out(group, pid, root if away else None)
        return known

    def _work_out(self, group: RequestGroup, pid: int, away: int | None = None) -> list[Fail]:
        """``_group_fails``; ``away``: the root of the other tree a sharing
        provider serves, where in_tree forbids it, its root's aggregates do
        not count and that root's forbidden aggregates do."""
        cloud = self.cloud
        name, ref = cloud.names[pid], self.ref(pid)
        where = {"provider": ref, "groups": [group.suffix]}
        fails = []
        if group.in_tree is not None:
            outside = cloud.providers[pid].root_id != self.in_tree[group.suffix]
            if outside or away is not None:
                text = f"{name} not in tree {group.in_tree}"
                if not outside:
                    text = f"{name} serves no other tree under in_tree {group.in_tree}"
                fails.append(Fail("in_tree", text, {**where, "in_tree": group.in_tree}))
        member_of = group.member_of
        if member_of:
            holders = eligibility.holders(cloud, group, pid, away=away is not None)
            owners = [pid, cloud.providers[pid].root_id][: len(holders)]
            missing = [[one for one in member_of.any_of if not held & one] for held in holders]
            fewest = min(range(len(holders)), key=lambda i: len(missing[i]))
            owner = owners[fewest]
            fails += [
                Fail(
                    "member_of",
                    f"{cloud.names[owner]} {_not_in(one)}",
                    {
                        "provider": self.ref(owner),
                        "groups": [group.suffix],
                        "aggregates": sorted(one),
                    },
                )
                for one in missing[fewest]
            ]
            if away is not None:  # the root of the tree served must be in no forbidden one
                holders, owners = [*holders, cloud.aggregates.get(away, frozenset())], [pid, away]
            for held, owner in zip(holders, owners):
                fails += [
                    Fail(
                        "forbidden_aggregate",
                        f"{cloud.names[owner]} in forbidden aggregate {agg}",
                        {"provider": self.ref(owner), "groups": [group.suffix], "aggregate": agg},
                    )
                    for agg in sorted(held & member_of.forbidden)
                ]
        traits = cloud.traits[pid]
        if group.same_provider:
            fails += [
                _missing(one, name, where) for one in group.required.any_of if not traits & one
            ]
        fails += [
            Fail("forbidden_trait", f"forbidden trait {trait} on {name}", {**where, "trait": trait})
            for trait in sorted(traits & group.required.forbidden)
        ]
        return fails

    def _room_fails(self, assigned: list[int]) -> list[Fail]:
        cloud = self.cloud
        placed: dict[tuple[int, str], tuple[list[int], list[str]]] = {}
        for slot, pid in zip(self.slots, assigned):
            for rc, amount in slot.amounts:
                amounts, groups = placed.setdefault((pid, rc), ([], []))
                amounts.append(amount)
                if slot.suffix not in groups:
                    groups.append(slot.suffix)
        fails = []
        for (pid, rc), (amounts, groups) in placed.items():
            room = cloud.room.get((pid, rc))
            lacking = () if room is None else room.lacks(*amounts)
            if room is not None and not lacking:
                continue
            name, needs = cloud.names[pid], sum(amounts)
            where = {"provider": self.ref(pid), "groups": groups, "resource_class": rc}
            if room is None:
                fails.append(
                    Fail("no_inventory", f"no {rc} inventory on {name}", {**where, "needs": needs})
                )
                continue
            whole = cloud.inventories[(pid, rc)]
            free = _number(room.free)
            numbers = {
                **where,
                "needs": needs,
                "free": free,
                "total": whole.total,
                "reserved": whole.reserved,
                "allocation_ratio": whole.allocation_ratio,
                "used": room.used,
                "min_unit": room.min_unit,
                "max_unit": room.max_unit,
                "step_size": room.step_size,
            }
            for kind in lacking:
                if kind == "capacity":
                    text = (
                        f"{rc} on {name}: needs {needs}, {free} free (total {whole.total}, "
                        f"reserved {whole.reserved}, ratio {whole.allocation_ratio}, "
                        f"used {room.used})"
                    )
                elif kind == "max_unit":
                    text = f"{rc} on {name}: needs {needs}, max_unit {room.max_unit}"
                elif kind == "min_unit":
                    text = f"{rc} on {name}: needs {min(amounts)}, min_unit {room.min_unit}"
                else:
                    odd = next(a for a in amounts if a % room.step_size)
                    text = f"{rc} on {name}: needs {odd}, step_size {room.step_size}"
                fails.append(Fail(kind, text, numbers))
        return fails

    def _tree_trait_fails(self, assigned: list[int]) -> list[Fail]:
        """The unsuffixed group's required traits, met by its providers together."""
        group = self.request.groups.get("")
        if group is None or not group.required.any_of:
            return []
        mine = list(dict.fromkeys(p for s, p in zip(self.slots, assigned) if not s.granular))
        held = frozenset().union(*(self.cloud.traits[pid] for pid in mine))
        names = ", ".join(self.cloud.names[pid] for pid in mine)
        on = names if len(mine) == 1 else f"any of {names} (the unsuffixed group's providers)"
        where = {"provider": self.ref(mine[0]), "groups": [""]}
        return [_missing(one, on, where) for one in group.required.any_of if not held & one]

    def _isolation_fails(self, assigned: list[int]) -> list[Fail]:
        request = self.request
        users: dict[int, list[str]] = {}
        for slot, pid in zip(self.slots, assigned):
            if slot.granular:
                users.setdefault(pid, []).append(slot.suffix)
        rule = (
            "group_policy=isolate"
            if request.isolate
            else "isolate=" + ",".join(sorted(request.isolated))
        )
        return [
            Fail(
                "isolate",
                f"groups {_quoted(groups)} would share {self.cloud.names[pid]} ({rule})",
                {"provider": self.ref(pid), "groups": groups},
            )
            for pid, groups in users.items()
            if len(groups) > 1 and any(s in request.isolated for s in groups)
        ]

    def _subtree_fails(self, assigned: list[int]) -> list[Fail]:
        cloud, slots = self.cloud, self.slots
        fails = []
        unrooted = set()
        for suffixes in self.request.same_subtrees:
            members = {pid for s, pid in zip(slots, assigned) if s.suffix in suffixes}
            if subtree.root(cloud, members) is None:
                unrooted.add(frozenset(suffixes))
                names = ", ".join(cloud.names[pid] for pid in sorted(members))
                fails.append(
                    Fail(
                        "same_subtree",
                        f"same_subtree={','.join(sorted(suffixes))}: "
                        f"{names} are not in one subtree",
                        {
                            "groups": sorted(suffixes),
                            "providers": [self.ref(p) for p in sorted(members)],
                        },
                    )
                )
        for positive, negated in self.request.apart:
            if positive in unrooted:
                continue
            members = {pid for s, pid in zip(slots, assigned) if s.suffix in positive}
            top = subtree.root(cloud, members)
            for suffix in sorted(negated):
                if not subtree.apart(cloud, slots, assigned, positive, suffix):
                    pid = next(p for s, p in zip(slots, assigned) if s.suffix == suffix)
                    fails.append(
                        Fail(
                            "same_subtree_apart",
                            f"same_subtree={','.join(sorted(positive))},!{suffix}: "
                            f"{cloud.names[pid]} (group '{suffix}') is in the subtree of "
                            f"{cloud.names[top] if top is not None else '?'}",
                            {
                                "groups": sorted(positive),
                                "negated": suffix,
                                "provider": self.ref(pid),
                            },
                        )
                    )
        return fails

    def _tree_fails(self, assigned: list[int]) -> list[Fail]:
        """Before 1.29 a candidate takes one provider per tree."""
        if self.request.nested:
            return []
        cloud = self.cloud
        by_tree: dict[int, list[int]] = {}
        for pid in dict.fromkeys(assigned):
            by_tree.setdefault(cloud.providers[pid].root_id, []).append(pid)
        return [
            Fail(
                "one_provider_per_tree",
                f"{', '.join(cloud.names[p] for p in pids)} are one tree's providers "
                "(before 1.29 a candidate takes one provider per tree)",
                {"providers": [self.ref(p) for p in pids]},
            )
            for pids in by_tree.values()
            if len(pids) > 1
        ]


def _missing(one: frozenset[str], on: str, where: dict[str, Any]) -> Fail:
    if len(one) == 1:
        (trait,) = one
        return Fail("required_trait", f"missing trait {trait} on {on}", {**where, "trait": trait})
    listed = sorted(one)
    return Fail(
        "any_of_traits",
        f"missing one of traits {', '.join(listed)} on {on}",
        {**where, "traits": listed},
    )


def _not_in(one: frozenset[str]) -> str:
    listed = sorted(one)
    if len(listed) == 1:
        return f"not in aggregate {listed[0]}"
    return f"not in any of aggregates {', '.join(listed)}"


def _quoted(suffixes: list[str]) -> str:
    return " and ".join(f"'{s}'" for s in suffixes)
