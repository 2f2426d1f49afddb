"""Ranked allocation candidates (1.48: ``sort=``, ``prefer=``,
``prefer_member_of=``, ``per_root=``), brute force, on every backend of the
matrix.

Random clouds (seeded: 3-8 trees with children and grandchildren, some
trees copies of the one before so that ties are common, sharing providers
-- roots, now and then a child -- in an aggregate with some roots,
inventories of VCPU, MEMORY_MB and DISK_GB with reserved amounts,
allocation ratios that make capacities fractional, usage, traits and
aggregates) are written straight into the tables and asked random 1.48
queries with random ranking parameters and limits.

The expected answer is worked out here, from the numbers written and the
definition in candidates/rank.py, not from the engine's ranking: the same
query without its ranking parameters and its limit gives the unranked
answer (its set and order are checked elsewhere); each of its candidates
gets a score (the weights of the ``prefer`` traits some provider it
allocates from has, or for ``!TRAIT`` that none has, and of the
``prefer_member_of`` aggregates its root is in) and a key per ``sort``
class (the fraction of the capacity ``(total - reserved) * ratio`` of its
root's tree, summed in provider id order, left after the usage and what
the candidate allocates from that tree; None for a tree without capacity
of the class); the candidates are sorted by score (highest first), then
the keys (spread highest first, pack lowest first, None last), then the
unranked order; then ``per_root`` keeps the first N of each root, then
``limit`` (or a smaller max_allocation_candidates) the first N of the
rest. The ranked answer's allocation requests (allocations and mappings)
and each one's ``rank`` must be exactly those: the fractions are compared
as floats, computed with the same operations in the same order, so
exactly. Besides: with an ``rng`` (randomize_allocation_candidates) the
answer has the same ranks in the same order, each candidate one of the
unranked answer's with its own rank, once, at most ``per_root`` a root
(exact ties in any order); the body in pieces (render.chunks, what the API
sends) is the whole body; the provider summaries are the unranked
answer's for the providers named.

How many of the queries were not trivial (a non-empty answer, exact ties
that the unranked order broke or the rng shuffled, candidates ``per_root``
or the limit cut, the bounded walk of rank.py (a limit, no sharing
provider), sharing providers (a child of a tree too; candidates of sharing
providers alone), a resourceless group, negated prefer, fractional
capacities, None keys, an order ranking changed) is counted and each count
asserted to be above a floor, so the test cannot pass on nothing. A
disagreement names the seed, the query and the cloud.
"""

from __future__ import annotations

import json
import random
import time
from collections import Counter
from dataclasses import dataclass, field
from functools import partial
from typing import Any
from urllib.parse import urlencode

import sqlalchemy as sa
from microversion_parse import Version
from sqlalchemy.engine import Connection

from placement_svc import errors
from placement_svc.candidates import request, world
from placement_svc.candidates.find import Settings, find, find_noting_empty
from placement_svc.db import names, tables
from tests.support.cloud_rows import Cloud, uuid_of

VERSION = Version(1, 48)
CLASSES = ["VCPU", "MEMORY_MB", "DISK_GB"]
NO_INVENTORY = "VGPU"  # a class no provider has: a sort key of None everywhere
TRAITS = ["CUSTOM_RANK_A", "CUSTOM_RANK_B", "CUSTOM_RANK_C"]
SHARES = "MISC_SHARES_VIA_AGGREGATE"
AGGREGATES = [f"bbbbbbbb-0000-4000-8000-00000000000{n}" for n in range(3)]
SHARED = [f"cccccccc-0000-4000-8000-00000000000{n}" for n in range(2)]
# Exact in a single-precision FLOAT too (MySQL's allocation_ratio).
RATIOS = [1.0, 1.0, 1.0, 0.5, 1.5, 2.0, 1.25]
SEED = 1048
CLOUDS = 40
QUERIES_PER_CLOUD = 8

RP = tables.resource_providers
INV = tables.inventories


# -- random clouds -------------------------------------------------------------------


