"""Combine request groups into allocation candidates, tree by tree. Pure.

Each anchor tree is walked on its own (walk.py: a provider per slot, the
rules checked as the walk goes); this takes the trees in turn (depth-first)
or in rounds (breadth-first), in a random order when asked, and makes of
their assignments the answer's stream: a candidate of sharing providers
alone, which two trees may both give, once. It is lazy, so ``limit`` and
``max_allocation_candidates`` stop the walk instead of trimming a list
built in full (``take``, ``choose``).

The stream holds *assignments* (walk.Assignment: a provider id per slot).
``generate`` makes Candidates of them (``candidate``); an answer that is
only going to be rendered keeps the assignments, which are several times
smaller and cheaper to make (render.py writes JSON straight from them).
"""

from __future__ import annotations

import functools
import itertools
import random
from collections.abc import Callable, Iterable, Iterator
from typing import Any, NamedTuple, TypeVar

from placement_svc.candidates import prune, rank
from placement_svc.candidates.model import Found
from placement_svc.candidates.request import Request
from placement_svc.candidates.walk import Assignment, Slot, Walk


class Candidate(NamedTuple):
    allocations: dict[int, dict[str, int]]  # provider id -> class -> amount
    mappings: dict[str, tuple[int, ...]]  # group suffix -> provider ids

    def key(self) -> tuple[frozenset[Any], frozenset[Any]]:
        return (
            frozenset((pid, frozenset(r.items())) for pid, r in self.allocations.items()),
            frozenset(self.mappings.items()),
        )


class Tally:
    """What a walk did, for the metrics: the trees it entered, and how many
    of those gave at least one candidate; the others the rules pruned."""

    def __init__(self) -> None:
        self.entered = 0
        self.kept = 0

    @property
    def pruned(self) -> int:
        return self.entered - self.kept


def generate(
    request: Request,
    found: Found,
    strategy: str = "depth-first",
    shuffle: random.Random | None = None,
    tally: Tally | None = None,
) -> Iterator[Candidate]:
    """Every candidate, lazily; trees in turn (depth-first) or round-robin.
    With ``tally``, counts the trees entered and kept as the walk goes."""
    walked = assignments(request, found, strategy, shuffle, tally)
    return map(functools.partial(candidate, walked.slots), walked.stream)


class Walked(NamedTuple):
    """The slots of a request, and its assignments (a provider per slot)."""

    slots: list[Slot]
    stream: Iterator[Assignment]


def assignments(
    request: Request,
    found: Found,
    strategy: str = "depth-first",
    shuffle: random.Random | None = None,
    tally: Tally | None = None,
) -> Walked:
    """``generate``'s candidates as assignments, lazily, in the same order."""
    roots = list(found.roots)
    if shuffle is not None:
        shuffle.shuffle(roots)
    walk = Walk(request, found, shuffle)
    roots = entered(walk, found, roots, tally)
    stream: Iterator[Assignment]
    if strategy == "breadth-first":
        trees = [iter(walk.tree(root)) for root in roots]
        if tally is not None:
            trees = [_tallied(tree, tally) for tree in trees]
        stream = _round_robin(trees)
    elif tally is not None:
        stream = _depth_first_tallied(walk, roots, tally)
    else:
        stream = (assigned for root in roots for assigned in walk.tree(root))
    if found.sharing:
        stream = _unique_shared(stream, walk.slots, found)
    return Walked(walk.slots, stream)


def entered(walk: Walk, found: Found, roots: list[int], tally: Tally | None) -> list[int]:
    """The trees of ``roots`` (in their order) the walk enters: not those
    that cannot hold the unsuffixed group's traits, nor those out of some
    slot's reach (counted as entered and pruned)."""
    if walk.any_of:
        able = prune.able_roots(found, walk.any_of, roots)
        kept = [root for root in roots if root in able]
        if tally is not None:
            tally.entered += len(roots) - len(kept)
        roots = kept
    if walk.reach:
        kept = roots
        for reach in sorted(walk.reach, key=len):
            kept = [root for root in kept if root in reach]
        if tally is not None:
            tally.entered += len(roots) - len(kept)
        roots = kept
    return roots


def ranked(
    request: Request,
    found: Found,
    needed: int,
    rng: random.Random | None = None,
    tally: Tally | None = None,
) -> tuple[list[Slot], rank.Ranked]:
    """The slots, and the first ``needed`` candidates (0: all) in the order
    ``request.ranking`` gives (rank.py), at most ``per_root`` per root. The
    trees are walked in walk order (an ``rng`` only breaks exact ties)."""
    assert request.ranking is not None
    walk = Walk(request, found, None)
    roots = entered(walk, found, list(found.roots), tally)

    def unique(stream: Iterator[Assignment]) -> Iterator[Assignment]:
        return _unique_shared(stream, walk.slots, found)

    def on_tree(gave: bool) -> None:
        if tally is not None:
            tally.entered += 1
            tally.kept += gave

    chosen = rank.ranked(request.ranking, found, walk, roots, needed, rng, unique, on_tree)
    return walk.slots, chosen


