"""candidates.prune through merge.generate: the walk gives up early on wide
hosts, and gives up nothing it should keep.

What is proven: a host asked for more than its room (per class, or more
isolated groups than it has providers) yields nothing after a handful of
room look-ups instead of a walk over every ordering of its devices; a dead
end among alike devices (mirrors) is walked once, not once per ordering;
devices that differ in room, traits, reach or children are not mirrors; and
on a few hundred random worlds full of alike devices the pruned walk finds
exactly what brute force finds, with random isolated subsets and negated
same_subtree groups too.
"""

from __future__ import annotations

import random
from collections import Counter

import pytest
from microversion_parse import Version

from placement_svc.candidates import merge, model, prune, subtree
from placement_svc.candidates import walk as walks
from tests.unit.test_candidates_merge import (
    CountingRoom,
    World,
    ask,
    brute_force,
    constrain,
    normalised,
)


def host_with_devices(devices: int, units: int = 1, **device_kwargs) -> World:
    world = World()
    world.provider("HOST", room={"VCPU": 64})
    for d in range(devices):
        world.provider(f"D{d}", "HOST", room={"CUSTOM_DEV": units}, **device_kwargs)
    return world


def groups(count: int, amount: int = 1, policy: str = "isolate", extra: str = "") -> str:
    names = [f"_G{g:02d}" for g in range(count)]
    qs = "&".join(f"resources{name}=CUSTOM_DEV:{amount}" for name in names)
    return f"{qs}&group_policy={policy}{extra}"


def walk(world: World, qs: str, limit=None):
    """The candidates taken, and how many room look-ups the walk made."""
    req = ask(qs)
    found = world.offer(req)
    found.room = CountingRoom(found.room)
    CountingRoom.lookups = 0
    chosen = merge.take(merge.generate(req, found), limit, None)
    return chosen, CountingRoom.lookups


def test_a_host_asked_for_more_devices_than_it_has_yields_nothing_at_once():
    # Unpruned, the walk tries every ordering of 12 devices over 12 groups
    # (12! = 479 million) before it finds the 13th group has nowhere to go.
    chosen, lookups = walk(host_with_devices(12), groups(13))
    assert chosen == []
    assert lookups < 50


def test_room_adds_up_across_alike_devices_for_the_bound():
    # 4 devices of 2 units hold 8 groups of 1 (under group_policy=none), not 9.
    world = host_with_devices(4, units=2)
    chosen, _lookups = walk(world, groups(8, policy="none"))
    assert len(chosen) == 8 * 7 * 6 * 5 * 4 * 3 * 2 * 1 // 2**4 * 1  # 2520 ways
    chosen, lookups = walk(world, groups(9, policy="none"))
    assert chosen == [] and lookups < 50


def test_the_bound_counts_a_device_up_to_its_max_unit():
    # 3 units free on each device but at most 1 per allocation: 3 devices hold
    # three groups of 1, not four, even under group_policy=none.
    world = host_with_devices(3, units=3, max_unit=1)
    assert len(walk(world, groups(3, policy="none"))[0]) == 6
    chosen, lookups = walk(world, groups(4, policy="none"))
    assert chosen == [] and lookups < 50


def test_isolated_groups_need_as_many_devices_as_groups():
    world = host_with_devices(4, units=8)
    assert len(walk(world, groups(5, policy="none"))[0]) == 4**5
    chosen, lookups = walk(world, groups(5, policy="isolate"))
    assert chosen == [] and lookups < 50


def test_a_dead_end_among_alike_devices_is_walked_once():
    # Two siblings are never one's ancestor: same_subtree of the first and the
    # last group can never hold once the groups are isolated. Unpruned, the
    # walk would only learn that at the last group of each of 10! orderings.
    chosen, lookups = walk(host_with_devices(10), groups(10, extra="&same_subtree=_G00,_G09"))
    assert chosen == []
    assert lookups < 1000


