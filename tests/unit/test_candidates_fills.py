"""The trees' fills of the sort classes (1.48) as a ranked search reads them
for the whole cloud (rooms.kept_fills: capacities summed once per kept
shape, used amounts per request) are the fills rooms.fills sums anew, on
random shapes; a tree's traits are every trait of its providers; the
trees member_of allows are those with a provider eligibility allows; and
a class most providers hold is read by SQLite's covering index."""

from __future__ import annotations

import random

from sqlalchemy.dialects import mysql, postgresql, sqlite

from placement_svc.candidates import rooms, search, world
from placement_svc.candidates.model import Provider
from placement_svc.candidates.request import Request, RequestGroup
from placement_svc.queryparams import AggregateFilter


def random_shape(rng: random.Random) -> world.World:
    shape = world.World(generation=1)
    for pid in range(1, rng.randint(2, 40)):
        parent = rng.choice([None, None, *range(1, pid)]) if pid > 1 else None
        root = shape.providers[parent].root_id if parent else pid
        shape.providers[pid] = Provider(pid, f"u-{pid}", parent, root)
        shape.traits[pid] = frozenset(rng.sample(["A", "B", "C"], rng.randint(0, 2)))
        for rc_id in (1, 2):
            if rng.random() < 0.6:
                capacity = rng.randint(0, 16) * rng.choice([0.5, 1.0, 1.5, 16.0])
                shape.stock.setdefault(rc_id, []).append(world.stock(pid, capacity, 1, 16, 1))
                shape.stock_ids.setdefault(rc_id, []).append(pid)
    return shape


def random_used(rng: random.Random, shape: world.World) -> dict[int, dict[int, int]]:
    """Used amounts, some on providers without an inventory of the class
    (which a tree's fill leaves out, as rooms.fills does)."""
    return {
        rc_id: {pid: rng.randint(0, 20) for pid in shape.providers if rng.random() < 0.7}
        for rc_id in (1, 2)
    }


def test_kept_fills_are_the_fills_summed_anew():
    rng = random.Random(1048)
    held_elsewhere = at_roots = 0
    for _ in range(300):
        shape = random_shape(rng)
        classes = {"VCPU": 1, "DISK_GB": 2}
        at_roots += sum(  # only roots hold the class (a flat cloud's case, summed apart)
            bool(held) and all(shape.providers[pid].root_id == pid for pid in held)
            for held in (shape.stock_ids.get(rc_id, ()) for rc_id in classes.values())
        )
        for _request in range(3):  # the same shape, other usage: the kept sums serve again
            used = random_used(rng, shape)
            expected = rooms.fills(shape.providers, shape.stock, classes, used)
            kept = rooms.kept_fills(shape, classes, used)
            assert set(kept) == set(expected)
            for name, per_root in expected.items():
                assert set(kept[name].capacity) == set(per_root)
                for root in [*per_root, -1]:  # -1: a tree without the class
                    assert kept[name].get(root) == per_root.get(root)
            held_elsewhere += any(
                pid not in shape.stock_ids.get(rc_id, ()) for rc_id in used for pid in used[rc_id]
            )
    assert held_elsewhere > 100 and at_roots > 20


def test_a_trees_traits_are_every_trait_of_its_providers():
    rng = random.Random(48)
    for _ in range(100):
        shape = random_shape(rng)
        expected: dict[int, set[str]] = {}
        for pid, provider in shape.providers.items():
            expected.setdefault(provider.root_id, set()).update(shape.traits[pid])
        assert rooms.tree_traits(shape) == {root: frozenset(t) for root, t in expected.items()}


def test_the_trees_member_of_allows_have_a_provider_the_group_may_use():
    """A tree passes a group's member_of when one of its providers is in an
    aggregate of every in: list (by its own aggregates alone, or, for the
    unsuffixed group, by its root's alone) and neither it nor (unsuffixed)
    its root is in a forbidden one: what eligibility asks of a provider."""
    rng = random.Random(1481)
    aggregates = ["a1", "a2", "a3", "a4"]
    kept = cut = 0
    for _ in range(200):
        shape = random_shape(rng)
        for pid in shape.providers:
            shape.aggregates[pid] = frozenset(rng.sample(aggregates, rng.randint(0, 2)))
        any_of = [frozenset(rng.sample(aggregates, rng.randint(1, 2))) for _ in range(2)]
        any_of = any_of[: rng.randint(0, 2)]
        forbidden = set(rng.sample(aggregates, rng.randint(0, 1)))
        if not any_of and not forbidden:
            continue
        suffix = rng.choice(["", "_G"])
        request = Request(
            groups={
                suffix: RequestGroup(
                    suffix, {"VCPU": 1}, member_of=AggregateFilter(any_of, forbidden)
                )
            }
        )
        roots = sorted({p.root_id for p in shape.providers.values()})

        expected = [
            root
            for root in roots
            if any(
                usable(shape, pid, root, suffix, any_of, forbidden)
                for pid, p in shape.providers.items()
                if p.root_id == root
            )
        ]
        assert rooms.member_of_anchors(shape, request, roots) == expected
        kept += len(expected)
        cut += len(roots) - len(expected)
    assert kept > 200 and cut > 200


def usable(shape, pid: int, root: int, suffix: str, any_of, forbidden) -> bool:
    """Whether the group of ``suffix`` may use provider ``pid`` of the tree
    of ``root``, as far as its member_of goes."""
    own, top = shape.aggregates[pid], shape.aggregates[root]
    sets = [own] if suffix else [own, top]
    member = not any_of or any(all(held & one for one in any_of) for held in sets)
    return member and not any(held & forbidden for held in sets)


def test_a_class_most_providers_hold_is_read_by_a_scan_of_the_covering_index():
    """The sort classes' usage of every tree (a ranked search) is read
    without SQLite's class index when at least half the providers hold each
    class: SQLite then scans the covering index in the GROUP BY's order
    (its unary ``+``); other databases read the same statement as the plain
    one. A class few providers hold is read by the plain statement."""
    shape = world.World(generation=1)
    for pid in range(1, 11):
        shape.providers[pid] = Provider(pid, f"u-{pid}", None, pid)
    shape.stock_ids = {1: list(range(1, 11)), 2: [1, 2, 3, 4, 5], 3: [7]}
    assert rooms.dense(shape, [1]) and rooms.dense(shape, [2]) and rooms.dense(shape, [1, 2])
    assert not rooms.dense(shape, [3]) and not rooms.dense(shape, [1, 3])
    sqlite_dense = str(search._USED_DENSE.compile(dialect=sqlite.dialect()))
    assert "WHERE +allocations.resource_class_id IN" in sqlite_dense
    for dialect in (postgresql.dialect(), mysql.dialect()):
        assert str(search._USED_DENSE.compile(dialect=dialect)) == str(
            search._USED.compile(dialect=dialect)
        )
