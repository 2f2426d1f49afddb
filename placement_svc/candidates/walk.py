"""One tree's walk: a provider for each slot, depth first, pruned as soon
as a partial assignment breaks a rule. Pure.

For each anchor tree the groups become *slots*: one per requested class of
the unsuffixed group (it may spread over the tree and sharing providers),
one per granular group (one provider serves it whole). ``Walk.tree``
assigns a provider to each slot and ends a branch as soon as it breaks a
rule: room (amounts of several groups on one provider add up), isolation
(group_policy=isolate, isolate=), the pre-1.29 one-provider-per-tree rule,
the unsuffixed group's traits, same_subtree and its negated groups
(subtree.py), and the safe shortcuts of prune.py. It yields
*assignments*, lazily: one provider id per slot, in slot order, a plain
tuple. merge.py takes the trees in turn and makes the answer's stream of
them.
"""

from __future__ import annotations

import functools
import random
from collections.abc import Iterable, Iterator
from typing import Any, NamedTuple

from placement_svc.candidates import prune, subtree
from placement_svc.candidates.model import Found
from placement_svc.candidates.request import Request

# A provider id per slot, in the order of ``slots(request)``.
Assignment = tuple[int, ...]


class Slot(NamedTuple):
    """One provider to choose: a class of the unsuffixed group, or a granular
    group whole. Built once per request; each tree only brings options."""

    suffix: str
    key: str | None  # the class (unsuffixed group) or None (a granular group)
    amounts: tuple[tuple[str, int], ...]
    granular: bool
    # On the unsuffixed group's last slot: its any-of trait sets, which the
    # providers chosen for the group must meet together.
    collective_any_of: tuple[frozenset[str], ...] = ()
    # A granular group in request.isolated: its provider serves no other
    # granular group.
    isolated: bool = False


def slots(request: Request) -> list[Slot]:
    """The walk's slots for a request, in the order it fills them."""
    slots: list[Slot] = []
    for suffix, group in request.groups.items():
        if group.same_provider:
            amounts = tuple(group.resources.items())
            isolated = suffix in request.isolated
            slots.append(Slot(suffix, None, amounts, True, isolated=isolated))
            continue
        parts = [Slot(suffix, rc, ((rc, amount),), False) for rc, amount in group.resources.items()]
        if parts and group.required.any_of:
            parts[-1] = parts[-1]._replace(collective_any_of=tuple(group.required.any_of))
        slots.extend(parts)
    return slots


_NO_REACH: dict[int, frozenset[int]] = {}  # a group whose rules narrow no sharing provider


def options_by_root(found: Found) -> dict[tuple[str, str | None], dict[int, list[int]]]:
    """(suffix, class) -> anchor root -> providers in reach, indexed once so each
    tree's slots cost only their own options. Sharing providers are in reach of
    every tree they share with, or of the trees the group's rules leave them
    (``found.reach``). Groups that share their options and reach (those
    that ask the same: eligibility.apply) share one index, read only."""
    index: dict[tuple[str, str | None], dict[int, list[int]]] = {}
    providers, sharing = found.providers, found.sharing
    made: dict[tuple[int, int], dict[int, list[int]]] = {}
    for suffix, by_class in found.options.items():
        narrowed = found.reach.get(suffix, _NO_REACH)
        for key, pids in by_class.items():
            shared = (id(pids), id(narrowed))
            if shared in made:
                index[(suffix, key)] = made[shared]
                continue
            per_root = made[shared] = {}
            for pid in pids:
                trees = narrowed.get(pid) if pid in sharing else None
                if trees is not None:
                    for tree in trees:
                        per_root.setdefault(tree, []).append(pid)
                    continue
                root = providers[pid].root_id
                reach = per_root.get(root)
                if reach is None:
                    per_root[root] = [pid]
                else:
                    reach.append(pid)
                if pid in sharing:
                    for other in found.shares_with.get(pid, ()):
                        if other != root:
                            per_root.setdefault(other, []).append(pid)
            index[(suffix, key)] = per_root
    return index