@pytest.mark.slow
def test_mirrors_skip_only_dead_ends_candidates_keep_coming():
    # Alike devices whose branches do give candidates are all walked: 8!.
    chosen, _lookups = walk(host_with_devices(8), groups(8))
    assert len(chosen) == 40320
    assert len({normalised(c) for c in chosen}) == 40320


def test_a_device_with_a_child_is_no_mirror_of_a_leaf():
    # D0's branch is a dead end (it is nobody's ancestor); D1 looks the same
    # but holds the VCPU child that same_subtree needs.
    world = World()
    world.provider("HOST")
    world.provider("D0", "HOST", room={"CUSTOM_DEV": 2})
    world.provider("D1", "HOST", room={"CUSTOM_DEV": 2})
    world.provider("D1.K", "D1", room={"VCPU": 1})
    qs = "resources_A=CUSTOM_DEV:2&resources_B=VCPU:1&same_subtree=_A,_B&group_policy=none"
    assert world.candidates(qs) == [
        (
            frozenset({("D1", "CUSTOM_DEV", 2), ("D1.K", "VCPU", 1)}),
            frozenset({("_A", frozenset({"D1"})), ("_B", frozenset({"D1.K"}))}),
        )
    ]


def test_a_device_with_other_traits_is_no_mirror():
    # The unsuffixed group's required trait is met by its providers together:
    # D0 gives no CUSTOM_X (a dead end), D1 does.
    world = World()
    world.provider("HOST", room={"VCPU": 4})
    world.provider("D0", "HOST", room={"CUSTOM_DEV": 1})
    world.provider("D1", "HOST", room={"CUSTOM_DEV": 1}, traits=["CUSTOM_X"])
    qs = "resources=VCPU:1,CUSTOM_DEV:1&required=CUSTOM_X"
    assert world.allocations(qs) == Counter(
        {alloc_of(("HOST", "VCPU", 1), ("D1", "CUSTOM_DEV", 1)): 1}
    )


def test_a_device_with_other_room_is_no_mirror():
    # Two groups of 1 in one subtree of siblings: both on one device, which
    # needs 2 units free within its max_unit. D0 and D1 are dead ends.
    world = World()
    world.provider("HOST")
    world.provider("D0", "HOST", room={"CUSTOM_DEV": 1})
    world.provider("D1", "HOST", room={"CUSTOM_DEV": 2}, max_unit=1)
    world.provider("D2", "HOST", room={"CUSTOM_DEV": 2})
    qs = "resources_A=CUSTOM_DEV:1&resources_B=CUSTOM_DEV:1&same_subtree=_A,_B&group_policy=none"
    assert world.allocations(qs) == Counter({alloc_of(("D2", "CUSTOM_DEV", 2)): 1})


def alloc_of(*parts):
    return frozenset(parts)


def test_demand_after_sums_what_each_index_still_needs():
    qs = "resources=VCPU:2&resources_A=CUSTOM_DEV:1&resources_B=CUSTOM_DEV:2,VCPU:1"
    slots = walks.slots(ask(qs + "&group_policy=isolate"))
    assert [(dict(amounts), isolated) for amounts, isolated in prune.demand_after(slots)] == [
        ({"VCPU": 3, "CUSTOM_DEV": 3}, 2),
        ({"VCPU": 1, "CUSTOM_DEV": 3}, 2),
        ({"VCPU": 1, "CUSTOM_DEV": 2}, 1),
        ({}, 0),
    ]
    # only isolated groups need a provider of their own
    slots = walks.slots(ask(qs + "&group_policy=none"))
    assert [isolated for _amounts, isolated in prune.demand_after(slots)] == [0, 0, 0, 0]


# Brute force on worlds full of alike devices.


def alike_world(rng: random.Random) -> World:
    world = World()
    for h in range(rng.randint(1, 2)):
        host = f"H{h}"
        world.provider(host, room={"VCPU": rng.randint(0, 4)})
        for kind in range(rng.randint(1, 2)):
            room = {"CUSTOM_DEV": rng.randint(1, 3)}
            traits = rng.sample(["CUSTOM_A", "CUSTOM_B"], rng.randint(0, 1))
            max_unit = rng.choice([None, 1])
            for d in range(rng.randint(1, 4)):
                name = f"{host}K{kind}D{d}"
                world.provider(name, host, room=room, traits=traits, max_unit=max_unit)
                if rng.random() < 0.15:
                    world.provider(f"{name}.C", name, room={"VCPU": 1})
    return world


