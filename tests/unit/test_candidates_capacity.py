"""candidates.explain.capacity on hand-built Founds, no database.

What is proven: a tree of one provider (no sharing provider in reach) holds
min(floor(free / amount)) copies over the classes, amounts of several
groups on it summed, and says so exactly; a tree of several providers is a
lower bound (exact False), on one where claiming the walk's first candidate
fits one copy though two fit; a sharing provider's room is spent once in
the total (below the sum over the trees, total_exact False), while each tree
is counted on the untouched room; trees where nothing fits are left out,
most copies first; the Found's room is as it was afterwards; MAX_ROUNDS
bounds the walks per tree. On random worlds: claiming the first candidate
as many times as it fits at once counts what claiming one copy at a time
counts, and on random one-provider clouds the count is the formula.
"""

from __future__ import annotations

import dataclasses
import math
import random

from placement_svc.candidates import merge
from placement_svc.candidates.explain import capacity
from placement_svc.candidates.model import Found
from placement_svc.candidates.request import Request
from tests.support.clouds import Cloud, ask, inventory
from tests.unit import test_candidates_merge as merge_tests


def counted(cloud: Cloud, qs: str) -> tuple[dict, Found]:
    req = ask(qs)
    found = cloud.found(req)
    return capacity.capacity(found, req), found


def per_tree(cloud: Cloud, body: dict) -> list[tuple[str, int, bool]]:
    return [(cloud.data.names[t["root"]], t["copies"], t["exact"]) for t in body["trees"]]


# Trees of one provider


def test_a_tree_of_one_provider_holds_the_least_of_free_over_amount():
    cloud = Cloud()
    cloud.provider("T1", stock={"VCPU": 10, "MEMORY_MB": 4096})
    cloud.provider("T2", stock={"VCPU": 3, "MEMORY_MB": 8192})
    cloud.provider("T3", stock={"VCPU": inventory(3, ratio=1.5, max_unit=8), "MEMORY_MB": 8192})
    cloud.provider("T4", stock={"VCPU": inventory(16, used=15), "MEMORY_MB": 8192})
    cloud.provider("T5", stock={"VCPU": 16})  # no memory
    body, _found = counted(cloud, "resources=VCPU:2,MEMORY_MB:1024")
    # T1: min(10 // 2, 4096 // 1024); T3: 4.5 VCPU free; T4 has 1 VCPU left
    assert per_tree(cloud, body) == [("T1", 4, True), ("T3", 2, True), ("T2", 1, True)]
    assert (body["total"], body["total_exact"]) == (7, True)


def test_the_amounts_of_several_groups_on_one_provider_add_up():
    cloud = Cloud()
    cloud.provider("CN", stock={"VCPU": 10})
    body, _found = counted(cloud, "resources=VCPU:1&resources_G=VCPU:2")
    assert per_tree(cloud, body) == [("CN", 3, True)]
    # max_unit bounds each copy, not the copies together
    cloud = Cloud()
    cloud.provider("CN", stock={"VCPU": inventory(10, max_unit=3)})
    body, _found = counted(cloud, "resources=VCPU:1&resources_G=VCPU:2")
    assert per_tree(cloud, body) == [("CN", 3, True)]
    body, _found = counted(cloud, "resources=VCPU:2&resources_G=VCPU:2")
    assert body == {"trees": [], "total": 0, "total_exact": True}


def test_one_provider_clouds_at_random_follow_the_formula():
    rng = random.Random(7)
    checked = fitting = 0
    for _ in range(300):
        cloud = Cloud()
        for t in range(rng.randint(1, 3)):
            cloud.provider(
                f"T{t}",
                stock={
                    rc: inventory(
                        rng.randint(1, 20),
                        reserved=rng.randint(0, 2),
                        ratio=rng.choice([1.0, 1.5, 0.7]),
                        max_unit=rng.choice([None, 4, 8]),
                        step=rng.choice([1, 2]),
                        used=rng.randint(0, 5),
                    )
                    for rc in ("VCPU", "DISK_GB")
                    if rng.random() < 0.8
                },
            )
        amounts = {"VCPU": rng.randint(1, 4), "DISK_GB": rng.randint(1, 4)}
        req = ask(f"resources=VCPU:{amounts['VCPU']}&resources_G=DISK_GB:{amounts['DISK_GB']}")
        body = capacity.capacity(cloud.found(req), req)
        expected = []
        for pid in cloud.data.roots():
            copies = []
            for rc, amount in amounts.items():
                stock = cloud.data.stock.get((pid, rc))
                if stock is None or stock.lacks(amount):
                    copies.append(0)
                else:
                    copies.append(math.floor(stock.free / amount))
            if min(copies):
                expected.append({"root": pid, "copies": min(copies), "exact": True})
        expected.sort(key=lambda tree: (-tree["copies"], tree["root"]))
        assert body["trees"] == expected
        assert body["total"] == sum(t["copies"] for t in expected) and body["total_exact"]
        checked += 1
        fitting += bool(expected)
    assert fitting > 60, fitting


# Nested trees: a lower bound


def test_a_nested_tree_is_a_lower_bound():
    # The walk's first candidate puts both groups on P1, so one copy fits;
    # the unsuffixed group on P2 and _G on P1 would fit twice.
    cloud = Cloud()
    cloud.provider("R")
    cloud.provider("P1", "R", stock={"VCPU": 2}, traits=("CUSTOM_X",))
    cloud.provider("P2", "R", stock={"VCPU": 2})
    body, _found = counted(cloud, "resources=VCPU:1&resources_G=VCPU:1&required_G=CUSTOM_X")
    assert per_tree(cloud, body) == [("R", 1, False)]
    assert (body["total"], body["total_exact"]) == (1, False)


