"""Ranked candidates (1.48: sort=, prefer=, prefer_member_of=, per_root=),
candidates/rank.py through merge.ranked, on hand-built clouds, no database.

What is proven:

- **The definition, by brute force.** On 1500 random clouds (one to five
  trees, some three and four providers deep, sharing providers in about
  half of them; inventories with reserved amounts, fractional allocation
  ratios, used amounts, some overcommitted; aggregates on every provider,
  roots included) and a random query (test_candidates_merge.random_query)
  with random ranking parameters, ``merge.ranked`` answers exactly what the
  module docstring of rank.py defines, computed here from the definition
  alone: each candidate of the unranked stream (checked against
  test_candidates_merge.brute_force on the same clouds) gets its root,
  score and sort keys from this file's own reading of the inventories
  (never rank.py's helpers nor rooms.fills: the test computes
  ``found.fills`` itself), is sorted stably by (score, keys), and per_root
  then limit cut the list. The chosen assignments and their ranks are
  equal, in order; the run counts the cases that were non-empty, had exact
  ties, were cut by per_root, by limit, and that took the bounded path, so
  it cannot pass vacuously.
- **The bounded path** (no sharing providers, a limit) answers the first N
  of the whole ranking, on random clouds; and it walks less: 200 flat hosts
  under ``sort=spread:VCPU&limit=5`` walk 5 trees, not 200, and a wide tree
  (8 children, 6 isolated groups: 20160 candidates per host) under
  ``per_root=1`` walks a handful of candidates per tree, with ``sort`` and
  with ``prefer`` (where the walk goes on to the first candidate that
  reaches the tree's best score).
- **An rng only shuffles exact ties**: the ranks are the same sequence as
  without it, every candidate's rank is its own, candidates of a rank before
  the last one shown are the same set, and over several seeds different tie
  orders appear (on the whole and on the bounded path).
- **Readable examples**: spread takes the emptiest tree first and pack the
  fullest; a tree without the class comes last for both; a preferred trait
  counts on providers the candidate allocates from, not on a provider a
  resourceless group maps; !TRAIT scores when none of them has it;
  prefer_member_of reads the root's aggregates, not the allocating
  provider's; sort keys break ties in order; the Rank body.
- **Parsing** at 1.48 (every form, and the exact 400 messages of
  request._ranking and request._weighted) and at 1.47 (ignored). One case
  is marked xfail: a weight of digits str.isdigit() accepts and int()
  refuses ("CUSTOM_A:²") raises ValueError, a 500, instead of the 400.
"""

from __future__ import annotations

import random
from collections import Counter
from typing import NamedTuple

import pytest
from microversion_parse import Version

from placement_svc import errors
from placement_svc.candidates import merge, rank, request, walk
from placement_svc.candidates.model import Budget, Found, Room
from tests.unit.test_candidates_merge import (
    World,
    ask,
    brute_force,
    normalised,
    random_query,
)

RANKED = Version(1, 48)
CLASSES = ("VCPU", "DISK_GB")
ABSENT = "MEMORY_MB"  # a class no provider of the random clouds has
TRAITS = ("CUSTOM_A", "CUSTOM_B", "CUSTOM_C")  # random_query asks for A and B only
PREFERRED = (*TRAITS, "CUSTOM_NONE")  # CUSTOM_NONE: a trait no provider has
AGGREGATES = [f"bbbbbbbb-0000-4000-8000-00000000000{n}" for n in range(1, 4)]
RATIOS = (0.5, 1.0, 1.5, 2.0)  # exact in binary: sums are the same in any order


class Stocked(World):
    """A World whose providers have inventories: (capacity, used) per class,
    capacity being (total - reserved) * allocation_ratio. The walk's room is
    what is free of them; ``fill`` computes ``found.fills`` from them."""

    def __init__(self) -> None:
        super().__init__()
        self.stock: dict[int, dict[str, tuple[float, int]]] = {}

    def host(self, name, parent=None, stock=None, traits=(), aggregates=(), max_unit=None):
        pid = self.provider(name, parent, traits=traits)
        self.stock[pid] = dict(stock or {})
        for rc, (capacity, used) in self.stock[pid].items():
            most = max_unit or max(int(capacity), 1)
            self.found.room[(pid, rc)] = Room(capacity - used, 1, most, 1, int(capacity), used)
        self.found.aggregates[pid] = frozenset(aggregates)
        return pid

    def share(self, name, stock, shares_with, traits=(), aggregates=()):
        traits = ("MISC_SHARES_VIA_AGGREGATE", *traits)
        pid = self.host(name, stock=stock, traits=traits, aggregates=aggregates)
        self.found.sharing.add(pid)
        self.found.shares_with[pid] = {pid} | {self.ids[r] for r in shares_with}
        return pid

    def tree_stock(self, root: int, rc: str) -> tuple[float, int] | None:
        """(capacity, used) of the inventories of ``rc`` in the tree of
        ``root``, summed in provider id order; None when it has none."""
        held = [
            self.stock[pid][rc]
            for pid in sorted(self.stock)
            if self.found.providers[pid].root_id == root and rc in self.stock[pid]
        ]
        if not held:
            return None
        capacity, used = 0.0, 0
        for each_capacity, each_used in held:
            capacity += each_capacity
            used += each_used
        return capacity, used

    def fill(self, classes) -> None:
        """found.fills as the search would give it (sort classes -> root ->
        (capacity, used)), computed here from the inventories."""
        self.found.fills = {}
        for rc in classes:
            per_root = {}
            for root in {p.root_id for p in self.found.providers.values()}:
                stocked = self.tree_stock(root, rc)
                if stocked is not None:
                    per_root[root] = stocked
            self.found.fills[rc] = per_root

    def offer_ranked(self, qs: str) -> tuple[request.Request, Found]:
        req = ask(qs, RANKED)
        found = self.offer(req)
        if req.ranking is not None:
            self.fill(req.ranking.classes())
        return req, found