@dataclass
class Inventory:
    total: int
    reserved: int
    ratio: float
    used: int


@dataclass
class Node:
    name: str
    parent: str | None
    inventories: dict[str, Inventory] = field(default_factory=dict)
    traits: set[str] = field(default_factory=set)
    aggregates: set[str] = field(default_factory=set)


@dataclass
class World:
    """A cloud as written, and what is known of it once written (ids)."""

    nodes: list[Node]  # in the order written: parents first
    ids: dict[str, int] = field(default_factory=dict)  # name -> provider id, once written

    @classmethod
    def random(cls, rng: random.Random, index: int) -> World:
        nodes: list[Node] = []
        trees: list[list[Node]] = []  # each tree's nodes, root first

        def new(name: str, parent: str | None, classes: list[str]) -> Node:
            node = Node(f"c{index}-{name}", f"c{index}-{parent}" if parent else None)
            node.inventories = {rc: _random_inventory(rng) for rc in classes}
            node.traits = {t for t in TRAITS if rng.random() < 0.3}
            nodes.append(node)
            trees[-1].append(node)
            return node

        for r in range(rng.randint(3, 8)):
            if trees and rng.random() < 0.3:  # a copy of the tree before: ties
                before = trees[-1][0].name
                trees.append([])
                for node in list(trees[-2]):
                    copy = Node(
                        node.name.replace(before, f"c{index}-r{r}", 1),
                        node.parent.replace(before, f"c{index}-r{r}", 1) if node.parent else None,
                        {rc: Inventory(**vars(inv)) for rc, inv in node.inventories.items()},
                        set(node.traits),
                        set(node.aggregates),
                    )
                    nodes.append(copy)
                    trees[-1].append(copy)
                continue
            trees.append([])
            classes = [rc for rc, p in zip(CLASSES, (0.9, 0.8, 0.5)) if rng.random() < p]
            root = new(f"r{r}", None, classes)
            root.aggregates = {a for a in AGGREGATES if rng.random() < 0.35}
            for c in range(rng.choice([0, 1, 1, 2])):
                child = new(f"r{r}c{c}", f"r{r}", rng.sample(CLASSES, rng.choice([0, 1, 1, 2])))
                if rng.random() < 0.15:  # a child's aggregates count for nothing
                    child.aggregates = {rng.choice(AGGREGATES)}
                for g in range(rng.choice([0, 0, 1])):
                    new(f"r{r}c{c}g{g}", f"r{r}c{c}", rng.sample(CLASSES, rng.choice([1, 2])))
        roots = [tree[0] for tree in trees]
        if rng.random() < 0.65:
            for s, aggregate in enumerate(SHARED[: rng.choice([1, 1, 2])]):
                # a root of its own, or now and then a child of a tree's root
                parent = rng.choice(roots).name.partition("-")[2] if rng.random() < 0.2 else None
                trees.append([])
                share = new(
                    f"share{s}", parent, ["DISK_GB"] + (["MEMORY_MB"] if rng.random() < 0.4 else [])
                )
                share.traits.add(SHARES)
                share.aggregates.add(aggregate)
                for root in roots:
                    if rng.random() < 0.6:
                        root.aggregates.add(aggregate)
        return cls(nodes)

    def text(self) -> str:
        lines = []
        for node in self.nodes:
            lines.append(
                f"{node.name} id={self.ids.get(node.name)} parent={node.parent or '-'} "
                f"traits={sorted(node.traits)} aggregates={sorted(node.aggregates)}"
            )
            lines += [f"    {rc} {inv}" for rc, inv in node.inventories.items()]
        return "\n".join(lines)

    def write(self, conn: Connection) -> None:
        cloud = Cloud(conn, names.resource_class_ids(conn, CLASSES), create_classes=False)
        for node in self.nodes:
            pid = cloud.provider(
                node.name,
                parent=node.parent,
                inventory={rc: inv.total for rc, inv in node.inventories.items()},
                used={rc: inv.used for rc, inv in node.inventories.items() if inv.used},
                traits=sorted(node.traits),
                aggregates=sorted(node.aggregates),
            )
            for rc, inv in node.inventories.items():  # Cloud writes reserved 0, one ratio
                conn.execute(
                    sa.update(INV)
                    .where(INV.c.resource_provider_id == pid)
                    .where(INV.c.resource_class_id == cloud.classes[rc])
                    .values(reserved=inv.reserved, allocation_ratio=inv.ratio)
                )
        self.ids = dict(cloud.ids)