def alike_query(rng: random.Random) -> str:
    parts = []
    if rng.random() < 0.4:
        parts.append(f"resources=VCPU:{rng.randint(1, 2)}")
    names = [f"_G{g}" for g in range(rng.randint(1, 5))]
    for name in names:
        parts.append(f"resources{name}=CUSTOM_DEV:{rng.choice([1, 1, 2])}")
        if rng.random() < 0.2:
            parts.append(f"required{name}=" + rng.choice(["CUSTOM_A", "!CUSTOM_A"]))
    if rng.random() < 0.2:
        parts.append("resources_V=VCPU:1")
        names.append("_V")
    if len(names) > 1 and rng.random() < 0.4:
        parts.append("same_subtree=" + ",".join(rng.sample(names, 2)))
    parts.append("group_policy=" + rng.choice(["none", "isolate"]))
    return "&".join(parts)


@pytest.mark.slow
def test_the_pruned_walk_finds_exactly_what_brute_force_finds_among_alike_devices():
    rng = random.Random(4242)
    nonempty = 0
    for _ in range(300):
        world = alike_world(rng)
        qs = alike_query(rng)
        req = ask(qs)
        found = world.offer(req)
        for strategy in ("depth-first", "breadth-first"):
            walked = Counter(normalised(c) for c in merge.generate(req, found, strategy))
            expected = brute_force(req, found)
            assert walked == Counter(expected), (qs, world.found)
        nonempty += bool(expected)
    assert nonempty > 100


@pytest.mark.slow
def test_alike_devices_are_still_skipped_soundly_with_isolate_and_apart():
    rng = random.Random(5151)
    nonempty = constrained = 0
    for _ in range(300):
        world = alike_world(rng)
        req = constrain(rng, ask(alike_query(rng)))
        found = world.offer(req)
        expected = brute_force(req, found)
        for strategy in ("depth-first", "breadth-first"):
            walked = Counter(normalised(c) for c in merge.generate(req, found, strategy))
            assert walked == Counter(expected), (req, world.found)
        nonempty += bool(expected)
        constrained += bool(expected) and bool(req.apart or (req.isolated and not req.isolate))
    assert nonempty > 50 and constrained > 25, (nonempty, constrained)


def test_alike_devices_are_skipped_when_only_some_groups_are_isolated():
    # Ten alike devices, _G00 isolated, _G00 and _G09 in one subtree: a dead
    # end (an isolated group has its device to itself, and siblings hold no
    # one) found once, not once per ordering of the devices.
    req = ask(groups(10, policy="none", extra="&same_subtree=_G00,_G09"))
    req.isolated = frozenset({"_G00"})
    world = host_with_devices(10)
    found = world.offer(req)
    found.room = CountingRoom(found.room)
    CountingRoom.lookups = 0
    assert list(merge.generate(req, found)) == []
    assert CountingRoom.lookups < 1000  # 110; 62 million without the mirrors