def test_a_nested_tree_claims_until_no_candidate_is_left():
    cloud = Cloud()
    cloud.provider("CN")
    for n in range(3):
        cloud.provider(f"N{n}", "CN", stock={"VCPU": 5})
    body, _found = counted(cloud, "resources=VCPU:2")
    assert per_tree(cloud, body) == [("CN", 6, False)]  # two on each node, one VCPU left on each
    assert (body["total"], body["total_exact"]) == (6, False)


def test_max_rounds_bounds_the_walks_per_tree(monkeypatch):
    cloud = Cloud()
    cloud.provider("CN")
    for n in range(3):
        cloud.provider(f"N{n}", "CN", stock={"VCPU": 3})
    cloud.provider("CN2", stock={"VCPU": 30})
    for rounds, copies in ((1, 1), (2, 2), (3, 3), (4, 3)):
        monkeypatch.setattr(capacity, "MAX_ROUNDS", rounds)
        body, _found = counted(cloud, "resources=VCPU:2")
        # one round claims a node once; CN2's one round claims it whole
        assert per_tree(cloud, body) == [("CN2", 15, True), ("CN", copies, False)]
        assert body["total"] == 15 + copies


# Sharing providers


def shared_disk() -> Cloud:
    cloud = Cloud()
    cloud.provider("T1", stock={"VCPU": 4})
    cloud.provider("T2", stock={"VCPU": 4})
    cloud.provider("T3", stock={"VCPU": 4})
    cloud.sharing("S", {"DISK_GB": 10}, ["T1", "T2"])
    return cloud


def test_a_sharing_providers_room_is_spent_once_in_the_total():
    cloud = shared_disk()
    body, _found = counted(cloud, "resources=VCPU:1,DISK_GB:5")
    # each tree alone fits two (the disk's), the cloud two in all
    assert per_tree(cloud, body) == [("T1", 2, False), ("T2", 2, False)]
    assert (body["total"], body["total_exact"]) == (2, False)


def test_a_tree_a_sharing_provider_reaches_is_not_exact_nor_is_the_total():
    cloud = Cloud()
    cloud.provider("T1", stock={"VCPU": 4, "DISK_GB": 100})
    cloud.provider("T2", stock={"VCPU": 4, "DISK_GB": 100})
    cloud.sharing("S", {"DISK_GB": 10}, ["T1"])
    body, _found = counted(cloud, "resources=VCPU:3,DISK_GB:1")
    # T1 could take its disk from S: not exact, though it never does
    assert per_tree(cloud, body) == [("T1", 1, False), ("T2", 1, True)]
    assert (body["total"], body["total_exact"]) == (2, False)
    # a sharing provider without a requested class is not in reach
    body, _found = counted(cloud, "resources=VCPU:3")
    assert per_tree(cloud, body) == [("T1", 1, True), ("T2", 1, True)]
    assert (body["total"], body["total_exact"]) == (2, True)


def test_sharing_providers_alone_count_in_every_tree_and_once_in_the_total():
    cloud = shared_disk()
    body, _found = counted(cloud, "resources=DISK_GB:5")
    assert per_tree(cloud, body) == [("T1", 2, False), ("T2", 2, False), ("S", 2, False)]
    assert (body["total"], body["total_exact"]) == (2, False)


def test_the_room_is_as_it_was_afterwards():
    for cloud, qs in (
        (shared_disk(), "resources=VCPU:1,DISK_GB:5"),
        (shared_disk(), "resources=DISK_GB:1&resources_G=VCPU:1"),
    ):
        req = ask(qs)
        found = cloud.found(req)
        before = dict(found.room)
        body = capacity.capacity(found, req)
        assert body["total"] > 0
        assert found.room == before
        assert capacity.capacity(found, req) == body  # and so a second count is the same


# Against claiming one copy at a time, on random worlds


def one_at_a_time(req: Request, found: Found, roots: list[int]) -> int:
    """Claim the first candidate of each tree in turn, one copy per walk,
    on a copy of the room."""
    room = dict(found.room)
    first = merge.first_in_tree(req, dataclasses.replace(found, room=room))
    copies = 0
    for root in roots:
        while (candidate := first(root)) is not None:
            for pid, amounts in candidate.allocations.items():
                for rc, amount in amounts.items():
                    room[(pid, rc)] = room[(pid, rc)]._replace(free=room[(pid, rc)].free - amount)
            copies += 1
    return copies


def test_claiming_many_at_once_counts_what_claiming_one_at_a_time_counts():
    rng = random.Random(5)
    compared = nonempty = 0
    for _ in range(300):
        world = merge_tests.random_world(rng)
        qs, version = merge_tests.random_query(rng)
        try:
            req = merge_tests.ask(qs, version)
        except Exception:  # a combination parse refuses
            continue
        found = world.offer(req)
        found.room = {key: room._replace(free=room.free * 3) for key, room in found.room.items()}
        body = capacity.capacity(found, req)
        trees = {tree["root"]: tree["copies"] for tree in body["trees"]}
        for root in found.roots:
            assert trees.get(root, 0) == one_at_a_time(req, found, [root]), (qs, root)
        if found.sharing:
            assert body["total"] == one_at_a_time(req, found, found.roots)
        compared += 1
        nonempty += bool(trees)
    assert compared > 250 and nonempty > 100, (compared, nonempty)
