"""Combine request groups into allocation candidates, tree by tree. Pure.

For each anchor tree the groups become *slots*: one per requested class of
the unsuffixed group (it may spread over the tree and sharing providers),
one per granular group (one provider serves it whole). A depth-first walk
assigns a provider to each slot and prunes as soon as a partial assignment
breaks a rule: room (amounts of several groups on one provider add up),
group_policy=isolate, the pre-1.29 one-provider-per-tree rule, the
unsuffixed group's traits, same_subtree. Candidates are yielded lazily, so
``limit`` and ``max_allocation_candidates`` stop the walk instead of
trimming a list built in full.
"""

from __future__ import annotations

import itertools
import random
from collections.abc import Iterable, Iterator
from dataclasses import dataclass

from placement_svc.candidates.model import Found
from placement_svc.candidates.request import Request, RequestGroup


@dataclass(frozen=True)
class Candidate:
    allocations: dict[int, dict[str, int]]  # provider id -> class -> amount
    mappings: dict[str, tuple[int, ...]]  # group suffix -> provider ids

    def key(self):
        return (
            frozenset((pid, frozenset(r.items())) for pid, r in self.allocations.items()),
            frozenset(self.mappings.items()),
        )


@dataclass
class _Slot:
    group: RequestGroup
    resources: dict[str, int]
    options: list[int]
    last_of_unsuffixed: bool = False

    def __post_init__(self):
        # Read on every step of the walk: plain attributes, not properties.
        self.granular = self.group.same_provider
        self.suffix = self.group.suffix
        self.amounts = tuple(self.resources.items())


def generate(
    request: Request,
    found: Found,
    strategy: str = "depth-first",
    shuffle: random.Random | None = None,
) -> Iterator[Candidate]:
    """Every candidate, lazily; trees in turn (depth-first) or round-robin."""
    roots = list(found.roots)
    if shuffle is not None:
        shuffle.shuffle(roots)
    by_root = _options_by_root(found)
    per_tree = [_tree_candidates(request, found, by_root, root, shuffle) for root in roots]
    stream = _round_robin(per_tree) if strategy == "breadth-first" else itertools.chain(*per_tree)
    return _unique_shared(stream, found)


def take(candidates: Iterable[Candidate], limit: int | None, cap: int | None, rng=None):
    """At most ``cap`` generated; then the first ``limit``, or with ``rng`` a fair
    random sample of ``limit`` of them (reservoir sampling, bounded memory)."""
    if cap is not None and cap >= 0:
        candidates = itertools.islice(candidates, cap)
    if rng is None:
        return list(itertools.islice(candidates, limit)) if limit else list(candidates)
    if not limit:
        chosen = list(candidates)
        rng.shuffle(chosen)
        return chosen
    sample: list[Candidate] = []
    for seen, candidate in enumerate(candidates):
        if seen < limit:
            sample.append(candidate)
        else:
            slot = rng.randrange(seen + 1)
            if slot < limit:
                sample[slot] = candidate
    rng.shuffle(sample)
    return sample


def _round_robin(iterators):
    active = list(iterators)
    while active:
        still = []
        for iterator in active:
            item = next(iterator, None)
            if item is not None:
                yield item
                still.append(iterator)
        active = still


def _unique_shared(stream: Iterator[Candidate], found: Found) -> Iterator[Candidate]:
    """Only candidates made of sharing providers alone can come from two trees."""
    seen = set()
    for candidate in stream:
        if all(pid in found.sharing for pid in candidate.allocations):
            key = candidate.key()
            if key in seen:
                continue
            seen.add(key)
        yield candidate


def _options_by_root(found: Found) -> dict[tuple, dict[int, list[int]]]:
    """(suffix, class) -> anchor root -> providers in reach, indexed once so each
    tree's slots cost only their own options. Sharing providers are in reach of
    every tree they share with."""
    index: dict[tuple, dict[int, list[int]]] = {}
    for suffix, by_class in found.options.items():
        for key, pids in by_class.items():
            per_root: dict[int, list[int]] = {}
            for pid in pids:
                roots = {found.providers[pid].root_id}
                if pid in found.sharing:
                    roots |= found.shares_with.get(pid, set())
                for root in roots:
                    per_root.setdefault(root, []).append(pid)
            index[(suffix, key)] = per_root
    return index