# The definition, read from rank.py's docstring, apart from rank.py.


class Spec(NamedTuple):
    """Ranking parameters as the test means them (not as parsed)."""

    sort: list[tuple[str, str]]
    prefer: list[tuple[str, bool, int]]
    members: list[tuple[str, int]]
    per_root: int | None
    limit: int | None


def root_of(found: Found, assigned) -> int:
    """The root of the first provider mapped that is not a sharing one; of
    the first provider when all are."""
    for pid in assigned:
        if pid not in found.sharing:
            return found.providers[pid].root_id
    return found.providers[assigned[0]].root_id


def rank_of(spec: Spec, world: Stocked, slots, assigned) -> tuple[int, tuple]:
    """(score, keys) of a candidate, from the definition."""
    found = world.found
    candidate = merge.candidate(slots, assigned)
    root = root_of(found, assigned)
    held: set[str] = set()
    for pid in candidate.allocations:  # the providers it allocates from
        held |= found.traits[pid]
    score = 0
    for trait, negated, weight in spec.prefer:
        if negated and trait not in held:
            score += weight
        if not negated and trait in held:
            score += weight
    for aggregate, weight in spec.members:
        if aggregate in found.aggregates.get(root, frozenset()):
            score += weight
    keys = []
    for _direction, rc in spec.sort:
        stocked = world.tree_stock(root, rc)
        if stocked is None or stocked[0] == 0:
            keys.append(None)
            continue
        capacity, used = stocked
        taken = sum(
            amounts.get(rc, 0)
            for pid, amounts in candidate.allocations.items()
            if found.providers[pid].root_id == root
        )
        keys.append((capacity - used - taken) / capacity)
    return score, tuple(keys)


def order_of(spec: Spec, ranked: tuple[int, tuple]) -> tuple:
    """Sorts first for the best: score high first, spread high first, pack
    low first, no capacity last either way."""
    score, keys = ranked
    place: list = [-score]
    for (direction, _rc), key in zip(spec.sort, keys):
        if key is None:
            place.append((1,))
        else:
            place.append((0, -key if direction == "spread" else key))
    return tuple(place)


class Expected(NamedTuple):
    chosen: list
    ranks: list
    every: int  # candidates before per_root and limit
    ties: bool  # two candidates of exactly the same rank
    per_root_cut: bool
    limit_cut: bool


def expected(spec: Spec, world: Stocked, req: request.Request) -> Expected:
    """The answer by the definition: the unranked stream (trees in anchor
    order, walk order inside, shared-alone candidates once), sorted stably
    by rank, then per_root, then limit."""
    walked = merge.assignments(req, world.found)
    every = [(assigned, rank_of(spec, world, walked.slots, assigned)) for assigned in walked.stream]
    places = [order_of(spec, ranked) for _assigned, ranked in every]
    ties = len(set(places)) < len(places)
    order = sorted(range(len(every)), key=lambda i: places[i])  # stable
    kept = [every[i] for i in order]
    if spec.per_root is not None:
        seen: Counter = Counter()
        cut = []
        for assigned, ranked in kept:
            root = root_of(world.found, assigned)
            if seen[root] < spec.per_root:
                seen[root] += 1
                cut.append((assigned, ranked))
        kept = cut
    per_root_cut = len(kept) < len(every)
    limit_cut = spec.limit is not None and len(kept) > spec.limit
    if spec.limit is not None:
        kept = kept[: spec.limit]
    return Expected(
        [a for a, _r in kept], [r for _a, r in kept], len(every), ties, per_root_cut, limit_cut
    )


# Random clouds and rankings


def random_stock(rng: random.Random, classes=CLASSES) -> dict[str, tuple[float, int]]:
    stock = {}
    for rc in classes:
        if rng.random() < 0.6:
            total = rng.randint(0, 8)
            reserved = rng.randint(0, min(1, total))
            capacity = (total - reserved) * rng.choice(RATIOS)
            used = rng.randint(0, int(capacity)) if rng.random() < 0.3 else rng.randint(0, 2)
            if rng.random() < 0.05:
                used += 1  # overcommitted: a negative free fraction
            stock[rc] = (capacity, used)
    return stock


