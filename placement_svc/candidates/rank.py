"""Ranked candidates (1.48, placement-svc's own): the order ``sort=``,
``prefer=`` and ``prefer_member_of=`` give an answer, with ``per_root=``
and ``limit`` applied after it. Pure.

What the order is, for a candidate (an assignment: a provider per slot):

- **Its root**: the root of the first provider it maps that is not a
  sharing provider; the root of its first provider when all are sharing
  providers.
- **Its score**: the sum of W over every ``prefer`` TRAIT:W that some
  provider it allocates from has and every !TRAIT:W that none of them has,
  and over every ``prefer_member_of`` AGGREGATE:W whose aggregate its root
  is in.
- **A sort key** ``spread:CLASS`` or ``pack:CLASS``: over the providers of
  its root's tree with an inventory of CLASS, summed in provider id order,
  ``(capacity - used - what the candidate allocates of CLASS from them) /
  capacity``, capacity being ``(total - reserved) * allocation_ratio``;
  None for a tree with no capacity of CLASS.
- **The order**: score, highest first; then the sort keys in order, spread
  highest first and pack lowest first, a None last either way; then the
  order of the depth-first answer without ranking (its trees in anchor
  order, each tree's candidates in walk order, whatever
  ``allocation_candidates_generation_strategy`` says: round-robin only
  changes which candidates a limit keeps, and ranking weighs them all), or
  with an ``rng`` a random order of exact ties.
- ``per_root``: the first N candidates of each root in that order; then
  ``limit``: the first N of what is left.

Ranking does not enumerate everything under a limit. A tree's best
possible place is known before its candidates are made (``Bounds``: its
score if every trait a provider of it has counted, and its free fractions,
which are every candidate's of it), so the search works out the room of
the best trees only (rooms.ranked_window; find.py widens it while a tree
left out could still come first), trees are walked best bound first, and
the walk stops at the first tree whose bound comes after the last
candidate kept; a tree's own walk stops as soon as no later candidate of
it could be kept. A cloud with sharing providers (whose candidates may
have another tree's root) is ranked whole.
"""

from __future__ import annotations

import heapq
import math
import random
from collections.abc import Callable, Collection, Iterable, Iterator, Mapping
from typing import Any, NamedTuple

from placement_svc.candidates.model import Fill, Found
from placement_svc.candidates.request import Ranking
from placement_svc.candidates.walk import Assignment, Slot, Walk

_NONE: frozenset[str] = frozenset()
# Where a sort key puts a tree with no capacity of its class: after any
# fraction, spread or pack (a place is a flat tuple of numbers: quick to compare).
_NO_CAPACITY = math.inf


class Rank(NamedTuple):
    """What a candidate was ranked by, as the answer shows it."""

    score: int
    keys: tuple[float | None, ...]

    def body(self) -> dict[str, Any]:
        return {"score": self.score, "keys": list(self.keys)}