def _slots_for(request: Request, by_root, root: int, shuffle) -> list[_Slot] | None:
    slots: list[_Slot] = []
    for suffix, group in request.groups.items():
        if group.same_provider:
            parts = [(None, dict(group.resources))]
        else:
            parts = [(rc, {rc: amount}) for rc, amount in group.resources.items()]
        for key, resources in parts:
            options = list(by_root.get((suffix, key), {}).get(root, ()))
            if not options:
                return None
            if shuffle is not None:
                shuffle.shuffle(options)
            slots.append(_Slot(group, resources, options))
        if not group.same_provider and slots:
            slots[-1].last_of_unsuffixed = True
    return slots


def _tree_candidates(
    request: Request, found: Found, by_root, root: int, shuffle
) -> Iterator[Candidate]:
    slots = _slots_for(request, by_root, root, shuffle)
    if slots is None:
        return
    used: dict[tuple[int, str], int] = {}
    assigned: list[int] = []
    granular_users: dict[int, int] = {}  # provider -> granular slots it serves
    subtree_done = _subtree_completion(request, slots)

    def fits(pid: int, slot: _Slot) -> bool:
        for rc, amount in slot.amounts:
            room = found.room[(pid, rc)]
            total = used.get((pid, rc), 0) + amount
            if total > room.free or total > room.max_unit:
                return False
        if slot.granular and request.isolate and granular_users.get(pid):
            return False
        if not request.nested:
            tree = found.providers[pid].root_id
            if any(q != pid and found.providers[q].root_id == tree for q in assigned):
                return False
        return True

    def visit(index: int):
        if index == len(slots):
            yield _candidate(slots, assigned)
            return
        slot = slots[index]
        for pid in slot.options:
            if not fits(pid, slot):
                continue
            assigned.append(pid)
            for rc, amount in slot.amounts:
                used[(pid, rc)] = used.get((pid, rc), 0) + amount
            if slot.granular:
                granular_users[pid] = granular_users.get(pid, 0) + 1
            if _still_valid(request, found, slots, assigned, index, subtree_done):
                yield from visit(index + 1)
            if slot.granular:
                granular_users[pid] -= 1
            for rc, amount in slot.amounts:
                used[(pid, rc)] -= amount
            assigned.pop()

    yield from visit(0)


def _subtree_completion(request: Request, slots: list[_Slot]) -> dict[int, list[set[str]]]:
    """slot index -> same_subtree sets whose groups are all assigned at that index."""
    last_index = {slot.group.suffix: i for i, slot in enumerate(slots)}
    done: dict[int, list[set[str]]] = {}
    for suffixes in request.same_subtrees:
        done.setdefault(max(last_index[s] for s in suffixes), []).append(suffixes)
    return done


def _still_valid(request, found: Found, slots, assigned, index, subtree_done) -> bool:
    slot = slots[index]
    if slot.last_of_unsuffixed and slot.group.required.any_of:
        traits = frozenset().union(
            *(found.traits[pid] for s, pid in zip(slots, assigned) if not s.granular)
        )
        if any(not (traits & any_of) for any_of in slot.group.required.any_of):
            return False
    for suffixes in subtree_done.get(index, ()):
        members = {pid for s, pid in zip(slots, assigned) if s.suffix in suffixes}
        if not _one_is_ancestor_of_all(found, members):
            return False
    return True


def _one_is_ancestor_of_all(found: Found, members: set[int]) -> bool:
    common = None
    for pid in members:
        line = set()
        current = pid
        while current is not None:
            line.add(current)
            current = found.providers[current].parent_id
        common = line if common is None else common & line
    return bool(common & members)


def _candidate(slots: list[_Slot], assigned: list[int]) -> Candidate:
    allocations: dict[int, dict[str, int]] = {}
    mappings: dict[str, list[int]] = {}
    for slot, pid in zip(slots, assigned):
        if slot.amounts:
            per_class = allocations.get(pid)
            if per_class is None:
                per_class = allocations[pid] = {}
            for rc, amount in slot.amounts:
                per_class[rc] = per_class.get(rc, 0) + amount
        providers = mappings.get(slot.suffix)
        if providers is None:
            mappings[slot.suffix] = [pid]
        elif pid not in providers:
            providers.append(pid)
    return Candidate(allocations, {s: tuple(p) for s, p in mappings.items()})