def random_ranked_world(rng: random.Random, sharing: bool = True) -> Stocked:
    """Like test_candidates_merge.random_world, with more trees, deeper ones
    (a child goes under the last provider half the time: chains), real
    inventories, and aggregates on every provider, roots included."""
    world = Stocked()

    def aggregates():
        return rng.sample(AGGREGATES, rng.randint(0, 2))

    for t in range(rng.randint(1, 5)):
        names = [f"T{t}"]
        world.host(
            names[0],
            stock=random_stock(rng),
            traits=rng.sample(TRAITS, rng.randint(0, 1)),
            aggregates=aggregates(),
        )
        for c in range(rng.randint(0, 4)):
            name = f"T{t}C{c}"
            world.host(
                name,
                names[-1] if rng.random() < 0.5 else rng.choice(names),
                stock=random_stock(rng),
                traits=rng.sample(TRAITS, rng.randint(0, 2)),
                aggregates=aggregates(),
                max_unit=rng.choice([None, 2]),
            )
            names.append(name)
    roots = [world.names[r] for r in world.found.roots]
    if sharing:
        for s in range(rng.randint(0, 2)):
            world.share(
                f"S{s}",
                random_stock(rng, ("DISK_GB",)) or {"DISK_GB": (4.0, 0)},
                rng.sample(roots, rng.randint(0, len(roots))),
                traits=rng.sample(TRAITS, rng.randint(0, 1)),
                aggregates=aggregates(),
            )
    return world


def weight(rng: random.Random) -> int:
    return rng.choice([1, 1, 2, 3, 1000, rng.randint(1, 1000)])


def random_spec(rng: random.Random) -> Spec:
    classes = ("VCPU", "VCPU", "DISK_GB", "DISK_GB", ABSENT)
    sort = [(rng.choice(("spread", "pack")), rng.choice(classes)) for _ in range(rng.randint(1, 2))]
    prefer = [
        (trait, rng.random() < 0.3, weight(rng))
        for trait in rng.sample(PREFERRED, rng.randint(0, 3))
    ]
    members = [(aggregate, weight(rng)) for aggregate in rng.sample(AGGREGATES, rng.randint(0, 2))]
    per_root = rng.choice([None, None, 1, 2, 3])
    limit = rng.choice([None, None, 1, 2, 3, 4, 5, 6])
    return Spec(sort, prefer, members, per_root, limit)


def spec_query(spec: Spec, rng: random.Random) -> str:
    """The query string of a Spec, comma-separated or repeated at random."""

    def written(name, parts):
        if not parts:
            return []
        if rng.random() < 0.5:
            return [f"{name}=" + ",".join(parts)]
        return [f"{name}={part}" for part in parts]

    query = written("sort", [f"{d}:{rc}" for d, rc in spec.sort])
    query += written("prefer", [f"{'!' * n}{t}:{w}" for t, n, w in spec.prefer])
    query += written("prefer_member_of", [f"{a}:{w}" for a, w in spec.members])
    if spec.per_root is not None:
        query.append(f"per_root={spec.per_root}")
    if spec.limit is not None:
        query.append(f"limit={spec.limit}")
    return "&".join(query)


def random_cases(seed: int, count: int, sharing: bool = True):
    """(world, spec, req) of random clouds, queries and rankings; the
    combinations parse refuses are left out."""
    rng = random.Random(seed)
    for _ in range(count):
        world = random_ranked_world(rng, sharing=sharing and rng.random() < 0.6)
        qs, _version = random_query(rng)
        spec = random_spec(rng)
        try:
            req, _found = world.offer_ranked(qs + "&" + spec_query(spec, rng))
        except errors.BadRequest:  # e.g. a lone resourceless group
            continue
        yield world, spec, req


def ranks(answer: rank.Ranked) -> list[tuple[int, tuple]]:
    return [(r.score, r.keys) for r in answer.ranks]


# 1. The definition, by brute force


def test_ranked_answers_are_the_definition_on_random_clouds():
    counts: Counter = Counter()
    for world, spec, req in random_cases(1048, 1500):
        found = world.found
        want = expected(spec, world, req)
        _slots, got = merge.ranked(req, found, needed=req.limit or 0)
        where = (spec, req.groups, world.names, world.stock, found.aggregates, found.sharing)
        assert got.chosen == want.chosen, where
        assert ranks(got) == want.ranks, where
        assert all(isinstance(r, rank.Rank) for r in got.ranks)
        counts["compared"] += 1
        counts["nonempty"] += bool(want.chosen)
        counts["ties"] += want.ties
        counts["per_root cut"] += want.per_root_cut
        counts["limit cut"] += want.limit_cut
        counts["sharing"] += bool(found.sharing) and bool(want.chosen)
        counts["bounded"] += not found.sharing and bool(req.limit) and want.every > 1
        counts["no capacity"] += any(k is None for _s, keys in want.ranks for k in keys)
        counts["scored"] += len({s for s, _k in want.ranks}) > 1
    assert counts["compared"] > 1200, counts
    assert counts["nonempty"] > 600, counts
    assert counts["ties"] > 150, counts
    assert counts["per_root cut"] > 150, counts
    assert counts["limit cut"] > 150, counts
    assert counts["sharing"] > 100, counts
    assert counts["bounded"] > 150, counts
    assert counts["no capacity"] > 100, counts
    assert counts["scored"] > 100, counts


def test_the_unranked_stream_of_the_deeper_clouds_is_the_brute_force():
    """The order the ranking falls back on is the stream's: on these deeper
    clouds too, that stream holds exactly the candidates the rules allow,
    each once."""
    compared = nonempty = 0
    for world, _spec, req in random_cases(1048, 300):
        found = world.found
        walked = merge.assignments(req, found)
        stream = Counter(normalised(merge.candidate(walked.slots, a)) for a in walked.stream)
        wanted = brute_force(req, found)
        assert stream == Counter(wanted), (req.groups, world.names)
        compared += 1
        nonempty += bool(wanted)
    assert compared > 250 and nonempty > 120, (compared, nonempty)


