"""The trees that almost serve a request, and what each lacks: an
explanation's near misses. Pure: reads a Survey (survey.py).

For each tree without a candidate, one assignment of the request's slots
(merge.slots: a class of the unsuffixed group, or a granular group whole)
to providers in the tree's reach is chosen greedily, slot by slot: the
provider whose shortfalls grow least, given the slots placed before it
(room they share, isolation). Then every rule that assignment breaks is
listed, in words with numbers. The list is complete for that assignment:
fix each item (the data it names, or drop the rule it names from the
query) and the assignment is a candidate, a fact the tests check on random
clouds. It need not be the shortest list the tree allows; the trees are
ranked by the length of theirs.
"""

from __future__ import annotations

import heapq
from typing import Any, NamedTuple

from placement_svc.candidates import funnel, merge, subtree
from placement_svc.candidates.model import Survey
from placement_svc.candidates.request import Request, RequestGroup


class Fail(NamedTuple):
    """One rule an assignment breaks: ``rule`` names it (the JSON's key),
    ``text`` says it, ``detail`` holds its numbers and names."""

    rule: str
    text: str
    detail: dict[str, Any]

    def body(self) -> dict[str, Any]:
        return {"rule": self.rule, "text": self.text, **self.detail}


def near_misses(
    survey: Survey, request: Request, served: set[int], limit: int
) -> list[dict[str, Any]]:
    """Up to ``limit`` trees not in ``served`` (the trees with candidates)
    that break the fewest rules, fewest first; among those, the ones that
    lack fewest inventories outright first (a host with too little room is
    nearer than a tree without the class at all), then the oldest root."""
    if limit <= 0:
        return []
    misses = _Misses(survey, request)
    # The ``limit`` best so far as a heap whose top is the worst of them:
    # (-count, -inventories lacking, -root). Roots come oldest first, so a
    # later tree takes the worst one's place only if it is better on the
    # first two; its rules are counted only while it still can be (most
    # trees of a big cloud stop early).
    best: list[tuple[int, int, int, list[Fail]]] = []
    for root in survey.roots():
        if root in served:
            continue
        full = len(best) >= limit
        fails = misses.of_tree(root, -best[0][0] + 1 if full else None)
        if fails is None:
            continue
        item = (-len(fails), -sum(f.rule == "no_inventory" for f in fails), -root, fails)
        if not full:
            heapq.heappush(best, item)
        elif item[:3] > best[0][:3]:
            heapq.heapreplace(best, item)
    return [
        {"root": misses.ref(-root), "fails": [fail.body() for fail in fails]}
        for _count, _lacking, root, fails in sorted(best, key=lambda i: i[:3], reverse=True)
    ]


def _number(value: float) -> int | float:
    return int(value) if value == int(value) else round(value, 3)