def test_trees_without_the_unsuffixed_groups_traits_are_not_entered():
    world = World()
    gold = world.provider("gold", room={"VCPU": 4}, traits=["CUSTOM_A"])
    plain = world.provider("plain", room={"VCPU": 4})
    helped = world.provider("helped", room={"VCPU": 4})
    nested = world.provider("nested", room={"VCPU": 4})
    world.provider("nested-child", "nested", room={"VCPU": 4}, traits=["CUSTOM_B"])
    world.sharing("disk", {"DISK_GB": 9}, ["helped"], traits=["CUSTOM_B"])
    any_of = (frozenset({"CUSTOM_A", "CUSTOM_B"}),)
    found = world.found
    able = prune.able_roots(found, any_of, found.roots)
    # By its own trait, a child's, or a sharing provider's (itself a tree).
    assert {pid for pid in found.roots if pid in able} == {gold, helped, nested, world.ids["disk"]}
    assert plain not in able
    # Two sets: every one needs a trait somewhere in the tree or its helpers.
    both = (frozenset({"CUSTOM_A"}), frozenset({"CUSTOM_B"}))
    assert not any(pid in prune.able_roots(found, both, found.roots) for pid in found.roots)
    req = ask("resources=VCPU:1&required=in:CUSTOM_A,CUSTOM_B")
    tally = merge.Tally()
    hosts = {
        world.names[assigned[0]]
        for assigned in merge.assignments(req, world.offer(req), tally=tally).stream
    }
    assert hosts == {"gold", "nested-child"}  # on "helped" and "nested" the VCPU lacks them
    assert tally.entered == len(found.roots)  # the trees left out count as entered, pruned


def test_trees_out_of_a_slots_reach_are_not_entered(monkeypatch):
    world = World()
    world.provider("both", room={"VCPU": 4, "MEMORY_MB": 512})
    world.provider("no-memory", room={"VCPU": 4})
    world.provider("full", room={"VCPU": 4, "MEMORY_MB": 100})
    world.provider("no-vcpu", room={"MEMORY_MB": 512})
    entered = []
    walk_tree = walks.Walk.tree

    def tree(self, root):
        entered.append(world.names[root])
        return walk_tree(self, root)

    monkeypatch.setattr(walks.Walk, "tree", tree)
    req = ask("resources=VCPU:1,MEMORY_MB:256")
    found = world.offer(req)
    tally = merge.Tally()
    chosen = list(merge.assignments(req, found, tally=tally).stream)
    assert [world.names[assigned[0]] for assigned in chosen] == ["both"]
    assert entered == ["both"]  # the three others lack room for one class or the other
    assert tally.entered == len(found.roots) == 4  # yet they count as entered, and pruned
    assert tally.pruned == 3


# Pigeonholes: prune.placeable.


def distinct_devices(free: list[int]) -> World:
    world = World()
    world.provider("HOST", room={"VCPU": 0})
    for d, units in enumerate(free):
        world.provider(f"D{d}", "HOST", room={"CUSTOM_DEV": units})
    return world


def test_ten_groups_of_ten_do_not_fit_nine_devices_of_ten_to_eighteen():
    # The room bound passes (126 free for 100); no device holds two groups.
    world = distinct_devices(list(range(10, 19)))
    chosen, lookups = walk(world, groups(10, amount=10, policy="none"))
    assert chosen == [] and lookups < 200
    chosen, _ = walk(world, groups(9, amount=10, policy="none"), limit=1)
    assert len(chosen) == 1


def test_placeable_on_hand_built_slots():
    world = distinct_devices([10, 20, 5])
    for qs, expected in [
        (groups(3, amount=10, policy="none"), True),  # D0 one, D1 two
        (groups(4, amount=10, policy="none"), False),  # room for three of ten
        (groups(4, amount=6, policy="none"), True),  # D0 one, D1 three
        (groups(5, amount=6, policy="none"), False),  # D2 is too small for one
        # A relaxation: five of six and one of five do not fit either (the
        # walk finds that), but counted by the smallest amount they might.
        (groups(5, amount=6, policy="none") + "&resources_X=CUSTOM_DEV:5", True),
    ]:
        req = ask(qs)
        found = world.offer(req)
        slots = walks.slots(req)
        root = found.roots[0]
        index = walks.options_by_root(found)
        options = [index[(slot.suffix, slot.key)][root] for slot in slots]
        assert prune.placeable(slots, options, found.room) is expected, qs


def pigeonhole_world(rng: random.Random) -> World:
    """Devices of distinct free amounts, some too small for two groups."""
    world = World()
    for h in range(rng.randint(1, 2)):
        host = f"H{h}"
        world.provider(host, room={"VCPU": rng.randint(0, 3)})
        amounts = rng.sample(range(1, 9), rng.randint(1, 4))
        for d, units in enumerate(amounts):
            name = f"{host}D{d}"
            world.provider(name, host, room={"CUSTOM_DEV": units, "VCPU": rng.randint(0, 2)})
            if rng.random() < 0.2:
                world.provider(f"{name}.C", name, room={"CUSTOM_DEV": rng.randint(1, 4)})
    return world