# 2. The bounded path


def test_the_bounded_path_is_the_first_n_of_the_whole_ranking():
    compared = fewer = cut = 0
    for world, spec, req in random_cases(2048, 600, sharing=False):
        found = world.found
        assert not found.sharing
        whole_tally, bounded_tally = merge.Tally(), merge.Tally()
        _slots, whole = merge.ranked(req, found, needed=0, tally=whole_tally)
        for needed in sorted({spec.limit or 3, 1}):
            tally = merge.Tally()
            _slots, bounded = merge.ranked(req, found, needed=needed, tally=tally)
            assert bounded.chosen == whole.chosen[:needed], (spec, req.groups, world.names)
            assert ranks(bounded) == ranks(whole)[:needed]
            assert tally.entered <= whole_tally.entered
            fewer += tally.entered < whole_tally.entered
            cut += len(whole.chosen) > needed
            bounded_tally = tally
        assert bounded_tally.kept <= whole_tally.kept
        compared += 1
    assert compared > 500 and fewer > 100 and cut > 150, (compared, fewer, cut)


class Counted:
    """Walk.tree wrapped: the trees walked and the candidates each yielded."""

    def __init__(self, monkeypatch) -> None:
        self.trees: list[int] = []
        self.yielded: Counter = Counter()
        original = walk.Walk.tree
        counted = self

        def tree(self, root):
            counted.trees.append(root)
            for assigned in original(self, root):
                counted.yielded[root] += 1
                yield assigned

        monkeypatch.setattr(walk.Walk, "tree", tree)


def flat_cloud(hosts: int = 200) -> Stocked:
    """Flat hosts of 16 * hosts VCPU each, each with a different amount used."""
    world = Stocked()
    rng = random.Random(200)
    used = rng.sample(range(16 * hosts), hosts)
    for n in range(hosts):
        world.host(f"H{n}", stock={"VCPU": (16.0 * hosts, used[n])})
    return world


def test_a_limit_under_a_sort_walks_a_few_trees_of_a_flat_cloud(monkeypatch):
    world = flat_cloud()
    req, found = world.offer_ranked("resources=VCPU:1&sort=spread:VCPU&limit=5")
    _slots, whole = merge.ranked(req, found, needed=0)
    assert len(whole.chosen) == 200
    counted = Counted(monkeypatch)
    found.budget = Budget()
    _slots, bounded = merge.ranked(req, found, needed=5)
    emptiest = sorted(found.roots, key=lambda pid: world.stock[pid]["VCPU"][1])[:5]
    assert [assigned[0] for assigned in bounded.chosen] == emptiest
    assert bounded.chosen == whole.chosen[:5]
    assert len(counted.trees) == 5  # the five best bounds; the sixth is after the fifth kept
    assert found.budget.steps - found.budget.left == 10  # a step per tree, one per candidate
    # pack: the fullest five, as few trees
    req, found = world.offer_ranked("resources=VCPU:1&sort=pack:VCPU&limit=5")
    counted.trees.clear()
    _slots, packed = merge.ranked(req, found, needed=5)
    fullest = sorted(found.roots, key=lambda pid: -world.stock[pid]["VCPU"][1])[:5]
    assert [assigned[0] for assigned in packed.chosen] == fullest
    assert len(counted.trees) == 5


def wide_hosts(used=(0, 0, 0), hosts=3, children=8, traits=None) -> Stocked:
    """Hosts of ``children`` children of 8 VCPU each, host n using used[n] of
    each child's."""
    world = Stocked()
    for h in range(hosts):
        world.host(f"H{h}")
        for c in range(children):
            world.host(
                f"H{h}C{c}",
                f"H{h}",
                stock={"VCPU": (8.0, used[h])},
                traits=(traits or {}).get(c, ()),
            )
    return world


def test_per_root_walks_a_handful_of_a_wide_trees_candidates(monkeypatch):
    world = wide_hosts(used=(4, 1, 2))  # 8!/2! = 20160 candidates per host
    base = "&".join(f"resources{i}=VCPU:1" for i in range(1, 7)) + "&group_policy=isolate"
    counted = Counted(monkeypatch)
    req, found = world.offer_ranked(base + "&per_root=1&limit=10")
    _slots, answer = merge.ranked(req, found, needed=10)
    assert [root_of(found, a) for a in answer.chosen] == found.roots  # one per host, in order
    assert counted.yielded == {root: 1 for root in found.roots}
    # sorted: the emptiest host first, each tree still one candidate
    counted.trees.clear()
    counted.yielded.clear()
    req, found = world.offer_ranked(base + "&per_root=1&limit=10&sort=spread:VCPU")
    _slots, answer = merge.ranked(req, found, needed=10)
    h0, h1, h2 = found.roots
    assert [root_of(found, a) for a in answer.chosen] == [h1, h2, h0]
    assert ranks(answer) == [(0, ((64 - 8 - 6) / 64,)), (0, ((64 - 16 - 6) / 64,)), (0, (26 / 64,))]
    assert counted.yielded == {root: 1 for root in found.roots}
    # limit=2: the third host's bound comes after the second kept: not walked
    counted.trees.clear()
    req, found = world.offer_ranked(base + "&per_root=1&limit=2&sort=spread:VCPU")
    _slots, answer = merge.ranked(req, found, needed=2)
    assert [root_of(found, a) for a in answer.chosen] == [h1, h2]
    assert counted.trees == [h1, h2]