def _depth_first_tallied(walk: Walk, roots: list[int], tally: Tally) -> Iterator[Assignment]:
    """The depth-first stream, counting as it goes (no layer per tree)."""
    for root in roots:
        tally.entered += 1
        first = True
        for assigned in walk.tree(root):
            if first:
                tally.kept += 1
                first = False
            yield assigned


def _tallied(stream: Iterator[Assignment], tally: Tally) -> Iterator[Assignment]:
    tally.entered += 1
    first = next(stream, None)
    if first is None:
        return
    tally.kept += 1
    yield first
    yield from stream


T = TypeVar("T")  # a Candidate, or an Assignment


def take(
    candidates: Iterable[T],
    limit: int | None,
    cap: int | None,
    rng: random.Random | None = None,
) -> list[T]:
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
    sample: list[T] = []
    for seen, candidate in enumerate(candidates):
        if seen < limit:
            sample.append(candidate)
        else:
            slot = rng.randrange(seen + 1)
            if slot < limit:
                sample[slot] = candidate
    rng.shuffle(sample)
    return sample


def choose(
    candidates: Iterable[T],
    limit: int | None,
    cap: int | None,
    rng: random.Random | None = None,
    keep_whole: bool = False,
) -> tuple[list[T], list[T] | None]:
    """``take``, and with ``keep_whole`` the whole answer (up to ``cap``) it
    chose from, when ``limit`` cut that answer short; otherwise None. Before
    1.29 upstream's provider summaries depend on that whole answer (see
    render.summary_providers), so it has to be generated to the end."""
    if not (keep_whole and limit):
        return take(candidates, limit, cap, rng), None
    whole = take(candidates, None, cap)
    chosen = take(whole, limit, None, rng)
    return chosen, (whole if len(whole) > limit else None)


def trees_with_candidates(
    request: Request, found: Found, roots: Iterable[int], shared_room: bool = True
) -> list[int]:
    """The roots (of ``roots``) whose trees have at least one candidate: the
    walk stops at each tree's first. ``shared_room`` False: as if each
    group had its providers' room to itself (an explanation's first step)."""
    walk = Walk(request, found, None, shared_room)
    return [root for root in roots if next(iter(walk.tree(root)), None) is not None]


def count(request: Request, found: Found, most: int) -> int:
    """How many candidates ``generate`` would yield, up to ``most`` + 1,
    without building them: only those of sharing providers alone, which
    two trees may both yield and the answer has once, are built, to be told
    apart."""
    walk = Walk(request, found, None)
    slots, sharing = walk.slots, found.sharing
    seen = set()
    counted = 0
    for root in found.roots:
        for assigned in walk.tree(root):
            if sharing and _sharing_alone(slots, assigned, sharing):
                key = candidate(slots, assigned).key()
                if key in seen:
                    continue
                seen.add(key)
            counted += 1
            if counted > most:
                return counted
    return counted


def first_in_tree(request: Request, found: Found) -> Callable[[int], Candidate | None]:
    """root -> the first candidate of its tree in the walk's order, on the
    room as it is when asked: a caller may take room away between calls
    (capacity.py claims copies), as the walk checks every amount against the
    room left."""
    walk = Walk(request, found, None)

    def first(root: int) -> Candidate | None:
        assigned = next(iter(walk.tree(root)), None)
        return None if assigned is None else candidate(walk.slots, assigned)

    return first


def _round_robin(iterators: list[Iterator[Assignment]]) -> Iterator[Assignment]:
    active = list(iterators)
    while active:
        still = []
        for iterator in active:
            item = next(iterator, None)
            if item is not None:
                yield item
                still.append(iterator)
        active = still


def _sharing_alone(slots: list[Slot], assigned: Assignment, sharing: set[int]) -> bool:
    """Whether every provider the assignment allocates from is a sharing one."""
    return all(pid in sharing for slot, pid in zip(slots, assigned) if slot.amounts)


def _unique_shared(
    stream: Iterator[Assignment], slots: list[Slot], found: Found
) -> Iterator[Assignment]:
    """Only candidates made of sharing providers alone can come from two trees."""
    seen = set()
    sharing = found.sharing
    for assigned in stream:
        if _sharing_alone(slots, assigned, sharing):
            key = candidate(slots, assigned).key()
            if key in seen:
                continue
            seen.add(key)
        yield assigned


def candidate(slots: list[Slot], assigned: Assignment) -> Candidate:
    """The candidate an assignment makes: a provider's amounts add up over the
    slots it serves, in slot order; a group maps to its providers in order."""
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