def pigeonhole_query(rng: random.Random) -> str:
    names = [f"_G{g}" for g in range(rng.randint(2, 5))]
    parts = [f"resources{name}=CUSTOM_DEV:{rng.randint(1, 4)}" for name in names]
    if rng.random() < 0.3:
        parts.append(f"resources{names[0]}=VCPU:1")
    if rng.random() < 0.3:
        parts.append(f"resources=CUSTOM_DEV:{rng.randint(1, 3)}")
    if rng.random() < 0.3:
        parts.append("same_subtree=" + ",".join(rng.sample(names, rng.randint(2, len(names)))))
    parts.append("group_policy=" + rng.choice(["none", "none", "isolate"]))
    return "&".join(parts)


@pytest.mark.slow
def test_the_walk_with_pigeonholes_finds_exactly_what_brute_force_finds():
    """Distinct free amounts, more groups than devices can hold, deep
    same_subtree: placeable never drops a candidate the rules keep."""
    rng = random.Random(2828)
    nonempty = refused = 0
    for _ in range(300):
        world = pigeonhole_world(rng)
        req = ask(pigeonhole_query(rng))
        found = world.offer(req)
        expected = brute_force(req, found)
        walked = Counter(normalised(c) for c in merge.generate(req, found))
        assert walked == Counter(expected), (req, world.found)
        nonempty += bool(expected)
        slots = walks.slots(req)
        index = walks.options_by_root(found)
        for root in found.roots:
            options = [index.get((s.suffix, s.key), {}).get(root, []) for s in slots]
            if all(options) and not prune.placeable(slots, options, found.room):
                refused += 1  # and brute force finds nothing in that tree
                in_tree = [
                    key
                    for key in expected
                    if any(found.providers[pid].root_id == root for pid, _ in key[0])
                ]
                assert in_tree == [], (req, world.found, root)
    assert nonempty > 80 and refused > 25, (nonempty, refused)


def test_a_walk_past_its_budget_stops_with_the_budget_it_had():
    world = distinct_devices([9] * 9)
    req = ask(groups(8, amount=1, policy="none"))  # 9**8 candidates
    found = world.offer(req)
    found.budget = model.Budget(5000)
    with pytest.raises(model.SearchBudgetExceeded) as raised:
        merge.take(merge.generate(req, found), None, None)
    assert raised.value.steps == 5000 and found.budget.left < 0
    # a limit ends the walk long before: the budget is for the work done
    found.budget = model.Budget(5000)
    assert len(merge.take(merge.generate(req, found), 3, None)) == 3
    assert found.budget.left > 4900


def test_the_walk_does_not_recurse_once_per_slot():
    """1,500 slots (an unsuffixed group of as many classes, each on a root
    and its child): deeper than Python's recursion limit of frames, and the
    walk still finds the first candidates."""
    classes = [f"CUSTOM_C{i}" for i in range(1500)]
    world = World()
    world.provider("HOST", room={rc: 1 for rc in classes})
    world.provider("CHILD", "HOST", room={rc: 1 for rc in classes})
    req = ask("resources=" + ",".join(f"{rc}:1" for rc in classes))
    found = world.offer(req)
    chosen = merge.take(merge.generate(req, found), 2, None)
    assert len(chosen) == 2


# Deep same_subtree: subtree.may_still_root ends a branch before the set's
# last slot.

NEGATED_SUBTREE = Version(1, 43)  # same_subtree=_A,!_B