def test_per_root_walks_on_to_the_first_candidate_with_the_trees_best_score(monkeypatch):
    # The last child of each host is preferred: the walk's first two
    # candidates leave it out, the third takes it, and no later one can do
    # better.
    world = wide_hosts(traits={7: ("CUSTOM_FAST",)})
    base = "&".join(f"resources{i}=VCPU:1" for i in range(1, 7)) + "&group_policy=isolate"
    counted = Counted(monkeypatch)
    req, found = world.offer_ranked(base + "&per_root=1&limit=10&prefer=CUSTOM_FAST:5")
    _slots, answer = merge.ranked(req, found, needed=10)
    assert ranks(answer) == [(5, ())] * 3
    fast = {world.ids[f"H{h}C7"] for h in range(3)}
    assert all(set(a) & fast for a in answer.chosen)
    assert counted.yielded == {root: 3 for root in found.roots}


# 3. An rng shuffles exact ties only


def test_an_rng_shuffles_exact_ties_only_on_random_clouds():
    compared = shuffled = 0
    for world, spec, req in random_cases(3048, 400):
        found = world.found
        needed = req.limit or 0
        _slots, plain = merge.ranked(req, found, needed=needed)
        walked = merge.assignments(req, found)
        own = {a: rank_of(spec, world, walked.slots, a) for a in walked.stream}
        for seed in range(3):
            _slots, mixed = merge.ranked(req, found, needed=needed, rng=random.Random(seed))
            assert ranks(mixed) == ranks(plain), (spec, req.groups)
            assert [own[a] for a in mixed.chosen] == ranks(mixed)  # each rank is its own
            assert len(set(mixed.chosen)) == len(mixed.chosen)
            if spec.per_root is not None:
                per_root = Counter(root_of(found, a) for a in mixed.chosen)
                assert max(per_root.values(), default=0) <= spec.per_root
            else:
                # every candidate of a rank before the last one shown is shown
                last = ranks(plain)[-1] if plain.chosen else None
                for chosen in (plain.chosen, mixed.chosen):
                    assert {a for a in chosen if own[a] != last} == {
                        a for a in plain.chosen if own[a] != last
                    }
                if not needed:
                    assert Counter(mixed.chosen) == Counter(plain.chosen)
            shuffled += mixed.chosen != plain.chosen
        compared += 1
    assert compared > 300 and shuffled > 200, (compared, shuffled)


def tied_hosts() -> Stocked:
    """Three alike hosts of two NUMA children (2 of 8 VCPU used on each), a
    fourth one fuller (6 used), a fifth with one child, nearly full: 9
    candidates of resources=VCPU:1, in three places (6, 2 and 1)."""
    world = Stocked()
    for h, used in enumerate((2, 2, 2, 6)):
        world.host(f"H{h}")
        for n in range(2):
            world.host(f"H{h}N{n}", f"H{h}", stock={"VCPU": (8.0, used)})
    world.host("H4")
    world.host("H4N0", "H4", stock={"VCPU": (8.0, 7)})
    return world


def test_an_rng_orders_the_ties_differently_and_nothing_else():
    world = tied_hosts()
    req, found = world.offer_ranked("resources=VCPU:1&sort=spread:VCPU")
    _slots, whole = merge.ranked(req, found, needed=0)
    best, worse, worst = (0, (11 / 16,)), (0, (3 / 16,)), (0, (0.0,))
    assert ranks(whole) == [best] * 6 + [worse] * 2 + [worst]
    assert [world.names[a[0]] for a in whole.chosen] == [
        *("H0N0", "H0N1", "H1N0", "H1N1", "H2N0", "H2N1"),
        *("H3N0", "H3N1", "H4N0"),
    ]
    places: dict = {}
    for assigned, ranked in zip(whole.chosen, ranks(whole)):
        places.setdefault(ranked, set()).add(assigned)
    for needed in (0, 6, 5, 7):  # the whole path; the bounded one, cutting a tie (5, 7) or not
        _slots, plain = merge.ranked(req, found, needed=needed)
        assert plain.chosen == whole.chosen[: needed or 9]
        orders = set()
        for seed in range(8):
            _slots, mixed = merge.ranked(req, found, needed=needed, rng=random.Random(seed))
            assert ranks(mixed) == ranks(plain)
            assert all(a in places[r] for a, r in zip(mixed.chosen, ranks(mixed)))
            if needed in (0, 6):  # no tie cut: the same candidates, each block whole
                assert Counter(mixed.chosen) == Counter(plain.chosen)
            if not needed:
                assert mixed.chosen[-1] == plain.chosen[-1]  # a place of its own: kept
            orders.add(tuple(mixed.chosen))
        assert len(orders) >= 2, needed


# 5. Readable examples


def three_hosts() -> Stocked:
    """Flat hosts: A 8 VCPU, 6 used; B 8, none used; C 16, 4 used; F 64,
    none used, and no DISK_GB (A, B, C: 100, with 10, 90, 50 used)."""
    world = Stocked()
    world.host("A", stock={"VCPU": (8.0, 6), "DISK_GB": (100.0, 10)})
    world.host("B", stock={"VCPU": (8.0, 0), "DISK_GB": (100.0, 90)})
    world.host("C", stock={"VCPU": (16.0, 4), "DISK_GB": (100.0, 50)})
    world.host("F", stock={"VCPU": (64.0, 0)})
    return world