class _Ranker:
    """The rank of an assignment (and what _bounded needs of the request)."""

    def __init__(self, ranking: Ranking, found: Found, slots: list[Slot]) -> None:
        self.providers, self.sharing = found.providers, found.sharing
        self.traits, self.aggregates = found.traits, found.aggregates
        self.allocating = [index for index, slot in enumerate(slots) if slot.amounts]
        self.ranking = ranking
        self.prefer, self.members = ranking.prefer, ranking.prefer_member_of
        self.totals: dict[str, int] = {}
        for slot in slots:
            for rc, amount in slot.amounts:
                self.totals[rc] = self.totals.get(rc, 0) + amount
        self.sort: list[tuple[bool, Any, list[tuple[int, int]], int]] = []
        for direction, rc in ranking.sort:
            amounts = [
                (index, amount)
                for index, slot in enumerate(slots)
                for held_rc, amount in slot.amounts
                if held_rc == rc
            ]
            total = sum(amount for _index, amount in amounts)
            self.sort.append((direction == "spread", found.fills.get(rc, {}), amounts, total))

    def root(self, assigned: Assignment) -> int:
        providers, sharing = self.providers, self.sharing
        for pid in assigned:
            if pid not in sharing:
                return providers[pid].root_id
        return providers[assigned[0]].root_id

    def rank(self, assigned: Assignment) -> tuple[Rank, tuple[Any, ...]]:
        """The candidate's Rank and its place in the order but for the tie
        break (a tuple that sorts first for the best)."""
        root = self.root(assigned)
        score = 0
        if self.prefer:
            traits = self.traits
            held: set[str] = set()
            for index in self.allocating:
                held.update(traits.get(assigned[index], _NONE))
            for trait, negated, weight in self.prefer:
                if (trait in held) != negated:
                    score += weight
        if self.members:
            aggregates = self.aggregates.get(root, _NONE)
            for aggregate, weight in self.members:
                if aggregate in aggregates:
                    score += weight
        keys: list[float | None] = []
        place: list[Any] = [-score]
        providers = self.providers
        for spread, fill, amounts, _total in self.sort:
            filled = fill.get(root)
            if filled is None or filled[0] <= 0:
                keys.append(None)
                place.append(_NO_CAPACITY)
                continue
            capacity, used = filled
            taken = 0
            for index, amount in amounts:
                if providers[assigned[index]].root_id == root:
                    taken += amount
            fraction = (capacity - used - taken) / capacity
            keys.append(fraction)
            place.append(-fraction if spread else fraction)
        return Rank(score, tuple(keys)), tuple(place)


class Bounds:
    """The best place any candidate of a tree can have, in a cloud without
    sharing providers: every candidate of the tree has its root and
    allocates from its providers alone, so its sort keys are the tree's
    (it takes all it asks of each class from the tree), and its score is
    at most what every trait of the tree's providers would give."""

    def __init__(
        self,
        ranking: Ranking,
        totals: dict[str, int],
        held: Mapping[int, Collection[str]],
        aggregates: Mapping[int, frozenset[str]],
        fills: Mapping[str, Any],
    ) -> None:
        """``held``: root -> every trait some provider of its tree has (read
        only when the ranking prefers a trait)."""
        self.positive = [(trait, w) for trait, negated, w in ranking.prefer if not negated]
        # A !TRAIT may hold for some candidate of any tree: its weight always counts.
        self.fixed = sum(w for _trait, negated, w in ranking.prefer if negated)
        self.members = ranking.prefer_member_of
        self.held, self.aggregates = held, aggregates
        self.sort = [
            (-1.0 if direction == "spread" else 1.0, fills.get(rc, {}), totals.get(rc, 0))
            for direction, rc in ranking.sort
        ]

    def __call__(self, root: int) -> tuple[Any, ...]:
        return self.placed((root,))[0][0]

    def placed(self, roots: Iterable[int]) -> list[Bound]:
        """(bound, root) of each root: one loop, every tree of the cloud is
        bounded (a tenth of a microsecond a tree for one sort key and no
        preference)."""
        found: list[Bound] = []
        add = found.append
        if not (self.positive or self.members) and len(self.sort) == 1:
            ((sign, fill, total),) = self.sort
            none = (-self.fixed, _NO_CAPACITY)
            score = -self.fixed
            if isinstance(fill, Fill):  # the whole cloud's (rooms.kept_fills)
                capacity_of, taken_of = fill.capacity.get, fill.taken.get
                for root in roots:
                    capacity = capacity_of(root)
                    if capacity is None or capacity <= 0:
                        add((none, root))
                    else:
                        used = taken_of(root, 0)
                        add(((score, sign * ((capacity - used - total) / capacity)), root))
                return found
            get = fill.get
            for root in roots:
                filled = get(root)
                if filled is None or filled[0] <= 0:
                    add((none, root))
                else:
                    capacity, used = filled
                    add(((score, sign * ((capacity - used - total) / capacity)), root))
            return found
        positive, members, fixed = self.positive, self.members, self.fixed
        held_of, aggregates_of = self.held, self.aggregates
        for root in roots:
            score = fixed
            if positive:
                held = held_of.get(root, _NONE)
                for trait, weight in positive:
                    if trait in held:
                        score += weight
            if members:
                aggregates = aggregates_of.get(root, _NONE)
                for aggregate, weight in members:
                    if aggregate in aggregates:
                        score += weight
            place: list[Any] = [-score]
            for sign, fill, total in self.sort:
                filled = fill.get(root)
                if filled is None or filled[0] <= 0:
                    place.append(_NO_CAPACITY)
                else:
                    capacity, used = filled
                    place.append(sign * ((capacity - used - total) / capacity))
            add((tuple(place), root))
        return found