def _random_inventory(rng: random.Random) -> Inventory:
    total = rng.randint(1, 12)
    reserved = rng.randint(0, min(total, 3)) if rng.random() < 0.35 else 0
    ratio = rng.choice(RATIOS)
    capacity = int((total - reserved) * ratio)
    used = rng.randint(1, capacity) if capacity > 0 and rng.random() < 0.5 else 0
    return Inventory(total, reserved, ratio, used)


def _clear(conn: Connection) -> None:
    """Every row a cloud wrote (the standard names and our traits stay)."""
    conn.execute(sa.update(RP).values(parent_provider_id=None, root_provider_id=None))
    for table in (
        tables.allocations,
        tables.resource_provider_traits,
        tables.resource_provider_aggregates,
        tables.placement_aggregates,
        INV,
        RP,
    ):
        conn.execute(sa.delete(table))


def _add_traits(conn: Connection) -> None:
    """Every trait a query may prefer, held by some provider or not (an
    unknown trait is a 400)."""
    conn.execute(sa.insert(tables.traits), [{"name": t} for t in TRAITS])


# -- random queries ------------------------------------------------------------------


def _resources(rng: random.Random) -> str:
    classes = rng.sample(CLASSES, rng.choice([1, 1, 2]))
    return ",".join(f"{rc}:{rng.randint(1, 3)}" for rc in classes)


def random_query(rng: random.Random) -> dict[str, str]:
    """A 1.48 query with at least one ranking parameter. Its groups: the
    unsuffixed one, and now and then a granular one or a resourceless one
    in a same_subtree (whose provider is mapped but allocates nothing)."""
    params: dict[str, str] = {"resources": _resources(rng)}
    shape = rng.random()
    if shape < 0.2:
        params["resources_G"] = _resources(rng)
    elif shape < 0.3:
        params["resources_G"] = _resources(rng)
        params["required_T"] = rng.choice(TRAITS)
        params["same_subtree"] = "_G,_T"
    if rng.random() < 0.1:
        params["member_of"] = f"in:{','.join(rng.sample(AGGREGATES, 2))}"
    ranking: dict[str, str] = {}
    if rng.random() < 0.75:
        keys = []
        for _ in range(rng.choice([1, 1, 2])):
            rc = NO_INVENTORY if rng.random() < 0.08 else rng.choice(CLASSES)
            keys.append(f"{rng.choice(['spread', 'pack'])}:{rc}")
        ranking["sort"] = ",".join(keys)
    if rng.random() < 0.45:
        traits = rng.sample([*TRAITS, SHARES], rng.choice([1, 1, 2]))
        ranking["prefer"] = ",".join(
            f"{'!' if rng.random() < 0.3 else ''}{t}:{rng.randint(1, 3)}" for t in traits
        )
    if rng.random() < 0.35:
        aggregates = rng.sample(AGGREGATES + SHARED, rng.choice([1, 1, 2]))
        ranking["prefer_member_of"] = ",".join(f"{a}:{rng.randint(1, 3)}" for a in aggregates)
    if rng.random() < 0.4:
        ranking["per_root"] = str(rng.randint(1, 2))
    if not ranking:
        ranking["per_root"] = str(rng.randint(1, 3))
    params.update(ranking)
    if rng.random() < 0.55:
        params["limit"] = str(rng.randint(1, 6))
    return params


def parsed(params: dict[str, str]) -> request.Request:
    return request.parse({key: [value] for key, value in params.items()}, VERSION)