def hosts(world: Stocked, answer: rank.Ranked) -> list[str]:
    return [world.names[root_of(world.found, a)] for a in answer.chosen]


def answer_of(world: Stocked, qs: str, needed: int = 0) -> rank.Ranked:
    req, found = world.offer_ranked(qs)
    return merge.ranked(req, found, needed=needed or req.limit or 0)[1]


def test_spread_takes_the_emptiest_tree_first_and_pack_the_fullest():
    world = three_hosts()
    spread = answer_of(world, "resources=VCPU:1&sort=spread:VCPU")
    assert hosts(world, spread) == ["F", "B", "C", "A"]
    assert ranks(spread) == [(0, (63 / 64,)), (0, (7 / 8,)), (0, (11 / 16,)), (0, (1 / 8,))]
    pack = answer_of(world, "resources=VCPU:1&sort=pack:VCPU")
    assert hosts(world, pack) == ["A", "C", "B", "F"]
    # under a limit (the bounded path), the same first two
    assert hosts(world, answer_of(world, "resources=VCPU:1&sort=pack:VCPU&limit=2")) == ["A", "C"]


def test_a_tree_without_the_class_comes_last_for_both_directions():
    world = three_hosts()
    for direction, first in (("spread", ["A", "C", "B"]), ("pack", ["B", "C", "A"])):
        answer = answer_of(world, f"resources=VCPU:1&sort={direction}:DISK_GB")
        assert hosts(world, answer) == [*first, "F"]
        assert ranks(answer)[-1] == (0, (None,))
        limited = answer_of(world, f"resources=VCPU:1&sort={direction}:DISK_GB&limit=4")
        assert hosts(world, limited) == [*first, "F"]
    # a class no provider has: every key None, the unranked order
    answer = answer_of(world, "resources=VCPU:1&sort=spread:MEMORY_MB")
    assert hosts(world, answer) == ["A", "B", "C", "F"]
    assert ranks(answer) == [(0, (None,))] * 4


def test_a_tree_with_the_class_in_a_child_sums_the_tree():
    world = Stocked()
    world.host("ROOT", stock={"DISK_GB": (10.0, 0)})
    world.host("N0", "ROOT", stock={"VCPU": (4.0, 1)})
    world.host("N1", "ROOT", stock={"VCPU": (12.0, 3)})
    answer = answer_of(world, "resources=VCPU:2&sort=spread:VCPU")
    # each candidate takes 2 of the tree's 16 - 4 free, wherever it lands
    assert ranks(answer) == [(0, (10 / 16,)), (0, (10 / 16,))]


def test_a_preferred_trait_counts_on_providers_the_candidate_allocates_from():
    world = Stocked()
    world.host("HOST", traits={"CUSTOM_X"})
    world.host("N0", "HOST", stock={"VCPU": (4.0, 0)})
    world.host("N1", "HOST", stock={"VCPU": (4.0, 0)}, traits={"CUSTOM_X"})
    qs = "resources_A=VCPU:1&required_B=CUSTOM_X&same_subtree=_A,_B&prefer=CUSTOM_X:10"
    req, found = world.offer_ranked(qs)
    slots, answer = merge.ranked(req, found, needed=0)

    def readable(assigned):
        return {s.suffix: world.names[p] for s, p in zip(slots, assigned)}

    # _B (resourceless) on HOST, which has CUSTOM_X, gives _A on N0 nothing
    assert [readable(a) for a in answer.chosen] == [
        {"_A": "N1", "_B": "HOST"},
        {"_A": "N1", "_B": "N1"},
        {"_A": "N0", "_B": "HOST"},
    ]
    assert [r.score for r in answer.ranks] == [10, 10, 0]


def test_a_negated_trait_scores_when_no_allocating_provider_has_it():
    world = Stocked()
    world.host("SLOW", stock={"VCPU": (4.0, 0)}, traits={"CUSTOM_SLOW"})
    world.host("HOST", traits={"CUSTOM_SLOW"})  # maps, allocates nothing
    world.host("NUMA", "HOST", stock={"VCPU": (4.0, 0)})
    world.host("FAST", stock={"VCPU": (4.0, 0)})
    qs = "resources=VCPU:1&prefer=!CUSTOM_SLOW:7,CUSTOM_NONE:3"
    answer = answer_of(world, qs)
    assert hosts(world, answer) == ["HOST", "FAST", "SLOW"]
    assert [r.score for r in answer.ranks] == [7, 7, 0]
    # a granular group and the unsuffixed one: one allocating provider with
    # the trait is enough to lose the score
    world.host("MIXED", stock={"DISK_GB": (10.0, 0)}, traits={"CUSTOM_SLOW"})
    world.host("MIXED_N", "MIXED", stock={"VCPU": (4.0, 0)})
    answer = answer_of(world, "resources=VCPU:1&resources_D=DISK_GB:1&prefer=!CUSTOM_SLOW:7")
    assert hosts(world, answer) == ["MIXED"] and answer.ranks[0].score == 0