def deep_world(rng: random.Random) -> World:
    """Trees three levels deep, with room at every level (so that the root
    of a same_subtree set can be a middle provider, the tree's root, or a
    leaf holding every group)."""
    world = World()
    for t in range(rng.randint(1, 2)):
        root = f"T{t}"
        world.provider(root, room={"CUSTOM_DEV": rng.randint(0, 2), "VCPU": rng.randint(0, 2)})
        for m in range(rng.randint(1, 2)):
            middle = f"{root}M{m}"
            world.provider(middle, root, room={"CUSTOM_DEV": rng.randint(0, 3)})
            for leaf in range(rng.randint(0, 2)):
                world.provider(
                    f"{middle}L{leaf}",
                    middle,
                    room={"CUSTOM_DEV": rng.randint(1, 4), "VCPU": rng.randint(0, 1)},
                )
    return world


def deep_query(rng: random.Random) -> str:
    names = [f"_G{g}" for g in range(rng.randint(3, 5))]
    parts = [f"resources{name}=CUSTOM_DEV:{rng.randint(1, 2)}" for name in names]
    if rng.random() < 0.3:
        parts.append(f"resources{rng.choice(names)}=VCPU:1")
    members = rng.sample(names, rng.randint(3, len(names)))
    subtree = "same_subtree=" + ",".join(members)
    rest = [name for name in names if name not in members]
    if rest and rng.random() < 0.4:
        subtree += ",!" + rest[0]  # a negated group keeps out of the subtree
    parts.append(subtree)
    if rng.random() < 0.3 and len(names) - len(members) >= 2:
        parts.append("same_subtree=" + ",".join(rest[-2:]))
    parts.append("group_policy=" + rng.choice(["none", "none", "isolate"]))
    return "&".join(parts)


@pytest.mark.slow
def test_the_walk_with_deep_same_subtrees_finds_exactly_what_brute_force_finds():
    rng = random.Random(2829)
    nonempty = 0
    for _ in range(250):
        world = deep_world(rng)
        req = ask(deep_query(rng), NEGATED_SUBTREE)
        found = world.offer(req)
        expected = brute_force(req, found)
        for strategy in ("depth-first", "breadth-first"):
            walked = Counter(normalised(c) for c in merge.generate(req, found, strategy))
            assert walked == Counter(expected), (req, world.found)
        nonempty += bool(expected)
    assert nonempty > 60, nonempty


def test_one_vcpu_groups_under_same_subtree_are_not_spread_over_siblings():
    """Eleven one-unit groups in one same_subtree set on nine leaves of 10
    to 18 under a root without room: only the leaves of 11 or more hold
    them all. Each branch that puts two groups on two leaves ends there."""
    world = distinct_devices(list(range(10, 19)))
    qs = (
        groups(11, amount=1, policy="none")
        + "&same_subtree="
        + ",".join(f"_G{g:02d}" for g in range(11))
    )
    chosen, lookups = walk(world, qs)
    assert len(chosen) == 8 and lookups < 5000, lookups


def test_may_still_root_on_hand_built_trees():
    world = World()
    world.provider("R", room={"VCPU": 1})
    world.provider("A", "R", room={"VCPU": 1})
    world.provider("B", "R", room={"VCPU": 1})
    world.provider("A1", "A", room={"VCPU": 1})
    world.provider("S", room={"VCPU": 1})  # another tree
    found = world.offer(ask("resources=VCPU:1"))
    pid = {p.uuid.removeprefix("uuid-"): i for i, p in found.providers.items()}
    may = subtree.may_still_root
    # a member is an ancestor of the others: it can be the root
    assert may(found, {pid["A"], pid["A1"]}, [])
    # siblings: only a later group on R (their lowest common ancestor) or above
    assert not may(found, {pid["A"], pid["B"]}, [{pid["A1"]}, {pid["B"]}])
    assert may(found, {pid["A"], pid["B"]}, [{pid["A1"]}, {pid["R"], pid["A"]}])
    assert may(found, {pid["A1"], pid["B"]}, [{pid["R"]}])
    assert not may(found, {pid["A1"], pid["B"]}, [{pid["A"]}])
    # two trees: no common ancestor at all
    assert not may(found, {pid["A"], pid["S"]}, [{pid["R"]}, {pid["S"]}])