@dataclass
class Asked:
    """The ranking parameters of a query, read here (not by request.py)."""

    sort: list[tuple[str, str]]  # (spread or pack, class)
    prefer: list[tuple[str, bool, int]]  # (trait, negated, weight)
    members: list[tuple[str, int]]  # (aggregate, weight)
    per_root: int | None
    limit: int | None

    @classmethod
    def of(cls, params: dict[str, str]) -> Asked:
        def pairs(name: str) -> list[tuple[str, int]]:
            parts = [p.rpartition(":") for p in params[name].split(",")] if name in params else []
            return [(subject, int(weight)) for subject, _colon, weight in parts]

        keys = [key.partition(":") for key in params.get("sort", "").split(",") if key]
        sort = [(direction, rc) for direction, _colon, rc in keys]
        prefer = [(t.lstrip("!"), t.startswith("!"), w) for t, w in pairs("prefer")]
        per_root, limit = params.get("per_root"), params.get("limit")
        return cls(
            sort,
            prefer,
            pairs("prefer_member_of"),
            int(per_root) if per_root else None,
            int(limit) if limit else None,
        )


# -- the expected answer, from the definition ----------------------------------------


class Expected:
    """The ranked answer of a query, from the cloud as written and the
    unranked answer's candidates."""

    def __init__(self, cloud: World, by_uuid: dict[str, Node]):
        self.cloud, self.by_uuid = cloud, by_uuid
        self.root_of = {}
        for node in cloud.nodes:
            top = node
            while top.parent is not None:
                top = next(n for n in cloud.nodes if n.name == top.parent)
            self.root_of[node.name] = top.name
        self.fractional = 0  # fills of a fractional capacity used by a key

    def sharing(self, node: Node) -> bool:
        return SHARES in node.traits

    def root(self, candidate: dict[str, Any]) -> str:
        """The root of the first provider mapped that is not a sharing
        provider, or of the first provider (slot order: the mappings, in order)."""
        mapped = [self.by_uuid[u] for uuids in candidate["mappings"].values() for u in uuids]
        for node in mapped:
            if not self.sharing(node):
                return self.root_of[node.name]
        return self.root_of[mapped[0].name]

    def fill(self, root: str, rc: str) -> tuple[float, int] | None:
        """(capacity, used) of the tree of ``root``'s inventories of ``rc``,
        summed in provider id order; None without any."""
        tree = [n for n in self.cloud.nodes if self.root_of[n.name] == root]
        tree.sort(key=lambda n: self.cloud.ids[n.name])
        capacity, used, any_ = 0.0, 0, False
        for node in tree:
            inv = node.inventories.get(rc)
            if inv is not None:
                any_ = True
                capacity += (inv.total - inv.reserved) * inv.ratio
                used += inv.used
        return (capacity, used) if any_ else None

    def rank(self, asked: Asked, candidate: dict[str, Any]) -> tuple[int, list]:
        root = self.root(candidate)
        allocating = [self.by_uuid[u] for u in candidate["allocations"]]
        held = set().union(*(n.traits for n in allocating))
        score = sum(w for t, negated, w in asked.prefer if (t in held) != negated)
        root_aggregates = next(n for n in self.cloud.nodes if n.name == root).aggregates
        score += sum(w for a, w in asked.members if a in root_aggregates)
        keys: list[float | None] = []
        for _direction, rc in asked.sort:
            filled = self.fill(root, rc)
            if filled is None or filled[0] <= 0:
                keys.append(None)
                continue
            capacity, used = filled
            if capacity != int(capacity):
                self.fractional += 1
            taken = sum(
                r["resources"].get(rc, 0)
                for u, r in candidate["allocations"].items()
                if self.root_of[self.by_uuid[u].name] == root
            )
            keys.append((capacity - used - taken) / capacity)
        return score, keys

    def order(self, asked: Asked, score: int, keys: list) -> tuple:
        place: list[Any] = [-score]
        for (direction, _rc), key in zip(asked.sort, keys):
            place.append((1, 0.0) if key is None else (0, -key if direction == "spread" else key))
        return tuple(place)