def totals(groups: Iterable[Any]) -> dict[str, int]:
    """class -> the whole amount a request's groups ask of it."""
    asked: dict[str, int] = {}
    for group in groups:
        for rc, amount in group.resources.items():
            asked[rc] = asked.get(rc, 0) + amount
    return asked


def best_first(placed: list[Bound], most: int | None = None) -> list[Bound]:
    """``placed`` ((bound, root) of each root: Bounds.placed), best first
    (ties: lower root first, the answer's order); with ``most``, only the
    first ``most`` of them. ``placed`` is left as it is."""
    if most is not None and most < len(placed) // 8:
        return heapq.nsmallest(most, placed)
    placed = sorted(placed)
    return placed if most is None else placed[:most]


# A tree's best place and its root.
Bound = tuple[tuple[Any, ...], int]


class Ranked(NamedTuple):
    chosen: list[Assignment]
    ranks: list[Rank]
    last: tuple[Any, ...] | None  # the place of the last one, when the answer is full


def ranked(
    ranking: Ranking,
    found: Found,
    walk: Walk,
    roots: list[int],
    needed: int,
    rng: random.Random | None = None,
    unique: Callable[[Iterator[Assignment]], Iterator[Assignment]] | None = None,
    on_tree: Callable[[bool], None] | None = None,
) -> Ranked:
    """The candidates of the trees of ``roots`` (in anchor order: the
    answer's order without ranking), ranked; at most ``ranking.per_root``
    per root, and the first ``needed`` of them (0: all). ``unique`` keeps
    the stream's candidates of sharing providers alone once (merge.py);
    ``on_tree(gave_any)`` is told of each tree walked (the tally)."""
    ranker = _Ranker(ranking, found, walk.slots)
    if found.sharing or not needed:
        entries = _whole(ranker, walk, roots, rng, unique, on_tree)
    else:
        entries = _bounded(ranker, found, walk, roots, needed, ranking.per_root, rng, on_tree)
    entries.sort(key=_first)
    if ranking.per_root is not None:
        entries = _per_root(ranker, entries, ranking.per_root)
    if needed:
        entries = entries[:needed]
    last = entries[-1][0] if needed and len(entries) == needed else None
    return Ranked([entry[1] for entry in entries], [entry[2] for entry in entries], last)


# (place, tie break) of a candidate, the candidate, its Rank
_Entry = tuple[tuple[Any, ...], Assignment, Rank]


def _first(entry: _Entry) -> tuple[Any, ...]:
    return entry[0]


def _tie(rng: random.Random | None, tree: int, seq: int) -> tuple[float, ...]:
    return (rng.random(),) if rng is not None else (tree, seq)


def _whole(
    ranker: _Ranker,
    walk: Walk,
    roots: list[int],
    rng: random.Random | None,
    unique: Callable[[Iterator[Assignment]], Iterator[Assignment]] | None,
    on_tree: Callable[[bool], None] | None,
) -> list[_Entry]:
    """Every candidate, in the answer's order without ranking, with its place."""

    def stream() -> Iterator[Assignment]:
        for root in roots:
            gave = False
            for assigned in walk.tree(root):
                gave = True
                yield assigned
            if on_tree is not None:
                on_tree(gave)

    candidates = stream() if unique is None else unique(stream())
    entries = []
    for seq, assigned in enumerate(candidates):
        rank, place = ranker.rank(assigned)
        entries.append(((*place, _tie(rng, 0, seq)), assigned, rank))
    return entries