def test_prefer_member_of_reads_the_roots_aggregates():
    agg1, agg2 = AGGREGATES[:2]
    world = Stocked()
    world.host("A", aggregates=[agg2])
    world.host("A0", "A", stock={"VCPU": (4.0, 0)}, aggregates=[agg1])  # not its root's
    world.host("B", aggregates=[agg1])
    world.host("B0", "B", stock={"VCPU": (4.0, 0)})
    world.host("C", aggregates=[agg1, agg2])
    world.host("C0", "C", stock={"VCPU": (4.0, 0)})
    answer = answer_of(world, f"resources=VCPU:1&prefer_member_of={agg1}:5,{agg2}:2")
    assert hosts(world, answer) == ["C", "B", "A"]
    assert [r.score for r in answer.ranks] == [7, 5, 2]
    limited = answer_of(world, f"resources=VCPU:1&prefer_member_of={agg1}:5&limit=1")
    assert hosts(world, limited) == ["B"]


def test_a_sharing_providers_candidate_has_the_root_of_the_tree_it_serves():
    agg = AGGREGATES[0]
    world = Stocked()
    world.host("CN", stock={"VCPU": (4.0, 0)})
    world.host("CN2", stock={"VCPU": (4.0, 0)}, aggregates=[agg])
    world.share("SS", {"DISK_GB": (100.0, 0)}, ["CN", "CN2"], aggregates=[agg])
    answer = answer_of(world, f"resources=VCPU:1,DISK_GB:10&prefer_member_of={agg}:4")
    assert hosts(world, answer) == ["CN2", "CN"]
    assert [r.score for r in answer.ranks] == [4, 0]
    # alone, the sharing provider is its own root: once, with its aggregates
    answer = answer_of(world, f"resources=DISK_GB:10&prefer_member_of={agg}:4&sort=pack:DISK_GB")
    assert hosts(world, answer) == ["SS"]
    assert ranks(answer) == [(4, (0.9,))]


def test_sort_keys_break_ties_in_order():
    world = Stocked()
    world.host("A", stock={"VCPU": (8.0, 4), "DISK_GB": (10.0, 1)})
    world.host("B", stock={"VCPU": (8.0, 4), "DISK_GB": (10.0, 5)})
    world.host("C", stock={"VCPU": (8.0, 0), "DISK_GB": (10.0, 9)})
    qs = "resources=VCPU:1&sort="

    def order(sort):
        return hosts(world, answer_of(world, qs + sort))

    assert order("spread:VCPU,pack:DISK_GB") == ["C", "B", "A"]
    assert order("spread:VCPU&sort=spread:DISK_GB") == ["C", "A", "B"]
    assert order("spread:DISK_GB,spread:VCPU") == ["A", "B", "C"]
    # the score comes before every key
    world.found.traits[world.ids["A"]] = frozenset({"CUSTOM_Y"})
    answer = answer_of(world, qs + "spread:VCPU&prefer=CUSTOM_Y:1")
    assert hosts(world, answer) == ["A", "C", "B"]
    assert ranks(answer) == [(1, (3 / 8,)), (0, (7 / 8,)), (0, (3 / 8,))]


def test_the_rank_body():
    assert rank.Rank(3, (0.5, None)).body() == {"score": 3, "keys": [0.5, None]}
    world = three_hosts()
    answer = answer_of(world, "resources=VCPU:1&sort=pack:DISK_GB,spread:VCPU&limit=1")
    assert [r.body() for r in answer.ranks] == [{"score": 0, "keys": [0.1, 7 / 8]}]
    answer = answer_of(world, "resources=VCPU:1&sort=pack:DISK_GB&per_root=1")
    assert answer.ranks[-1].body() == {"score": 0, "keys": [None]}


def test_per_root_keeps_the_first_of_each_root_in_rank_order():
    world = tied_hosts()
    answer = answer_of(world, "resources=VCPU:1&sort=pack:VCPU&per_root=1")
    assert hosts(world, answer) == ["H4", "H3", "H0", "H1", "H2"]
    answer = answer_of(world, "resources=VCPU:1&sort=pack:VCPU&per_root=2&limit=4")
    assert hosts(world, answer) == ["H4", "H3", "H3", "H0"]


# 6. Parsing


def params(qs: str) -> dict[str, list[str]]:
    parsed: dict[str, list[str]] = {}
    for part in qs.split("&"):
        key, _eq, value = part.partition("=")
        parsed.setdefault(key, []).append(value)
    return parsed


def ranking(qs: str, version=RANKED) -> request.Ranking | None:
    return request.parse(params("resources=VCPU:1&" + qs), version).ranking


def test_before_1_48_the_ranking_parameters_are_ignored():
    qs = f"sort=spread:VCPU&prefer=CUSTOM_A:1&prefer_member_of={AGGREGATES[0]}:1&per_root=2"
    assert ranking(qs, Version(1, 47)) is None
    assert ranking("sort=sideways", Version(1, 47)) is None
    assert ranking("limit=3") is None  # 1.48 without any of them: no ranking


