"""The trees that almost serve a request, and what each lacks: an
explanation's near misses. Pure: reads a Cloud (cloud.py).

For each tree without a candidate, one assignment of the request's slots
(walk.slots: a class of the unsuffixed group, or a granular group whole)
to providers in the tree's reach is chosen greedily, slot by slot: the
provider whose shortfalls grow least, given the slots placed before it
(room they share, isolation). Then every rule that assignment breaks is
listed, in words with numbers (shortfalls.py), with a conflict for each fix
that would break another of its rules (conflicts.py). Without a conflict
the list is complete for that assignment: fix each item (the data it
names, or drop the rule it names from the query) and the assignment is a
candidate, a fact the tests check on random clouds. It need not be the
shortest list the tree allows; the trees are ranked by the length of
theirs.
"""

from __future__ import annotations

import heapq
from typing import Any

from placement_svc.candidates.explain import conflicts
from placement_svc.candidates.explain.cloud import Cloud
from placement_svc.candidates.explain.shortfalls import Fail, Shortfalls
from placement_svc.candidates.request import Request


def near_misses(
    cloud: Cloud, request: Request, served: set[int], limit: int
) -> list[dict[str, Any]]:
    """Up to ``limit`` trees not in ``served`` (the trees with candidates)
    that break the fewest rules, fewest first; among those, the ones that
    lack fewest inventories outright first (a host with too little room is
    nearer than a tree without the class at all), then the oldest root."""
    if limit <= 0:
        return []
    misses = _Misses(cloud, request)
    # The ``limit`` best so far as a heap whose top is the worst of them:
    # (-count, -inventories lacking, -root). Roots come oldest first, so a
    # later tree takes the worst one's place only if it is better on the
    # first two; its rules are counted only while it still can be (most
    # trees of a big cloud stop early).
    best: list[tuple[int, int, int, list[Fail]]] = []
    for root in cloud.roots():
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


class _Misses(Shortfalls):
    """One request's rules, applied tree by tree: the assignment, the
    fails (shortfalls.py) and the conflicts among their fixes."""

    def of_tree(self, root: int, bound: int | None = None) -> list[Fail] | None:
        """Every rule the tree's assignment breaks; None as soon as they
        number ``bound`` or more (the tree cannot be among the best)."""
        fails = self._root_fails(root)
        if bound is not None and len(fails) >= bound:
            return None
        assigned = self._assign(root)
        said: dict[str, int] = {}  # text -> index in fails
        for slot, pid in zip(self.slots, assigned):
            for fail in self._group_fails(slot.suffix, pid, root):
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
        cloud = self.cloud
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
                count, lacking = len(self._group_fails(slot.suffix, pid, root)), 0
                for rc, amount in slot.amounts:
                    before = amounts.get((pid, rc), [])
                    if (pid, rc) not in cloud.room:
                        count += not before  # one fail, however many amounts
                        lacking += not before
                    else:
                        count += _room_count(cloud, pid, rc, [*before, amount])
                        count -= _room_count(cloud, pid, rc, before)
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
    def _conflicts(self, root: int, assigned: list[int], fails: list[Fail]) -> list[Fail]:
        """A fail for each fix that would break another rule of the same
        assignment (conflicts.py): no change of data fixes both."""
        cloud = self.cloud
        by_uuid = {cloud.providers[pid].uuid: pid for pid in {*assigned, root}}
        changes: conflicts.Changes = {}
        for fail in fails:
            change = _change(fail)
            owner = by_uuid.get(fail.detail["provider"]["uuid"]) if change else None
            if change is None or owner is None:
                continue
            adds, kind, name = change
            changes.setdefault((owner, kind), (set(), set()))[0 if adds else 1].add(name)
        tree = [q for q in self.reach.get(root, [root]) if cloud.providers[q].root_id == root]
        return [
            Fail(
                "conflict",
                f"{cloud.names[pid]} would {'gain' if adds else 'lose'} {kind} {name} "
                "for one rule and break another",
                {"provider": self.ref(pid), kind: name},
            )
            for pid, kind, name, adds in conflicts.broken(
                cloud, self.request, self.slots, assigned, root, tree, changes
            )
        ]


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


def _room_count(cloud: Cloud, pid: int, rc: str, amounts: list[int]) -> int:
    if not amounts:
        return 0
    room = cloud.room.get((pid, rc))
    return 1 if room is None else len(room.lacks(*amounts))
