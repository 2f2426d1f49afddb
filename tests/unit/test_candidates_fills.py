"""The trees' fills of the sort classes (1.48) as a ranked search reads them
for the whole cloud (rooms.kept_fills: capacities summed once per kept
shape, used amounts per request) are the fills rooms.fills sums anew, on
random shapes; and a tree's traits are every trait of its providers."""

from __future__ import annotations

import random

from placement_svc.candidates import rooms, world
from placement_svc.candidates.model import Provider


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
    held_elsewhere = 0
    for _ in range(300):
        shape = random_shape(rng)
        classes = {"VCPU": 1, "DISK_GB": 2}
        for _request in range(3):  # the same shape, other usage: the kept sums serve again
            used = random_used(rng, shape)
            expected = rooms.fills(shape.providers, shape.stock, classes, used)
            assert rooms.kept_fills(shape, classes, used) == expected
            held_elsewhere += any(
                pid not in shape.stock_ids.get(rc_id, ()) for rc_id in used for pid in used[rc_id]
            )
    assert held_elsewhere > 100


def test_a_trees_traits_are_every_trait_of_its_providers():
    rng = random.Random(48)
    for _ in range(100):
        shape = random_shape(rng)
        expected: dict[int, set[str]] = {}
        for pid, provider in shape.providers.items():
            expected.setdefault(provider.root_id, set()).update(shape.traits[pid])
        assert rooms.tree_traits(shape) == {root: frozenset(t) for root, t in expected.items()}