def test_each_form_parses_at_1_48():
    assert ranking("sort=spread:VCPU, pack:DISK_GB&sort=pack:VCPU") == request.Ranking(
        sort=(("spread", "VCPU"), ("pack", "DISK_GB"), ("pack", "VCPU"))
    )
    assert ranking("prefer=CUSTOM_A:5,!CUSTOM_B:1000&prefer=HW_X:1") == request.Ranking(
        prefer=(("CUSTOM_A", False, 5), ("CUSTOM_B", True, 1000), ("HW_X", False, 1))
    )
    a, b = AGGREGATES[:2]
    assert ranking(f"prefer_member_of={a}:3,{b}:1000") == request.Ranking(
        prefer_member_of=((a, 3), (b, 1000))
    )
    assert ranking("per_root=1&per_root=3") == request.Ranking(per_root=3)  # the last counts
    parsed = ranking(f"sort=pack:VCPU&prefer=!CUSTOM_A:2&prefer_member_of={a}:4&per_root=2")
    assert parsed == request.Ranking((("pack", "VCPU"),), (("CUSTOM_A", True, 2),), ((a, 4),), 2)
    assert parsed.classes() == ["VCPU"] and parsed.trait_names() == {"CUSTOM_A"}
    assert ranking("sort=spread:VCPU,pack:VCPU").classes() == ["VCPU"]
    req = request.parse(params("resources=VCPU:1&prefer=CUSTOM_Q:1&required=CUSTOM_R"), RANKED)
    assert req.trait_names() == {"CUSTOM_Q", "CUSTOM_R"}  # the search looks them up


def refused(qs: str) -> errors.BadRequest:
    with pytest.raises(errors.BadRequest) as caught:
        ranking(qs)
    assert caught.value.code == errors.QUERYPARAM_BAD_VALUE
    return caught.value


SORT = (
    "Invalid query string parameters: Expected 'sort' parameter value of the form "
    "spread:CLASS or pack:CLASS. Got: "
)


@pytest.mark.parametrize(
    "value, part",
    [
        ("up:VCPU", "up:VCPU"),
        ("spread", "spread"),
        ("spread:", "spread:"),
        ("VCPU", "VCPU"),
        ("pack:VCPU,", ""),
        ("Spread:VCPU", "Spread:VCPU"),
    ],
)
def test_a_bad_sort_is_refused(value, part):
    assert refused(f"sort={value}").message == SORT + part


def weighted(name: str, what: str, part: str) -> str:
    return (
        f"Invalid query string parameters: Expected '{name}' parameter value of the form "
        f"{what}:WEIGHT with WEIGHT an integer from 1 to 1000. Got: {part}"
    )


@pytest.mark.parametrize(
    "part",
    ["CUSTOM_A:0", "CUSTOM_A:1001", "CUSTOM_A:x", "CUSTOM_A:-1", "CUSTOM_A", "CUSTOM_A:", ":5"],
)
def test_a_bad_prefer_weight_is_refused(part):
    assert refused(f"prefer={part}").message == weighted("prefer", "TRAIT", part)
    assert refused(f"prefer=CUSTOM_Z:1,{part}").message == weighted("prefer", "TRAIT", part)


def test_an_empty_preferred_trait_is_refused():
    assert refused("prefer=!:5").message == (
        "Invalid query string parameters: Expected 'prefer' parameter value of the form "
        "TRAIT:WEIGHT or !TRAIT:WEIGHT. Got an empty trait."
    )


def test_a_trait_preferred_twice_is_refused():
    message = "Traits named more than once in 'prefer': CUSTOM_A, CUSTOM_B."
    assert refused("prefer=CUSTOM_B:1,CUSTOM_A:1&prefer=!CUSTOM_A:2,CUSTOM_B:3").message == message


def test_the_ranking_parameters_name_a_bounded_number_of_values():
    """Each sort key and preference is worked out for every candidate: a
    request names at most MAX_SORT_KEYS of the one and MAX_PREFERENCES of
    each of the others, repeated parameters counted together."""
    most = request.MAX_SORT_KEYS
    assert len(ranking("sort=" + ",".join(["spread:VCPU"] * most)).sort) == most
    assert refused("sort=" + ",".join(["spread:VCPU"] * most) + "&sort=pack:VCPU").message == (
        f"Invalid query string parameters: at most {most} values of 'sort' may be given; "
        f"got {most + 1}."
    )
    many = request.MAX_PREFERENCES
    traits = ",".join(f"CUSTOM_T{n}:1" for n in range(many + 1))
    assert refused(f"prefer={traits}").message == (
        f"Invalid query string parameters: at most {many} values of 'prefer' may be given; "
        f"got {many + 1}."
    )
    aggregates = ",".join(f"{AGGREGATES[0]}:1" for _ in range(many + 1))
    assert "'prefer_member_of'" in refused(f"prefer_member_of={aggregates}").message
    assert len(ranking(f"prefer={','.join(f'CUSTOM_T{n}:1' for n in range(many))}").prefer) == many


def test_a_bad_prefer_member_of_is_refused():
    assert refused("prefer_member_of=not-a-uuid:3").message == (
        "Invalid query string parameters: Expected 'prefer_member_of' parameter to contain "
        "valid UUID(s). Got: not-a-uuid"
    )
    for part in (f"{AGGREGATES[0]}:0", f"{AGGREGATES[0]}", f"{AGGREGATES[0]}:1001"):
        assert refused(f"prefer_member_of={part}").message == weighted(
            "prefer_member_of", "AGGREGATE_UUID", part
        )


def test_a_weight_of_digits_int_cannot_read_is_refused():
    """str.isdigit takes "²" and "١", which are no ASCII weight: a 400, not a 500 or a 1."""
    assert refused("prefer=CUSTOM_A:²").message == weighted("prefer", "TRAIT", "CUSTOM_A:²")
    assert refused("prefer=CUSTOM_A:١").message == weighted("prefer", "TRAIT", "CUSTOM_A:١")