# -- the run ---------------------------------------------------------------------------


def _without_rank(candidate: dict[str, Any]) -> dict[str, Any]:
    return {key: value for key, value in candidate.items() if key != "rank"}


def _key(candidate: dict[str, Any]) -> str:
    return json.dumps(candidate, sort_keys=True)


def _text(params: dict[str, str]) -> str:
    return urlencode(params, safe=":,!")


def check(
    conn: Connection, cloud: World, params: dict[str, str], seed: str, counts: Counter
) -> list[str]:
    """The ranked answer of ``params`` against the expected one; what differs."""
    try:
        wanted = parsed(params)
    except errors.BadRequest as exc:  # not expected: the queries are all valid
        return [f"{seed}: {_text(params)} refused: {exc}"]
    plain_params = {
        key: value
        for key, value in params.items()
        if key not in ("sort", "prefer", "prefer_member_of", "per_root", "limit")
    }
    settings = Settings()
    if counts["queries"] % 7 == 3:  # now and then the cap rather than (or as well as) limit
        settings = Settings(max_candidates=1 + counts["queries"] % 5)
    counts["queries"] += 1
    plain = find(conn, parsed(plain_params), VERSION)
    answer = find_noting_empty(conn, wanted, VERSION, settings).answer
    ranked = answer.body()
    where = f"{seed}: {_text(params)} (max_allocation_candidates {settings.max_candidates})"
    problems = []
    for candidate in plain["allocation_requests"]:
        if candidate["rank"] != {"score": 0, "keys": []}:
            problems.append(f"{where}: an unranked candidate has a rank: {candidate}")
    asked = Asked.of(params)
    by_uuid = {uuid_of(node.name): node for node in cloud.nodes}
    expected_of = Expected(cloud, by_uuid)
    entries = []
    for index, candidate in enumerate(plain["allocation_requests"]):
        score, keys = expected_of.rank(asked, candidate)
        place = expected_of.order(asked, score, keys)
        entry = (place, index, _without_rank(candidate), {"score": score, "keys": keys})
        entries.append(entry)
    entries.sort(key=lambda entry: entry[:2])
    every = list(entries)
    ordered = [entry[1] for entry in entries]
    if ordered != sorted(ordered):
        counts["reordered"] += 1
    places = [entry[0] for entry in entries]
    if any(a == b for a, b in zip(places, places[1:])):
        counts["ties"] += 1
    if asked.per_root is not None:
        kept, seen = [], Counter()
        for entry in entries:
            root = expected_of.root(entry[2])
            seen[root] += 1
            if seen[root] <= asked.per_root:
                kept.append(entry)
        if len(kept) < len(entries):
            counts["per_root cut"] += 1
        entries = kept
    bounds = [n for n in (asked.limit or 0, settings.max_candidates) if n > 0]
    if bounds and min(bounds) < len(entries):
        counts["limit cut"] += 1
        entries = entries[: min(bounds)]
    expected = [{**entry[2], "rank": entry[3]} for entry in entries]
    got = ranked["allocation_requests"]
    if got != expected:
        problems.append(
            f"{where}: ranked answer differs\n  got:      {got}\n  expected: {expected}\n"
            f"  unranked: {plain['allocation_requests']}\ncloud:\n{cloud.text()}"
        )
    # With a random order of exact ties (randomize_allocation_candidates):
    # the same ranks in the same order (an exact tie is a tie of rank), each
    # candidate one of the unranked answer's with its own rank, once, and
    # at most per_root of each root.
    rank_of = {_key(entry[2]): entry[3] for entry in every}
    shuffled = find(conn, wanted, VERSION, settings, rng=random.Random(seed))
    mixed = shuffled["allocation_requests"]
    per_root = Counter(expected_of.root(c) for c in mixed)
    if (
        [c["rank"] for c in mixed] != [c["rank"] for c in expected]
        or any(rank_of.get(_key(_without_rank(c))) != c["rank"] for c in mixed)
        or len({_key(_without_rank(c)) for c in mixed}) != len(mixed)
        or (asked.per_root is not None and max(per_root.values(), default=0) > asked.per_root)
    ):
        problems.append(
            f"{where}: with random ties\n  got:      {mixed}\n  expected: {expected}\n"
            f"  (ties in any order)\ncloud:\n{cloud.text()}"
        )
    if mixed != expected:
        counts["random ties"] += 1
    # The body as the API sends it: in pieces (render.chunks), the same.
    if json.loads(b"".join(answer.chunks())) != ranked:
        problems.append(f"{where}: the streamed body differs from the whole one")
    # The summaries: those of the unranked answer, for every provider the ranked one names.
    named = {u for c in got for u in c["allocations"]}
    summaries = ranked["provider_summaries"]
    if not named <= set(summaries) or any(
        plain["provider_summaries"].get(u) != s for u, s in summaries.items()
    ):
        problems.append(f"{where}: ranked summaries differ from the unranked ones")
    if expected:
        counts["non-empty"] += 1
    if any(by_uuid[u].traits & {SHARES} for c in expected for u in c["allocations"]):
        counts["sharing"] += 1
    mapped = [[by_uuid[u] for us in c["mappings"].values() for u in us] for c in expected]
    if any(all(SHARES in n.traits for n in nodes) for nodes in mapped):
        counts["sharing only"] += 1  # its root: its first provider's
    if any(SHARES in n.traits and n.parent for nodes in mapped for n in nodes):
        counts["sharing child"] += 1  # a sharing provider in another tree
    if any(r is None for c in expected for r in c["rank"]["keys"]):
        counts["None key"] += 1
    if any(c["rank"]["score"] for c in expected):
        counts["scored"] += 1
    if any(negated for _t, negated, _w in asked.prefer) and expected:
        counts["negated prefer"] += 1
    if expected_of.fractional:
        counts["fractional capacity"] += 1
    if bounds and expected and not any(by_uuid[u].traits & {SHARES} for u in by_uuid):
        counts["bounded walk"] += 1  # rank._bounded: a limit and no sharing provider
    if "required_T" in params and expected:
        counts["resourceless group"] += 1
    return problems