def _bounded(
    ranker: _Ranker,
    found: Found,
    walk: Walk,
    roots: list[int],
    needed: int,
    per_root: int | None,
    rng: random.Random | None,
    on_tree: Callable[[bool], None] | None,
) -> list[_Entry]:
    """The candidates that may be among the first ``needed`` (per_root
    applied per tree): trees best bound first, each walked until no later
    candidate of it could be kept. No sharing providers: every candidate of
    a tree has its root. A candidate's tie break is (its root, its place in
    its tree's walk): the answer's order, and the same whichever trees a
    search read (find.py widens a search of the best trees until the next
    tree's bound comes after the last candidate kept)."""
    members, traits = _members(found), found.traits
    held: dict[int, set[str]] = {}
    if ranker.ranking.prefer:
        for root in roots:
            held[root] = set()
            for pid in members(root):
                held[root].update(traits.get(pid, _NONE))
    bounds = Bounds(ranker.ranking, ranker.totals, held, found.aggregates, found.fills)
    kept: list[_Entry] = []
    worst: tuple[Any, ...] | None = None  # the needed-th place kept (or later)
    for bound, root in best_first(bounds.placed(roots)):
        if worst is not None and (*bound, _floor(rng, root, 0)) > worst:
            break  # no candidate of this tree or of any after it can be kept
        here: list[_Entry] = []
        here_worst: tuple[Any, ...] | None = None  # the per_root-th of this tree
        gave = False
        for seq, assigned in enumerate(walk.tree(root)):
            gave = True
            rank, place = ranker.rank(assigned)
            here.append(((*place, _tie(rng, root, seq)), assigned, rank))
            if per_root is not None and (
                len(here) >= 2 * per_root or (here_worst is None and len(here) == per_root)
            ):
                here.sort(key=_first)
                del here[per_root:]
                here_worst = here[-1][0]
            later = (*bound, _floor(rng, root, seq + 1))  # no later candidate comes before
            if (here_worst is not None and later > here_worst) or (
                worst is not None and later > worst
            ):
                break
        if on_tree is not None:
            on_tree(gave)
        if per_root is not None and len(here) > per_root:
            here.sort(key=_first)
            del here[per_root:]
        kept += here
        if len(kept) >= 2 * needed or (worst is None and len(kept) >= needed):
            kept.sort(key=_first)
            del kept[needed:]
            worst = kept[-1][0]
    return kept


def beyond(bound: Bound, last: tuple[Any, ...] | None, rng: random.Random | None) -> bool:
    """Whether no candidate of the tree of ``bound`` (or of any tree with a
    later bound) can come before ``last``, the place of an answer's last
    candidate (None: the answer is short, anything can)."""
    place, root = bound
    return last is not None and (*place, _floor(rng, root, 0)) > last


def _floor(rng: random.Random | None, tree: int, seq: int) -> tuple[float, ...]:
    """The smallest tie break a candidate of this tree at or after ``seq``
    can have: its place in the answer's order, or any random one."""
    return (-1.0,) if rng is not None else (tree, seq)


def _members(found: Found) -> Callable[[int], Iterable[int]]:
    """root -> the providers of its tree."""
    if found.members is not None:
        members = found.members
        return lambda root: members.get(root, ())
    by_root: dict[int, list[int]] = {}
    for pid, provider in found.providers.items():
        by_root.setdefault(provider.root_id, []).append(pid)
    return lambda root: by_root.get(root, ())


def _per_root(ranker: _Ranker, entries: list[_Entry], most: int) -> list[_Entry]:
    """The first ``most`` entries (in order) of each root."""
    counted: dict[int, int] = {}
    kept = []
    for entry in entries:
        root = ranker.root(entry[1])
        seen = counted.get(root, 0)
        if seen < most:
            counted[root] = seen + 1
            kept.append(entry)
    return kept