class _Misses:
    """One request's rules, applied tree by tree."""

    def __init__(self, survey: Survey, request: Request) -> None:
        self.survey, self.request = survey, request
        self.slots = merge.slots(request)
        reach: dict[int, list[int]] = {}
        for pid in sorted(survey.providers):
            reach.setdefault(survey.providers[pid].root_id, []).append(pid)
        for pid in sorted(survey.sharing):
            for root in sorted(survey.shares_with.get(pid, ())):
                if survey.providers[pid].root_id != root:
                    reach.setdefault(root, []).append(pid)
        self.reach = reach
        self.group_fails: dict[tuple[str, int], list[Fail]] = {}
        self.in_tree = {
            suffix: next(
                (p.root_id for p in survey.providers.values() if p.uuid == group.in_tree), -1
            )
            for suffix, group in request.groups.items()
            if group.in_tree is not None
        }

    def ref(self, pid: int) -> dict[str, str]:
        return {"uuid": self.survey.providers[pid].uuid, "name": self.survey.names[pid]}

    def of_tree(self, root: int, bound: int | None = None) -> list[Fail] | None:
        """Every rule the tree's assignment breaks; None as soon as they
        number ``bound`` or more (the tree cannot be among the best)."""
        fails = self._root_fails(root)
        if bound is not None and len(fails) >= bound:
            return None
        assigned = self._assign(root)
        said: dict[str, int] = {}  # text -> index in fails
        for slot, pid in zip(self.slots, assigned):
            for fail in self._group_fails(slot.suffix, pid):
                index = said.get(fail.text)
                if index is None:
                    said[fail.text] = len(fails)
                    fails.append(fail)
                elif slot.suffix not in fails[index].detail["groups"]:
                    # One shortfall of several groups (in_tree of each naming
                    # one tree, say): one fail, and every group it is of.
                    earlier = fails[index]
                    groups = [*earlier.detail["groups"], slot.suffix]
                    fails[index] = earlier._replace(detail={**earlier.detail, "groups": groups})
        for more in (
            self._room_fails,
            self._tree_trait_fails,
            self._isolation_fails,
            self._subtree_fails,
            self._tree_fails,
        ):
            if bound is not None and len(fails) >= bound:
                return None
            fails += more(assigned)
        fails += self._conflicts(root, assigned, fails)
        if bound is not None and len(fails) >= bound:
            return None
        return fails

    # -- choosing the assignment ----------------------------------------------

    def _assign(self, root: int) -> list[int]:
        survey = self.survey
        reach = self.reach.get(root, [root])
        if len(reach) == 1:  # a tree of one provider, no sharing: no choice to make
            return reach * len(self.slots)
        amounts: dict[tuple[int, str], list[int]] = {}
        granular: dict[int, list[bool]] = {}  # provider -> isolated flag of each granular slot
        assigned = []
        for slot in self.slots:
            # (shortfalls it adds, inventories it lacks outright): a provider
            # short of room is nearer than one without the class at all
            best, best_cost = None, (0, 0)
            for pid in reach:
                count, lacking = len(self._group_fails(slot.suffix, pid)), 0
                for rc, amount in slot.amounts:
                    before = amounts.get((pid, rc), [])
                    if (pid, rc) not in survey.stock:
                        count += not before  # one fail, however many amounts
                        lacking += not before
                    else:
                        count += _room_count(survey, pid, rc, [*before, amount])
                        count -= _room_count(survey, pid, rc, before)
                users = granular.get(pid, [])
                if slot.granular and users and (slot.isolated or any(users)):
                    count += not (len(users) > 1 and any(users))  # a new clash, or one more
                cost = (count, lacking)
                if best is None or cost < best_cost:
                    best, best_cost = pid, cost
                    if cost == (0, 0):
                        break
            pid = root if best is None else best
            assigned.append(pid)
            for rc, amount in slot.amounts:
                amounts.setdefault((pid, rc), []).append(amount)
            if slot.granular:
                granular.setdefault(pid, []).append(slot.isolated)
        return assigned

    # -- the rules, each as fails ---------------------------------------------

    def _root_fails(self, root: int) -> list[Fail]:
        request, survey = self.request, self.survey
        name, ref = survey.names[root], {"provider": self.ref(root)}
        traits = survey.traits[root]
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
        held = survey.aggregates.get(root, frozenset())
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

    def _group_fails(self, suffix: str, pid: int) -> list[Fail]:
        """What keeps ``pid`` from the group, room aside (as funnel.filters)."""
        key = (suffix, pid)
        known = self.group_fails.get(key)
        if known is None:
            known = self.group_fails[key] = self._work_out(self.request.groups[suffix], pid)
        return known

    def _work_out(self, group: RequestGroup, pid: int) -> list[Fail]:
        survey = self.survey
        name, ref = survey.names[pid], self.ref(pid)
        where = {"provider": ref, "groups": [group.suffix]}
        fails = []
        if (
            group.in_tree is not None
            and survey.providers[pid].root_id != self.in_tree[group.suffix]
        ):
            fails.append(
                Fail(
                    "in_tree",
                    f"{name} not in tree {group.in_tree}",
                    {**where, "in_tree": group.in_tree},
                )
            )
        member_of = group.member_of
        if member_of:
            holders = funnel.holders(survey, group, pid)
            owners = [pid, survey.providers[pid].root_id][: len(holders)]
            missing = [[one for one in member_of.any_of if not held & one] for held in holders]
            fewest = min(range(len(holders)), key=lambda i: len(missing[i]))
            owner = owners[fewest]
            fails += [
                Fail(
                    "member_of",
                    f"{survey.names[owner]} {_not_in(one)}",
                    {
                        "provider": self.ref(owner),
                        "groups": [group.suffix],
                        "aggregates": sorted(one),
                    },
                )
                for one in missing[fewest]
            ]
            for held, owner in zip(holders, owners):
                fails += [
                    Fail(
                        "forbidden_aggregate",
                        f"{survey.names[owner]} in forbidden aggregate {agg}",
                        {"provider": self.ref(owner), "groups": [group.suffix], "aggregate": agg},
                    )
                    for agg in sorted(held & member_of.forbidden)
                ]
        traits = survey.traits[pid]
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
        survey = self.survey
        placed: dict[tuple[int, str], tuple[list[int], list[str]]] = {}
        for slot, pid in zip(self.slots, assigned):
            for rc, amount in slot.amounts:
                amounts, groups = placed.setdefault((pid, rc), ([], []))
                amounts.append(amount)
                if slot.suffix not in groups:
                    groups.append(slot.suffix)
        fails = []
        for (pid, rc), (amounts, groups) in placed.items():
            stock = survey.stock.get((pid, rc))
            lacking = () if stock is None else stock.lacks(*amounts)
            if stock is not None and not lacking:
                continue
            name, needs = survey.names[pid], sum(amounts)
            where = {"provider": self.ref(pid), "groups": groups, "resource_class": rc}
            if stock is None:
                fails.append(
                    Fail("no_inventory", f"no {rc} inventory on {name}", {**where, "needs": needs})
                )
                continue
            free = _number(stock.free)
            numbers = {
                **where,
                "needs": needs,
                "free": _number(stock.free),
                "total": stock.total,
                "reserved": stock.reserved,
                "allocation_ratio": stock.allocation_ratio,
                "used": stock.used,
                "min_unit": stock.min_unit,
                "max_unit": stock.max_unit,
                "step_size": stock.step_size,
            }
            for kind in lacking:
                if kind == "capacity":
                    text = (
                        f"{rc} on {name}: needs {needs}, {free} free (total {stock.total}, "
                        f"reserved {stock.reserved}, ratio {stock.allocation_ratio}, "
                        f"used {stock.used})"
                    )
                elif kind == "max_unit":
                    text = f"{rc} on {name}: needs {needs}, max_unit {stock.max_unit}"
                elif kind == "min_unit":
                    text = f"{rc} on {name}: needs {min(amounts)}, min_unit {stock.min_unit}"
                else:
                    odd = next(a for a in amounts if a % stock.step_size)
                    text = f"{rc} on {name}: needs {odd}, step_size {stock.step_size}"
                fails.append(Fail(kind, text, numbers))
        return fails

    def _tree_trait_fails(self, assigned: list[int]) -> list[Fail]:
        """The unsuffixed group's required traits, met by its providers together."""
        group = self.request.groups.get("")
        if group is None or not group.required.any_of:
            return []
        mine = list(dict.fromkeys(p for s, p in zip(self.slots, assigned) if not s.granular))
        held = frozenset().union(*(self.survey.traits[pid] for pid in mine))
        names = ", ".join(self.survey.names[pid] for pid in mine)
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
                f"groups {_quoted(groups)} would share {self.survey.names[pid]} ({rule})",
                {"provider": self.ref(pid), "groups": groups},
            )
            for pid, groups in users.items()
            if len(groups) > 1 and any(s in request.isolated for s in groups)
        ]

    def _subtree_fails(self, assigned: list[int]) -> list[Fail]:
        survey, slots = self.survey, self.slots
        fails = []
        unrooted = set()
        for suffixes in self.request.same_subtrees:
            members = {pid for s, pid in zip(slots, assigned) if s.suffix in suffixes}
            if subtree.root(survey, members) is None:
                unrooted.add(frozenset(suffixes))
                names = ", ".join(survey.names[pid] for pid in sorted(members))
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
            top = subtree.root(survey, members)
            for suffix in sorted(negated):
                if not subtree.apart(survey, slots, assigned, positive, suffix):
                    pid = next(p for s, p in zip(slots, assigned) if s.suffix == suffix)
                    fails.append(
                        Fail(
                            "same_subtree_apart",
                            f"same_subtree={','.join(sorted(positive))},!{suffix}: "
                            f"{survey.names[pid]} (group '{suffix}') is in the subtree of "
                            f"{survey.names[top] if top is not None else '?'}",
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
        survey = self.survey
        by_tree: dict[int, list[int]] = {}
        for pid in dict.fromkeys(assigned):
            by_tree.setdefault(survey.providers[pid].root_id, []).append(pid)
        return [
            Fail(
                "one_provider_per_tree",
                f"{', '.join(survey.names[p] for p in pids)} are one tree's providers "
                "(before 1.29 a candidate takes one provider per tree)",
                {"providers": [self.ref(p) for p in pids]},
            )
            for pids in by_tree.values()
            if len(pids) > 1
        ]

    def _conflicts(self, root: int, assigned: list[int], fails: list[Fail]) -> list[Fail]:
        """A fix that would break another rule of the same assignment: a
        trait or aggregate to add that a group on that provider forbids, or
        one to take away that a group there needs (the only one of its
        any-of list the provider has). No change of data fixes both."""
        survey, request = self.survey, self.request
        forbids: dict[tuple[int, str], set[str]] = {}  # (provider, kind) -> names
        needs: dict[tuple[int, str], list[frozenset[str]]] = {}  # any-of lists
        for slot, pid in zip(self.slots, assigned):
            group = request.groups[slot.suffix]
            forbids.setdefault((pid, "trait"), set()).update(group.required.forbidden)
            needs.setdefault((pid, "trait"), []).extend(group.required.any_of)
            for holder in {pid, survey.providers[pid].root_id} if not slot.granular else {pid}:
                forbids.setdefault((holder, "aggregate"), set()).update(group.member_of.forbidden)
                needs.setdefault((holder, "aggregate"), []).extend(group.member_of.any_of)
        forbids.setdefault((root, "trait"), set()).update(request.root_forbidden)
        needs.setdefault((root, "trait"), []).extend(frozenset([t]) for t in request.root_required)
        forbids.setdefault((root, "aggregate"), set()).update(request.root_member_of.forbidden)
        needs.setdefault((root, "aggregate"), []).extend(request.root_member_of.any_of)
        by_uuid = {survey.providers[pid].uuid: pid for pid in {*assigned, root}}
        # Every change the fixes make, per provider and kind, taken together.
        changes: dict[tuple[int, str], tuple[set[str], set[str]]] = {}  # (added, taken)
        for fail in fails:
            change = _change(fail)
            owner = by_uuid.get(fail.detail["provider"]["uuid"]) if change else None
            if change is None or owner is None:
                continue
            adds, kind, name = change
            changes.setdefault((owner, kind), (set(), set()))[0 if adds else 1].add(name)
        taken_aggregates = {
            pid: taken for (pid, kind), (_a, taken) in changes.items() if kind == "aggregate"
        }
        found = []
        for (pid, kind), (added, taken) in changes.items():
            held = (
                survey.traits[pid] if kind == "trait" else survey.aggregates.get(pid, frozenset())
            )
            after = (held - taken) | added
            broken = [(True, name) for name in sorted(added & forbids.get((pid, kind), set()))]
            for one in needs.get((pid, kind), ()):
                if held & one and not after & one:
                    broken += [(False, name) for name in sorted(one & taken)]
            if (
                kind == "aggregate"
                and taken
                and self._cuts_sharing(root, assigned, taken_aggregates)
            ):
                broken += [(False, name) for name in sorted(taken)]
            for adds, name in dict.fromkeys(broken):
                verb = "gain" if adds else "lose"
                found.append(
                    Fail(
                        "conflict",
                        f"{survey.names[pid]} would {verb} {kind} {name} for one rule and "
                        "break another",
                        {"provider": self.ref(pid), kind: name},
                    )
                )
        return found

    def _cuts_sharing(self, root: int, assigned: list[int], taken: dict[int, set[str]]) -> bool:
        """Whether taking providers out of aggregates (``taken``) would cut
        a sharing provider of the assignment off the tree: it shares with
        the tree through aggregates it and a provider of the tree are both in."""
        survey = self.survey
        tree = [q for q in self.reach.get(root, [root]) if survey.providers[q].root_id == root]

        def held(q: int) -> frozenset[str]:
            return survey.aggregates.get(q, frozenset()) - taken.get(q, set())

        for sharing in dict.fromkeys(assigned):
            if sharing not in survey.sharing or survey.providers[sharing].root_id == root:
                continue
            if not any(held(q) & held(sharing) for q in tree):
                return True
        return False


def _change(fail: Fail) -> tuple[bool, str, str] | None:
    """What fixing ``fail`` changes on its provider: (adds, "trait" or
    "aggregate", name); None when the fix changes no trait or aggregate."""
    detail, rule = fail.detail, fail.rule
    if rule in ("required_trait", "root_required"):
        return True, "trait", detail["trait"]
    if rule == "any_of_traits":
        return True, "trait", detail["traits"][0]
    if rule in ("forbidden_trait", "root_forbidden"):
        return False, "trait", detail["trait"]
    if rule in ("member_of", "root_member_of"):
        return True, "aggregate", detail["aggregates"][0]
    if rule in ("forbidden_aggregate", "root_forbidden_aggregate"):
        return False, "aggregate", detail["aggregate"]
    return None


def _room_count(survey: Survey, pid: int, rc: str, amounts: list[int]) -> int:
    if not amounts:
        return 0
    stock = survey.stock.get((pid, rc))
    return 1 if stock is None else len(stock.lacks(*amounts))


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