_NO_OPTIONS: list[int] = []  # a slot's options in a tree out of its reach: never changed


class Walk:
    """The rules of one request, applied tree by tree."""

    def __init__(
        self,
        request: Request,
        found: Found,
        shuffle: random.Random | None,
        shared_room: bool = True,
    ) -> None:
        self.request, self.found, self.shuffle = request, found, shuffle
        # Off only for an explanation's steps: each slot then needs room for
        # its own amounts alone, as if no other group used its provider.
        self.shared_room = shared_room
        self.slots = slots(request)
        index = options_by_root(found)
        self.reach = [index.get((slot.suffix, slot.key), {}) for slot in self.slots]
        self.subtree_done = subtree.completion(request, self.slots)
        self.apart_done = subtree.apart_completion(request, self.slots)
        self.subtree_partial = subtree.partial(request, self.slots)
        self.nested = request.nested
        # What a tree of one provider must hold, if it is to serve every slot.
        self.totals: dict[str, int] = {}
        for slot in self.slots:
            for rc, amount in slot.amounts:
                self.totals[rc] = self.totals.get(rc, 0) + amount
        granular = [slot for slot in self.slots if slot.granular]
        isolating = len(granular) > 1 and any(slot.isolated for slot in granular)
        self.lone_ok = not (isolating or self.apart_done)
        self.any_of = tuple(one_of for slot in self.slots for one_of in slot.collective_any_of)
        self.classes = tuple(self.totals)
        self.demand = prune.demand_after(self.slots)
        self.checked = {i for i, slot in enumerate(self.slots) if slot.collective_any_of}
        self.checked.update(self.subtree_done, self.apart_done, self.subtree_partial)
        self.budget = found.budget

    @functools.cached_property
    def parents(self) -> set[int]:
        """Providers with children: read once per request, and only by a tree
        that needs a search (most trees of a flat cloud never do)."""
        providers = self.found.providers.values()
        return {p.parent_id for p in providers if p.parent_id is not None}

    def tree(self, root: int) -> Iterable[Assignment]:
        self.budget.spend()
        options = [reach.get(root, _NO_OPTIONS) for reach in self.reach]
        if not all(options):
            return iter(())
        if self.shuffle is None:
            # A flat cloud's every tree: one provider, every slot's only option.
            lone = options[0]
            if len(lone) == 1:
                pid = lone[0]
                for mine in options:
                    if len(mine) != 1 or mine[0] != pid:
                        break
                else:
                    return self._alone(pid)
        else:
            options = [self.shuffle.sample(mine, len(mine)) for mine in options]
        if all(len(mine) == 1 for mine in options):
            choice = [mine[0] for mine in options]
            if all(pid == choice[0] for pid in choice):
                return self._alone(choice[0])
            return self._only(choice)
        return self._search(options)

    def _alone(self, pid: int) -> tuple[Assignment, ...]:
        """Every slot's only option is one provider (a tree of one, say): the
        rules reduce to room for the sums, isolation and its traits; a
        provider is its own ancestor, so same_subtree holds, and a negated
        group on the subtree root itself never does."""
        if not self.lone_ok:
            return ()
        room = self.found.room
        for rc, total in self.totals.items() if self.shared_room else ():
            have = room[(pid, rc)]
            if total > have.free or total > have.max_unit:
                return ()
        if self.any_of:
            traits = self.found.traits[pid]
            if any(not (traits & one_of) for one_of in self.any_of):
                return ()
        # The one candidate: the sums on ``pid``, every group mapped to it.
        self.budget.spend(len(self.slots))
        return ((pid,) * len(self.slots),)

    def _only(self, choice: list[int]) -> Iterator[Assignment]:
        """No choice to make (a tree of one provider, say): check the one assignment."""
        used: dict[tuple[int, str], int] = {}
        granular_users: dict[int, int] = {}
        isolated_users: dict[int, int] = {}
        option_sets = [{pid} for pid in choice] if self.subtree_partial else []
        for index, (slot, pid) in enumerate(zip(self.slots, choice)):
            if not self._fits(pid, slot, used, granular_users, isolated_users, choice[:index]):
                return
            self._place(pid, slot, used, granular_users, isolated_users, 1)
            if not self._still_valid(choice, index, option_sets):
                return
        self.budget.spend(len(choice))
        yield tuple(choice)

    def _search(self, options: list[list[int]]) -> Iterator[Assignment]:
        """Depth first over the slots, pruning as soon as a rule breaks, the
        room left cannot cover the slots still to fill, or a branch mirrors
        one that ended without a candidate (see prune.py)."""
        slots, demand = self.slots, self.demand
        bound = prune.RoomBound(slots, options, self.found, self.shared_room)
        if not bound.allows(demand[0]):
            return iter(())
        if self.shared_room and not prune.placeable(slots, options, self.found.room):
            return iter(())
        mirrors = prune.Mirrors(self.found, options, self.parents, self.classes)
        # The trees' walks may be interleaved (breadth-first): this tree's own.
        option_sets = [set(mine) for mine in options] if self.subtree_partial else []
        used: dict[tuple[int, str], int] = {}
        granular_users: dict[int, int] = {}  # provider -> granular slots it serves
        isolated_users: dict[int, int] = {}  # provider -> isolated slots it serves
        in_use: dict[int, int] = {}  # provider -> slots it serves
        assigned: list[int] = []
        last = len(slots) - 1
        fits, still_valid = self._fits, self._still_valid
        last_checked = last in self.checked
        budget = self.budget

        def leaves() -> Iterator[Assignment]:
            """The last slot: every provider that fits completes an
            assignment. Nothing is placed for it, since nothing reads the
            room or the bound after it (what is left for no slot at all is
            always enough)."""
            slot = slots[last]
            dead_ends = None
            budget.spend(len(options[last]))
            width = len(slots)
            for pid in options[last]:
                if not fits(pid, slot, used, granular_users, isolated_users, assigned):
                    continue
                fresh = not in_use.get(pid)
                if fresh and dead_ends is not None:
                    signature = mirrors.signature(pid)
                    if signature is not None and signature in dead_ends:
                        continue
                assigned.append(pid)
                produced = not last_checked or still_valid(assigned, last, option_sets)
                if produced:
                    budget.spend(width)  # a candidate: one step per slot it renders
                    yield tuple(assigned)
                assigned.pop()
                if fresh and not produced:
                    signature = mirrors.signature(pid)
                    if signature is not None:
                        dead_ends = dead_ends or set()
                        dead_ends.add(signature)

        def visit() -> Iterator[Assignment]:
            """Every slot but the last, depth first, on an explicit stack (no
            recursion, whatever the number of slots): at each depth the
            providers of its options in turn; one that fits is placed, the
            walk goes a slot deeper, and it is taken back when that is done.
            A fresh provider whose branch gave nothing makes its mirrors dead
            ends at that depth."""
            positions = [0] * last  # the next option to try, per depth
            dead: list[set[Any] | None] = [None] * last  # dead-end signatures, per depth
            # per depth: the provider placed, fresh, its first granular use,
            # and how many assignments had been yielded when it was placed
            placed: list[tuple[int, bool, bool, int]] = [(0, False, False, 0)] * last
            yielded = 0

            def take_back(index: int, yielded: int) -> None:
                pid, fresh, first_granular, before = placed[index]
                slot = slots[index]
                bound.place(slot, pid, first_granular, -1)
                self._place(pid, slot, used, granular_users, isolated_users, -1)
                in_use[pid] -= 1
                assigned.pop()
                if fresh and yielded == before:
                    signature = mirrors.signature(pid)
                    if signature is not None:
                        dead[index] = dead[index] or set()
                        dead[index].add(signature)  # type: ignore[union-attr]

            index = 0
            budget.spend(len(options[0]))
            while True:
                slot, mine, at = slots[index], options[index], positions[index]
                chosen, fresh = None, False
                while at < len(mine):
                    pid = mine[at]
                    at += 1
                    if not fits(pid, slot, used, granular_users, isolated_users, assigned):
                        continue
                    fresh = not in_use.get(pid)
                    dead_ends = dead[index]
                    if fresh and dead_ends is not None:
                        signature = mirrors.signature(pid)
                        if signature is not None and signature in dead_ends:
                            continue
                    chosen = pid
                    break
                positions[index] = at
                if chosen is None:  # this depth is done: back to the one above
                    if index == 0:
                        return
                    index -= 1
                    take_back(index, yielded)
                    continue
                first_granular = slot.granular and not granular_users.get(chosen)
                assigned.append(chosen)
                in_use[chosen] = in_use.get(chosen, 0) + 1
                self._place(chosen, slot, used, granular_users, isolated_users, 1)
                bound.place(slot, chosen, first_granular, 1)
                placed[index] = (chosen, fresh, first_granular, yielded)
                if bound.allows(demand[index + 1]) and still_valid(assigned, index, option_sets):
                    if index + 1 < last:  # a slot deeper, from its first option
                        index += 1
                        positions[index] = 0
                        dead[index] = None
                        budget.spend(len(options[index]))
                        continue
                    for assignment in leaves():
                        yielded += 1
                        yield assignment
                take_back(index, yielded)

        return leaves() if last == 0 else visit()

    def _fits(
        self,
        pid: int,
        slot: Slot,
        used: dict[tuple[int, str], int],
        granular_users: dict[int, int],
        isolated_users: dict[int, int],
        assigned: list[int],
    ) -> bool:
        """Room for the slot on ``pid``; isolation: an isolated group's
        provider serves no other granular group, whichever comes first."""
        room, shared = self.found.room, self.shared_room
        for rc, amount in slot.amounts:
            have = room[(pid, rc)]
            total = used.get((pid, rc), 0) + amount if shared else amount
            if total > have.free or total > have.max_unit:
                return False
        if slot.granular and granular_users.get(pid) and (slot.isolated or isolated_users.get(pid)):
            return False
        if not self.nested:
            providers = self.found.providers
            tree = providers[pid].root_id
            if any(q != pid and providers[q].root_id == tree for q in assigned):
                return False
        return True

    @staticmethod
    def _place(
        pid: int,
        slot: Slot,
        used: dict[tuple[int, str], int],
        granular_users: dict[int, int],
        isolated_users: dict[int, int],
        sign: int,
    ) -> None:
        for rc, amount in slot.amounts:
            used[(pid, rc)] = used.get((pid, rc), 0) + sign * amount
        if slot.granular:
            granular_users[pid] = granular_users.get(pid, 0) + sign
            if slot.isolated:
                isolated_users[pid] = isolated_users.get(pid, 0) + sign

    def _still_valid(self, assigned: list[int], index: int, option_sets: list[set[int]]) -> bool:
        """The rules of several groups that the slot at ``index`` completes,
        and whether the same_subtree sets it adds to can still hold (given
        this tree's ``option_sets``: each slot's options)."""
        if index not in self.checked:  # most slots complete none
            return True
        slots, found = self.slots, self.found
        any_of = slots[index].collective_any_of
        if any_of:
            traits = frozenset().union(
                *(found.traits[pid] for s, pid in zip(slots, assigned) if not s.granular)
            )
            if any(not (traits & one_of) for one_of in any_of):
                return False
        for suffixes in self.subtree_done.get(index, ()):
            members = {pid for s, pid in zip(slots, assigned) if s.suffix in suffixes}
            if subtree.root(found, members) is None:
                return False
        for partial, later in self.subtree_partial.get(index, ()):
            members = {pid for s, pid in zip(slots, assigned) if s.suffix in partial}
            later_options = [option_sets[i] for i in later]
            if not subtree.may_still_root(found, members, later_options):
                return False
        for positive, negated in self.apart_done.get(index, ()):
            if not subtree.apart(found, slots, assigned, positive, negated):
                return False
        return True