# The least each count must reach (about half what SEED gives: 265 non-empty of
# 320 queries, 127 reordered, 204 with ties, 44 per_root cuts, 79 limit cuts...).
FLOORS = {
    "non-empty": 150,
    "reordered": 60,
    "ties": 100,
    "per_root cut": 20,
    "limit cut": 40,
    "sharing": 30,
    "sharing only": 10,
    "sharing child": 5,
    "None key": 30,
    "scored": 60,
    "negated prefer": 20,
    "fractional capacity": 50,
    "bounded walk": 30,
    "resourceless group": 8,
    "random ties": 40,
}


def test_ranked_candidates_are_the_unranked_ones_in_the_defined_order(test_db, backend):
    started = time.monotonic()
    db = test_db.db
    db.write(_add_traits)
    rng = random.Random(SEED)
    counts: Counter = Counter()
    problems: list[str] = []
    try:
        for index in range(CLOUDS):
            cloud = World.random(rng, index)
            db.write(_clear)
            db.write(cloud.write)
            world.of(test_db.engine).forget()  # the shape just written, read fresh
            for q in range(QUERIES_PER_CLOUD):
                params = random_query(rng)
                seed = f"seed {SEED} cloud {index} query {q}"
                problems += db.read(
                    partial(check, cloud=cloud, params=params, seed=seed, counts=counts)
                )
    finally:
        db.write(_clear)
    assert not problems, f"{len(problems)} disagreement(s); the first:\n" + "\n\n".join(
        problems[:3]
    )
    low = {name: (counts[name], floor) for name, floor in FLOORS.items() if counts[name] < floor}
    assert not low, f"too few non-trivial cases (count, floor): {low}; all counts {dict(counts)}"
    print(f"{backend}: {dict(counts)} in {time.monotonic() - started:.1f}s")
