"""candidates.merge on hand-built search results (model.Found), no database.

What is proven: group_policy isolate against none; amounts of several groups
on one provider adding up within free room and max_unit; same_subtree; the
pre-1.29 one-provider-per-tree rule; the unsuffixed group's collective traits;
sharing providers serving every tree they share with, and candidates made of
sharing providers alone coming back once; depth-first against breadth-first
order; ``take`` honouring limit and max_allocation_candidates while pulling no
more than it needs, and its random choice being a fair sample; the wide tree
(8 children, 8 isolated groups) giving exactly 8! candidates and stopping early
under a limit. placement-svc's own rules: isolate=<suffixes> (an isolated
group's provider serves no other granular group; the unsuffixed group is
free) and same_subtree=_P,!_N (_N's provider is neither the subtree root R of
_P -- the one positive provider above all the others -- nor below it), each
on hand-built worlds. A brute-force enumeration of the rules, run on a few
hundred random small worlds (and a few hundred more with random isolated
subsets and negated groups), checks the whole answer against the walk's
pruning; isolating every granular group answers exactly what
group_policy=isolate answers, in the same order.
"""

from __future__ import annotations

import dataclasses
import itertools
import random
from collections import Counter
from urllib.parse import parse_qsl

import pytest
from microversion_parse import Version

from placement_svc.candidates import merge, request
from placement_svc.candidates.model import Found, Provider, Room
from placement_svc.queryparams import TraitFilter

LATEST = Version(1, 39)


def ask(qs: str, version=LATEST) -> request.Request:
    params: dict[str, list[str]] = {}
    for key, value in parse_qsl(qs, keep_blank_values=True):
        params.setdefault(key, []).append(value)
    return request.parse(params, version)


class World:
    """Providers by name, and the options a search would find for a request."""

    def __init__(self):
        self.found = Found()
        self.ids: dict[str, int] = {}
        self.names: dict[int, str] = {}

    def provider(self, name, parent=None, room=None, traits=(), max_unit=None):
        pid = len(self.ids) + 1
        parent_id = self.ids[parent] if parent else None
        root_id = self.found.providers[parent_id].root_id if parent else pid
        self.ids[name], self.names[pid] = pid, name
        self.found.providers[pid] = Provider(pid, f"uuid-{name}", parent_id, root_id)
        self.found.traits[pid] = frozenset(traits)
        for rc, free in (room or {}).items():
            self.found.room[(pid, rc)] = Room(free, 1, max_unit or free, 1)
        if parent is None:
            self.found.roots.append(pid)
        return pid

    def sharing(self, name, room, shares_with, traits=()):
        pid = self.provider(name, room=room, traits=("MISC_SHARES_VIA_AGGREGATE", *traits))
        self.found.sharing.add(pid)
        self.found.shares_with[pid] = {pid} | {self.ids[r] for r in shares_with}
        return pid

    def offer(self, req: request.Request) -> Found:
        """The options search would give: room for the amount, and traits."""
        found = self.found
        found.options = {}
        for suffix, group in req.groups.items():
            forbidden = group.required.forbidden

            def allowed(pid, group=group, forbidden=forbidden):
                traits = found.traits[pid]
                if traits & forbidden:
                    return False
                return not group.same_provider or all(traits & s for s in group.required.any_of)

            def room_for(pid, rc, amount):
                room = found.room.get((pid, rc))
                return room is not None and room.fits(amount)

            ordered = sorted(found.providers)
            if group.same_provider:
                found.options[suffix] = {
                    None: [
                        p
                        for p in ordered
                        if allowed(p)
                        and all(room_for(p, rc, a) for rc, a in group.resources.items())
                    ]
                }
            else:
                found.options[suffix] = {
                    rc: [p for p in ordered if allowed(p) and room_for(p, rc, a)]
                    for rc, a in group.resources.items()
                }
        return found

    def readable(self, candidate: merge.Candidate):
        allocations = frozenset(
            (self.names[pid], rc, amount)
            for pid, resources in candidate.allocations.items()
            for rc, amount in resources.items()
        )
        mappings = frozenset(
            (suffix, frozenset(self.names[p] for p in pids))
            for suffix, pids in candidate.mappings.items()
        )
        return allocations, mappings

    def candidates(self, qs, version=LATEST, **kwargs):
        req = ask(qs, version)
        return [self.readable(c) for c in merge.generate(req, self.offer(req), **kwargs)]

    def allocations(self, qs, version=LATEST, **kwargs):
        """Each candidate's allocations only, as a multiset."""
        return Counter(a for a, _m in self.candidates(qs, version, **kwargs))


def alloc(*parts):
    """alloc(("N0", "VCPU", 2), ...) as the readable allocations."""
    return frozenset(parts)


def numa_host(vcpu=4):
    world = World()
    world.provider("HOST")
    world.provider("N0", "HOST", room={"VCPU": vcpu})
    world.provider("N1", "HOST", room={"VCPU": vcpu})
    return world


# group_policy


def test_isolate_keeps_granular_groups_apart_none_lets_them_share():
    world = numa_host()
    isolated = world.candidates("resources1=VCPU:1&resources2=VCPU:1&group_policy=isolate")
    shared = world.candidates("resources1=VCPU:1&resources2=VCPU:1&group_policy=none")
    apart = alloc(("N0", "VCPU", 1), ("N1", "VCPU", 1))
    assert Counter(a for a, _ in isolated) == {apart: 2}  # groups swapped: two entries
    assert Counter(a for a, _ in shared) == {
        apart: 2,
        alloc(("N0", "VCPU", 2)): 1,
        alloc(("N1", "VCPU", 2)): 1,
    }


def test_isolate_does_not_isolate_the_unsuffixed_group():
    world = numa_host()
    found = world.candidates("resources=VCPU:1&resources1=VCPU:1&group_policy=isolate")
    assert len(found) == 4  # unsuffixed anywhere, the one granular group anywhere
    assert (
        alloc(("N0", "VCPU", 2)),
        frozenset({("", frozenset({"N0"})), ("1", frozenset({"N0"}))}),
    ) in found


def test_a_resourceless_group_counts_for_isolation():
    world = numa_host()
    world.found.traits[world.ids["HOST"]] = frozenset({"CUSTOM_HOST"})
    world.found.traits[world.ids["N0"]] = frozenset({"CUSTOM_HOST"})
    qs = "resources_A=VCPU:1&required_H=CUSTOM_HOST&same_subtree=_A,_H&group_policy="
    isolated = {m for _a, m in world.candidates(qs + "isolate")}
    shared = {m for _a, m in world.candidates(qs + "none")}
    on = lambda a, h: frozenset({("_A", frozenset({a})), ("_H", frozenset({h}))})  # noqa: E731
    assert isolated == {on("N0", "HOST"), on("N1", "HOST")}
    assert shared == isolated | {on("N0", "N0")}


# room


def test_amounts_of_groups_on_one_provider_add_up_within_free_room():
    world = numa_host(vcpu=3)
    found = world.allocations("resources=VCPU:2&resources1=VCPU:2")
    assert found == {alloc(("N0", "VCPU", 2), ("N1", "VCPU", 2)): 2}


def test_amounts_add_up_within_max_unit_too():
    world = World()
    world.provider("CN", room={"VCPU": 8}, max_unit=3)
    assert world.allocations("resources=VCPU:2&resources1=VCPU:1") == {alloc(("CN", "VCPU", 3)): 1}
    assert world.allocations("resources=VCPU:2&resources1=VCPU:2") == {}


def test_room_is_given_back_when_the_walk_backtracks():
    world = numa_host(vcpu=2)
    found = world.allocations(
        "resources1=VCPU:2&resources2=VCPU:2&resources3=VCPU:1&group_policy=none"
    )
    assert found == {}
    found = world.allocations(
        "resources1=VCPU:1&resources2=VCPU:1&resources3=VCPU:1&group_policy=none"
    )
    assert sum(found.values()) == 6  # 2**3 placements less the two that put 3 on one node


# same_subtree


def fpga_host():
    world = World()
    world.provider("CN")
    world.provider("NUMA0", "CN", room={"VCPU": 4}, traits={"HW_NUMA_ROOT"})
    world.provider("NUMA1", "CN", room={"VCPU": 4}, traits={"HW_NUMA_ROOT"})
    world.provider("F0_0", "NUMA0", room={"CUSTOM_FPGA": 1})
    world.provider("F1_0", "NUMA1", room={"CUSTOM_FPGA": 1})
    world.provider("F1_1", "NUMA1", room={"CUSTOM_FPGA": 1})
    return world


def test_same_subtree_needs_one_provider_to_be_the_ancestor_of_the_others():
    world = fpga_host()
    qs = "resources_C=VCPU:1&resources_A=CUSTOM_FPGA:1&group_policy=none&same_subtree=_C,_A"
    assert world.allocations(qs) == {
        alloc(("NUMA0", "VCPU", 1), ("F0_0", "CUSTOM_FPGA", 1)): 1,
        alloc(("NUMA1", "VCPU", 1), ("F1_0", "CUSTOM_FPGA", 1)): 1,
        alloc(("NUMA1", "VCPU", 1), ("F1_1", "CUSTOM_FPGA", 1)): 1,
    }


def test_siblings_are_not_a_subtree():
    world = fpga_host()
    qs = "resources_A=CUSTOM_FPGA:1&resources_B=CUSTOM_FPGA:1&group_policy=none&same_subtree=_A,_B"
    assert world.candidates(qs) == []


def test_a_grandparent_is_an_ancestor():
    world = fpga_host()
    world.found.traits[world.ids["CN"]] = frozenset({"CUSTOM_HOST"})
    qs = "required_H=CUSTOM_HOST&resources_A=CUSTOM_FPGA:1&group_policy=none&same_subtree=_H,_A"
    assert len(world.candidates(qs)) == 3


# traits of the unsuffixed group


def test_the_unsuffixed_groups_required_traits_are_met_together():
    world = World()
    world.provider("CN", room={"VCPU": 4}, traits={"CUSTOM_A"})
    world.provider("NIC", "CN", room={"SRIOV_NET_VF": 4}, traits={"CUSTOM_B"})
    assert len(world.candidates("resources=VCPU:1,SRIOV_NET_VF:1&required=CUSTOM_A,CUSTOM_B")) == 1
    assert world.candidates("resources=VCPU:1&required=CUSTOM_A,CUSTOM_B") == []
    assert len(world.candidates("resources=VCPU:1&required=in:CUSTOM_B,CUSTOM_A")) == 1


# pre-1.29


def test_before_1_29_a_candidate_takes_one_provider_per_tree():
    world = World()
    world.provider("CN", room={"VCPU": 4})
    world.provider("PF", "CN", room={"SRIOV_NET_VF": 4})
    world.sharing("SS", {"DISK_GB": 100}, ["CN"])
    qs = "resources=VCPU:1,SRIOV_NET_VF:1"
    assert world.candidates(qs, Version(1, 28)) == []
    assert len(world.candidates(qs, Version(1, 29))) == 1
    # a sharing provider is a tree of its own
    assert world.allocations("resources=VCPU:1,DISK_GB:1", Version(1, 28)) == {
        alloc(("CN", "VCPU", 1), ("SS", "DISK_GB", 1)): 1
    }
    # one provider serving two groups is still one provider
    assert world.allocations("resources=VCPU:1&resources1=VCPU:1", Version(1, 28)) == {
        alloc(("CN", "VCPU", 2)): 1
    }


# sharing providers


def test_a_sharing_provider_serves_every_tree_it_shares_with():
    world = numa_host()
    world.provider("HOST2")
    world.provider("M0", "HOST2", room={"VCPU": 4})
    world.sharing("SS", {"DISK_GB": 100}, ["HOST", "HOST2"])
    found = world.allocations("resources=DISK_GB:10&resources_C=VCPU:1")
    assert found == {alloc(("SS", "DISK_GB", 10), (n, "VCPU", 1)): 1 for n in ("N0", "N1", "M0")}


def test_candidates_of_sharing_providers_alone_come_back_once():
    world = numa_host()
    world.provider("HOST2")
    world.sharing("SS", {"DISK_GB": 100}, ["HOST", "HOST2"])
    assert world.allocations("resources=DISK_GB:10") == {alloc(("SS", "DISK_GB", 10)): 1}
    world.sharing("SS2", {"DISK_GB": 100}, ["HOST"])
    # the split pair comes once per mapping, not once per tree; the unsuffixed
    # group is not isolated, so each may also serve both groups
    assert world.allocations("resources=DISK_GB:10&resources1=DISK_GB:10&group_policy=isolate") == {
        alloc(("SS", "DISK_GB", 10), ("SS2", "DISK_GB", 10)): 2,
        alloc(("SS", "DISK_GB", 20)): 1,
        alloc(("SS2", "DISK_GB", 20)): 1,
    }


def test_a_sharing_provider_does_not_serve_trees_it_does_not_share_with():
    world = numa_host()
    world.sharing("SS", {"DISK_GB": 100}, [])
    assert world.candidates("resources=VCPU:1,DISK_GB:10") == []


# order


def three_hosts():
    world = World()
    for host in ("A", "B", "C"):
        world.provider(host)
        world.provider(f"{host}0", host, room={"VCPU": 1})
        world.provider(f"{host}1", host, room={"VCPU": 1})
    return world


def hosts_in_order(world, strategy):
    return [
        next(iter(a))[0][0] for a, _m in world.candidates("resources=VCPU:1", strategy=strategy)
    ]


def test_depth_first_exhausts_one_tree_before_the_next():
    assert hosts_in_order(three_hosts(), "depth-first") == list("AABBCC")


def test_breadth_first_takes_from_each_tree_in_turn():
    assert hosts_in_order(three_hosts(), "breadth-first") == list("ABCABC")


def test_breadth_first_carries_on_with_the_trees_that_have_more():
    world = three_hosts()
    world.provider("A2", "A", room={"VCPU": 1})
    assert hosts_in_order(world, "breadth-first") == list("ABCABCA")


def test_a_shuffled_walk_gives_the_same_candidates():
    world = three_hosts()
    plain = Counter(world.candidates("resources=VCPU:1&resources1=VCPU:1&group_policy=none"))
    for seed in range(5):
        shuffled = Counter(
            world.candidates(
                "resources=VCPU:1&resources1=VCPU:1&group_policy=none",
                shuffle=random.Random(seed),
            )
        )
        assert shuffled == plain


# take: limit, max_allocation_candidates, random sample


class Pulled:
    """An iterator that counts what was taken from it."""

    def __init__(self, items):
        self.items = iter(items)
        self.count = 0

    def __iter__(self):
        return self

    def __next__(self):
        item = next(self.items)
        self.count += 1
        return item


def test_the_tally_counts_trees_entered_and_those_that_gave_nothing():
    world = numa_host()  # HOST with N0 and N1: the groups can be kept apart
    world.provider("FLAT", room={"VCPU": 8})  # one provider: isolation rules it out
    world.provider("SMALL", room={"VCPU": 1})  # too small for both groups at once
    req = ask("resources1=VCPU:1&resources2=VCPU:1&group_policy=isolate")
    found = world.offer(req)
    tally = merge.Tally()
    assert len(list(merge.generate(req, found, tally=tally))) == 2  # N0+N1, N1+N0
    assert (tally.entered, tally.kept, tally.pruned) == (3, 1, 2)
    # Under a limit the walk stops early: trees never entered are not counted.
    tally = merge.Tally()
    assert len(merge.take(merge.generate(req, found, tally=tally), 1, None)) == 1
    assert (tally.entered, tally.kept) == (1, 1)


def test_take_stops_pulling_at_the_limit():
    stream = Pulled(range(100))
    assert merge.take(stream, 5, None) == [0, 1, 2, 3, 4]
    assert stream.count == 5


def test_take_stops_pulling_at_the_cap():
    stream = Pulled(range(100))
    assert merge.take(stream, None, 7) == list(range(7))
    assert stream.count == 7
    assert merge.take(iter(range(100)), 10, 3) == [0, 1, 2]
    assert merge.take(iter(range(5)), None, -1) == list(range(5))


def test_a_random_take_samples_only_from_what_the_cap_lets_through():
    for seed in range(20):
        chosen = merge.take(iter(range(100)), 3, 10, random.Random(seed))
        assert len(chosen) == 3 and len(set(chosen)) == 3 and set(chosen) <= set(range(10))


def test_a_random_take_without_limit_is_everything_shuffled():
    chosen = merge.take(iter(range(50)), None, None, random.Random(1))
    assert sorted(chosen) == list(range(50)) and chosen != list(range(50))


def test_a_random_take_with_a_limit_above_the_count_is_everything():
    assert sorted(merge.take(iter(range(4)), 10, None, random.Random(1))) == [0, 1, 2, 3]


def test_a_random_take_is_a_fair_sample():
    master = random.Random(20240601)
    draws, population, limit = 3000, 20, 5
    seen = Counter()
    for _ in range(draws):
        chosen = merge.take(iter(range(population)), limit, None, random.Random(master.random()))
        assert len(set(chosen)) == limit
        seen.update(chosen)
    expected = draws * limit / population  # 750 each
    assert set(seen) == set(range(population))
    assert all(0.8 * expected <= n <= 1.2 * expected for n in seen.values()), seen
    # and the order within a sample is not the stream's order
    firsts = Counter(
        merge.take(iter(range(population)), limit, None, random.Random(master.random()))[0]
        for _ in range(500)
    )
    assert len(firsts) > limit


# the wide tree


def wide_tree(children=8):
    world = World()
    world.provider("ROOT")
    for i in range(children):
        world.provider(f"C{i}", "ROOT", room={"VCPU": children})
    return world


def wide_request(groups=8):
    qs = "&".join(f"resources{i}=VCPU:1" for i in range(1, groups + 1))
    return ask(qs + "&group_policy=isolate")


class CountingRoom(dict):
    lookups = 0

    def __getitem__(self, key):
        CountingRoom.lookups += 1
        return super().__getitem__(key)


@pytest.mark.slow
def test_eight_isolated_groups_on_eight_children_are_eight_factorial():
    world = wide_tree()
    req = wide_request()
    found = list(merge.generate(req, world.offer(req)))
    assert len(found) == 40320
    assert len({c.key() for c in found}) == 40320
    assert all(len(c.allocations) == 8 for c in found)


def test_the_wide_tree_stops_early_under_a_limit():
    world = wide_tree()
    req = wide_request()
    found = world.offer(req)
    found.room = CountingRoom(found.room)
    CountingRoom.lookups = 0
    stream = Pulled(merge.generate(req, found))
    chosen = merge.take(stream, 10, None)
    assert len(chosen) == 10 and stream.count == 10
    # The whole walk places a provider on a slot sum(8!/(8-k)!, k=1..8) = 109600
    # times, each after looking at its room; ten candidates need a sliver of that.
    assert CountingRoom.lookups < 1000


def test_the_wide_tree_stops_at_max_allocation_candidates():
    world = wide_tree()
    req = wide_request()
    stream = Pulled(merge.generate(req, world.offer(req)))
    assert len(merge.take(stream, None, 1000)) == 1000
    assert stream.count == 1000


# isolate=<suffixes> (1.42) and same_subtree=_P,!_N (1.43), on Requests built
# the way their parsing fills them


def constrained(world: World, qs: str, isolated=(), apart=()):
    """The readable candidates of ``qs`` with ``isolated`` and ``apart`` set."""
    req = ask(qs)
    req.isolated = frozenset(isolated)
    for positive, negated in apart:
        req.apart.append((frozenset(positive), frozenset(negated)))
        req.same_subtrees.append(set(positive))
    return [world.readable(c) for c in merge.generate(req, world.offer(req))]


def on(**where):
    """Readable mappings: on(_A="N0") is {"_A": {"N0"}}."""
    return frozenset((suffix, frozenset({pid})) for suffix, pid in where.items())


def test_an_isolated_group_has_its_provider_to_itself_the_others_may_share():
    world = numa_host()
    qs = "resources_A=VCPU:1&resources_B=VCPU:1&resources_C=VCPU:1&group_policy=none"
    assert len(constrained(world, qs)) == 8
    assert {m for _a, m in constrained(world, qs, isolated={"_A"})} == {
        on(_A="N0", _B="N1", _C="N1"),
        on(_A="N1", _B="N0", _C="N0"),
    }


def test_isolation_leaves_the_unsuffixed_group_alone():
    world = numa_host()
    qs = "resources=VCPU:1&resources_A=VCPU:1&group_policy=none"
    assert len(constrained(world, qs, isolated={"_A"})) == 4


def test_a_resourceless_isolated_group_keeps_its_provider_too():
    world = numa_host()
    world.found.traits[world.ids["N0"]] = frozenset({"CUSTOM_X"})
    qs = "resources_A=VCPU:1&required_X=CUSTOM_X&same_subtree=_X&group_policy=none"
    assert {m for _a, m in constrained(world, qs)} == {on(_A="N0", _X="N0"), on(_A="N1", _X="N0")}
    assert {m for _a, m in constrained(world, qs, isolated={"_X"})} == {on(_A="N1", _X="N0")}


def test_a_negated_group_stays_out_of_the_positive_groups_subtree():
    # The spec's FPGA host: an FPGA on another NUMA node than the VCPUs.
    world = fpga_host()
    qs = "resources_C=VCPU:1&resources_F=CUSTOM_FPGA:1&group_policy=none"
    assert {m for _a, m in constrained(world, qs, apart=[({"_C"}, {"_F"})])} == {
        on(_C="NUMA0", _F="F1_0"),
        on(_C="NUMA0", _F="F1_1"),
        on(_C="NUMA1", _F="F0_0"),
    }


def test_the_subtree_root_is_the_positive_provider_above_the_others():
    # VCPU and one FPGA on one NUMA node (R is that node), a second FPGA
    # on the other: only NUMA1 has two FPGAs, but R's subtree holds both.
    world = fpga_host()
    qs = "resources_C=VCPU:1&resources_F=CUSTOM_FPGA:1&resources_G=CUSTOM_FPGA:1&group_policy=none"
    assert {m for _a, m in constrained(world, qs, apart=[({"_C", "_F"}, {"_G"})])} == {
        on(_C="NUMA0", _F="F0_0", _G="F1_0"),
        on(_C="NUMA0", _F="F0_0", _G="F1_1"),
        on(_C="NUMA1", _F="F1_0", _G="F0_0"),
        on(_C="NUMA1", _F="F1_1", _G="F0_0"),
    }


def test_an_ancestor_of_the_subtree_root_is_outside_it():
    world = fpga_host()
    for name in ("CN", "NUMA0"):
        world.found.traits[world.ids[name]] |= {"CUSTOM_HOST"}
    qs = "resources_F=CUSTOM_FPGA:1&required_H=CUSTOM_HOST&same_subtree=_H&group_policy=none"
    # R is the FPGA: CN and NUMA0 are its ancestors, outside its subtree.
    assert len(constrained(world, qs, apart=[({"_F"}, {"_H"})])) == 6
    qs = (
        "resources_C=VCPU:1&required_H=CUSTOM_HOST&resources_F=CUSTOM_FPGA:1"
        "&same_subtree=_H&group_policy=none"
    )
    apart = constrained(world, qs, apart=[({"_H", "_C"}, {"_F"})])
    # R is NUMA0 (_H and _C on it), or CN (_H there, _C below), whose
    # subtree is the whole host: no FPGA is outside it.
    assert {m for _a, m in apart} == {
        on(_H="NUMA0", _C="NUMA0", _F="F1_0"),
        on(_H="NUMA0", _C="NUMA0", _F="F1_1"),
    }


def test_a_resourceless_negated_group_needs_a_provider_outside_the_subtree():
    world = fpga_host()
    qs = "resources_C=VCPU:1&required_N=HW_NUMA_ROOT&same_subtree=_N&group_policy=none"
    assert {m for _a, m in constrained(world, qs, apart=[({"_C"}, {"_N"})])} == {
        on(_C="NUMA0", _N="NUMA1"),
        on(_C="NUMA1", _N="NUMA0"),
    }


def test_positive_groups_without_a_subtree_root_give_nothing():
    world = fpga_host()
    qs = "resources_A=CUSTOM_FPGA:1&resources_B=CUSTOM_FPGA:1&resources_C=VCPU:1&group_policy=none"
    assert constrained(world, qs, apart=[({"_A", "_B"}, {"_C"})]) == []


def test_one_provider_cannot_be_both_inside_and_outside():
    world = World()
    world.provider("CN", room={"VCPU": 8})
    qs = "resources_A=VCPU:1&resources_B=VCPU:1&group_policy=none"
    assert len(constrained(world, qs)) == 1
    assert constrained(world, qs, apart=[({"_A"}, {"_B"})]) == []
    assert constrained(world, qs, isolated={"_B"}) == []


# Brute force: every rule applied to every assignment, against the walk.


def brute_force(req: request.Request, found: Found):
    """The candidates by the rules alone: each tree, every assignment of providers
    to the unsuffixed group's classes and to the granular groups, kept if within
    room and max_unit, isolated when asked, one provider per tree before 1.29,
    the unsuffixed group's traits met together, and same_subtree. Deduplicated
    on allocations and mappings, as upstream."""
    keys = set()
    for root in found.roots:

        def reach(pid, root=root):
            return found.providers[pid].root_id == root or (
                pid in found.sharing and root in found.shares_with.get(pid, ())
            )

        slots = []
        for suffix, group in req.groups.items():
            if group.same_provider:
                slots.append((suffix, group, dict(group.resources), found.options[suffix][None]))
            else:
                for rc, amount in group.resources.items():
                    slots.append((suffix, group, {rc: amount}, found.options[suffix][rc]))
        choices = [[p for p in options if reach(p)] for *_rest, options in slots]
        for picked in itertools.product(*choices):
            used: Counter = Counter()
            for (_s, _g, resources, _o), pid in zip(slots, picked):
                for rc, amount in resources.items():
                    used[(pid, rc)] += amount
            if any(
                n > found.room[key].free or n > found.room[key].max_unit for key, n in used.items()
            ):
                continue
            granular = [pid for (_s, g, _r, _o), pid in zip(slots, picked) if g.same_provider]
            if req.isolate and len(set(granular)) != len(granular):
                continue
            where = {s: pid for (s, g, _r, _o), pid in zip(slots, picked) if g.same_provider}
            if not isolation_holds(req.isolated, where):
                continue
            if not all(apart_holds(found, where, p, n) for p, n in req.apart):
                continue
            holders = {pid for pid, _rc in used}
            if not req.nested and len({found.providers[p].root_id for p in holders}) != len(
                holders
            ):
                continue
            unsuffixed = [pid for (s, *_r), pid in zip(slots, picked) if s == ""]
            if unsuffixed:
                traits = frozenset().union(*(found.traits[p] for p in unsuffixed))
                if any(not (traits & s) for s in req.groups[""].required.any_of):
                    continue
            if not all(
                one_holds_the_rest(
                    found, {pid for (s, *_r), pid in zip(slots, picked) if s in suffixes}
                )
                for suffixes in req.same_subtrees
            ):
                continue
            allocations: dict = {}
            mappings: dict = {}
            for (suffix, _g, resources, _o), pid in zip(slots, picked):
                for rc, amount in resources.items():
                    allocations.setdefault(pid, Counter())[rc] += amount
                mappings.setdefault(suffix, set()).add(pid)
            keys.add(
                (
                    frozenset((p, frozenset(r.items())) for p, r in allocations.items()),
                    frozenset((s, frozenset(p)) for s, p in mappings.items()),
                )
            )
    return keys


def line(found: Found, pid):
    """The provider and its ancestors."""
    while pid is not None:
        yield pid
        pid = found.providers[pid].parent_id


def tops(found: Found, members: set[int]) -> list[int]:
    """The members that have every other member in their subtree."""
    return [top for top in members if all(top in set(line(found, m)) for m in members)]


def one_holds_the_rest(found: Found, members: set[int]) -> bool:
    """Some member has every other member in its subtree (is it or an ancestor)."""
    return bool(tops(found, members))


def isolation_holds(isolated, where: dict[str, int]) -> bool:
    """No provider serves an isolated group and any other granular group."""
    served: dict[int, set[str]] = {}
    for suffix, pid in where.items():
        served.setdefault(pid, set()).add(suffix)
    return not any(len(suffixes) > 1 and suffixes & isolated for suffixes in served.values())


def apart_holds(found: Found, where: dict[str, int], positive, negated) -> bool:
    """Some positive provider holds the others (there is only ever one: R),
    and no negated group's provider is R or below it."""
    if not positive:
        return True
    roots = tops(found, {where[s] for s in positive})
    if not roots:
        return False
    return all(roots[0] not in set(line(found, where[n])) for n in negated)


def normalised(candidate: merge.Candidate):
    return (
        frozenset((p, frozenset(r.items())) for p, r in candidate.allocations.items()),
        frozenset((s, frozenset(p)) for s, p in candidate.mappings.items()),
    )


def random_world(rng: random.Random) -> World:
    world = World()
    classes = ("VCPU", "DISK_GB")
    traits = ("CUSTOM_A", "CUSTOM_B")
    for t in range(rng.randint(1, 3)):
        names = [f"T{t}"]
        world.provider(
            names[0], room=random_room(rng, classes), traits=rng.sample(traits, rng.randint(0, 1))
        )
        for c in range(rng.randint(0, 3)):
            name = f"T{t}C{c}"
            world.provider(
                name,
                rng.choice(names),
                room=random_room(rng, classes),
                traits=rng.sample(traits, rng.randint(0, 2)),
                max_unit=rng.choice([None, 2]),
            )
            names.append(name)
    roots = [world.names[r] for r in world.found.roots]
    for s in range(rng.randint(0, 2)):
        world.sharing(
            f"S{s}",
            {"DISK_GB": rng.randint(1, 4)},
            rng.sample(roots, rng.randint(0, len(roots))),
            traits=rng.sample(traits, rng.randint(0, 1)),  # a trait the trees may lack
        )
    return world


def random_room(rng, classes):
    return {rc: rng.randint(1, 4) for rc in classes if rng.random() < 0.6}


def random_query(rng: random.Random) -> str:
    parts = []
    nested = rng.random() < 0.8
    if rng.random() < 0.7:
        classes = rng.sample(["VCPU", "DISK_GB"], rng.randint(1, 2))
        parts.append("resources=" + ",".join(f"{rc}:{rng.randint(1, 2)}" for rc in classes))
        if rng.random() < 0.3:
            parts.append(
                "required="
                + rng.choice(["CUSTOM_A", "CUSTOM_A,CUSTOM_B", "!CUSTOM_B", "in:CUSTOM_A,CUSTOM_B"])
            )
    suffixes = []
    for i in range(rng.randint(0 if parts else 1, 3)):
        suffix = f"_G{i}"
        resourceless = nested and suffixes and rng.random() < 0.25
        if not resourceless:
            parts.append(f"resources{suffix}={rng.choice(['VCPU', 'DISK_GB'])}:{rng.randint(1, 2)}")
        if resourceless or rng.random() < 0.3:
            parts.append(
                f"required{suffix}=" + rng.choice(["CUSTOM_A", "!CUSTOM_A", "in:CUSTOM_A,CUSTOM_B"])
            )
        suffixes.append((suffix, resourceless))
    resourceless = [s for s, r in suffixes if r]
    if nested and (resourceless or (len(suffixes) > 1 and rng.random() < 0.4)):
        members = (
            {s for s, _r in rng.sample(suffixes, 2)} | set(resourceless)
            if len(suffixes) > 1
            else set()
        )
        if members:
            parts.append("same_subtree=" + ",".join(sorted(members)))
    parts.append("group_policy=" + rng.choice(["none", "isolate"]))
    return "&".join(parts), Version(1, 39) if nested else Version(1, 28)


def test_the_walk_finds_exactly_what_brute_force_finds():
    rng = random.Random(1729)
    compared = nonempty = pruned = 0
    for _ in range(400):
        world = random_world(rng)
        qs, version = random_query(rng)
        try:
            req = ask(qs, version)
        except Exception:  # a combination parse refuses (e.g. a lone resourceless group)
            continue
        found = world.offer(req)
        # The trees with a candidate, one tree at a time, for the metrics' tally.
        kept = sum(
            bool(brute_force(req, dataclasses.replace(found, roots=[root]))) for root in found.roots
        )
        for strategy in ("depth-first", "breadth-first"):
            tally = merge.Tally()
            walked = Counter(
                normalised(c) for c in merge.generate(req, found, strategy, tally=tally)
            )
            expected = brute_force(req, found)
            assert walked == Counter(expected), (qs, version, world.found)
            assert (tally.entered, tally.kept) == (len(found.roots), kept), (qs, version)
            pruned += tally.pruned
        compared += 1
        nonempty += bool(expected)
    assert compared > 300 and nonempty > 100 and pruned > 100, (compared, nonempty, pruned)


# Brute force with isolate= and same_subtree=_P,!_N (placement-svc's 1.42, 1.43)


def constrain(rng: random.Random, req: request.Request) -> request.Request:
    """Give a parsed request a random ``isolated`` subset (all of the granular
    groups now and then) and random ``apart`` constraints, some of whose
    negated groups are resourceless groups added for the purpose, the way
    the parsing of isolate= and same_subtree=!_N fills them."""
    if not req.nested:  # neither parameter exists before 1.29's nesting
        return req
    if rng.random() < 0.3:
        trait = rng.choice([["CUSTOM_A"], ["CUSTOM_B"], ["CUSTOM_A", "CUSTOM_B"]])
        forbidden = rng.random() < 0.3
        req.groups["_X"] = request.RequestGroup(
            suffix="_X",
            required=TraitFilter(
                any_of=[] if forbidden else [frozenset(trait)],
                forbidden=set(trait) if forbidden else set(),
            ),
        )
    granular = [s for s, g in req.groups.items() if g.same_provider]
    if not req.isolate and granular and rng.random() < 0.6:
        chosen = (
            granular if rng.random() < 0.3 else rng.sample(granular, rng.randint(1, len(granular)))
        )
        req.isolated = frozenset(chosen)
    if len(granular) > 1 and (rng.random() < 0.6 or "_X" in granular):
        negated = (
            {"_X"}
            if "_X" in granular
            else set(
                rng.sample(granular, rng.randint(1, 2)) if len(granular) > 2 else granular[-1:]
            )
        )
        rest = [s for s in granular if s not in negated]
        positive = frozenset(rng.sample(rest, rng.randint(1, len(rest))))
        req.apart.append((positive, frozenset(negated)))
        req.same_subtrees.append(set(positive))
    elif "_X" in granular:  # the added group went unused: drop it
        del req.groups["_X"]
        req.isolated -= {"_X"}
    return req


def test_the_walk_finds_exactly_what_brute_force_finds_with_isolate_and_apart():
    rng = random.Random(2718)
    compared = nonempty = isolated = apart = 0
    for _ in range(600):
        world = random_world(rng)
        qs, version = random_query(rng)
        try:
            req = constrain(rng, ask(qs, version))
        except Exception:  # a combination parse refuses (e.g. a lone resourceless group)
            continue
        found = world.offer(req)
        expected = brute_force(req, found)
        for strategy in ("depth-first", "breadth-first"):
            walked = Counter(normalised(c) for c in merge.generate(req, found, strategy))
            assert walked == Counter(expected), (qs, req.isolated, req.apart, world.found)
        compared += 1
        nonempty += bool(expected)
        isolated += bool(req.isolated) and not req.isolate and bool(expected)
        apart += bool(req.apart) and bool(expected)
    assert compared > 450 and nonempty > 150 and isolated > 50 and apart > 50, (
        compared,
        nonempty,
        isolated,
        apart,
    )


def test_isolating_every_granular_group_is_group_policy_isolate():
    rng = random.Random(31337)
    compared = 0
    for _ in range(400):
        world = random_world(rng)
        qs, version = random_query(rng)
        if "group_policy=isolate" not in qs:
            continue
        try:
            policy = ask(qs, version)
        except Exception:
            continue
        chosen = dataclasses.replace(policy, group_policy="none")
        chosen.isolated = frozenset(s for s, g in policy.groups.items() if g.same_provider)
        assert chosen.isolated == policy.isolated
        found = world.offer(policy)
        for strategy in ("depth-first", "breadth-first"):
            assert list(merge.generate(chosen, found, strategy)) == list(
                merge.generate(policy, found, strategy)
            ), qs
        compared += 1
    assert compared > 150


# Brute force, tree by tree: merge.trees_with_candidates (with and without
# the groups sharing their providers' room) and merge.first_in_tree, the
# walks that explain.py and capacity.py ask.
#
# A candidate belongs to the tree whose walk yields it: the anchor. Candidates
# made of sharing providers alone are yielded by the walk of every tree the
# providers share with (and of their own trees), and merge.generate drops all
# but the first (_unique_shared); trees_with_candidates asks each tree's walk
# before that, so such a candidate gives every one of those trees a
# candidate. The brute force below does the same: each anchor tree's
# assignments on its own, providers in reach of that tree.


def brute_force_tree(req: request.Request, found: Found, root: int, shared_room: bool = True):
    """The candidate keys of ``root``'s tree by the rules alone, in the order
    of every assignment (slots in the walk's order, each slot's providers in
    id order): the first is the one a depth-first walk yields first. With
    ``shared_room`` False each slot needs room for its own amounts only (the
    options already have it), as if no other group used its provider."""

    def reach(pid):
        return found.providers[pid].root_id == root or (
            pid in found.sharing and root in found.shares_with.get(pid, ())
        )

    slots = []
    for suffix, group in req.groups.items():
        if group.same_provider:
            slots.append((suffix, True, dict(group.resources), found.options[suffix][None]))
        else:
            for rc, amount in group.resources.items():
                slots.append((suffix, False, {rc: amount}, found.options[suffix][rc]))
    choices = [[p for p in options if reach(p)] for *_rest, options in slots]
    any_of = req.groups[""].required.any_of if "" in req.groups else []
    for picked in itertools.product(*choices):
        used: Counter = Counter()
        for (_s, _g, resources, _o), pid in zip(slots, picked):
            for rc, amount in resources.items():
                used[(pid, rc)] += amount
        if shared_room and any(
            n > found.room[key].free or n > found.room[key].max_unit for key, n in used.items()
        ):
            continue
        where = {s: pid for (s, granular, _r, _o), pid in zip(slots, picked) if granular}
        if not isolation_holds(req.isolated, where):
            continue
        if not all(apart_holds(found, where, p, n) for p, n in req.apart):
            continue
        holders = {pid for pid, _rc in used}
        if not req.nested and len({found.providers[p].root_id for p in holders}) != len(holders):
            continue
        unsuffixed = [pid for (s, *_r), pid in zip(slots, picked) if s == ""]
        traits = frozenset().union(*(found.traits[p] for p in unsuffixed))
        if any(not (traits & one_of) for one_of in any_of):
            continue
        members = [
            {pid for (s, *_r), pid in zip(slots, picked) if s in x} for x in req.same_subtrees
        ]
        if not all(one_holds_the_rest(found, m) for m in members):
            continue
        allocations: dict = {}
        mappings: dict = {}
        for (suffix, _g, resources, _o), pid in zip(slots, picked):
            for rc, amount in resources.items():
                allocations.setdefault(pid, Counter())[rc] += amount
            mappings.setdefault(suffix, set()).add(pid)
        yield (
            frozenset((p, frozenset(r.items())) for p, r in allocations.items()),
            frozenset((s, frozenset(p)) for s, p in mappings.items()),
        )


def random_requests(seed: int, count: int):
    """(world, request, found) on random worlds: the plain queries, and as
    many again with random isolate= and same_subtree=_P,!_N."""
    rng = random.Random(seed)
    for n in range(count):
        world = random_world(rng)
        qs, version = random_query(rng)
        try:
            req = ask(qs, version)
            if n % 2:
                req = constrain(rng, req)
        except Exception:  # a combination parse refuses
            continue
        yield world, req, world.offer(req)


def test_the_brute_force_tree_by_tree_is_the_brute_force():
    """The new brute force against the one above, which the walk is checked on."""
    compared = 0
    for _world, req, found in random_requests(112, 300):
        union = set()
        for root in found.roots:
            keys = set(brute_force_tree(req, found, root))
            assert keys == brute_force(req, dataclasses.replace(found, roots=[root]))
            union |= keys
        assert union == brute_force(req, found)
        compared += 1
    assert compared > 200


def test_trees_with_candidates_are_the_trees_the_brute_force_fills():
    compared = some = emptied = 0
    for _world, req, found in random_requests(113, 600):
        expected = [r for r in found.roots if next(brute_force_tree(req, found, r), None)]
        assert merge.trees_with_candidates(req, found, found.roots) == expected, req
        # a subset of roots, in the order given
        backwards = list(reversed(found.roots[::2]))
        assert merge.trees_with_candidates(req, found, backwards) == [
            r for r in backwards if r in expected
        ]
        compared += 1
        some += bool(expected)
        emptied += len(expected) < len(found.roots)
    assert compared > 450 and some > 150 and emptied > 150, (compared, some, emptied)


def test_without_shared_room_each_slot_needs_room_for_its_own_amounts_only():
    compared = differ = 0
    for _world, req, found in random_requests(114, 600):
        expected = [r for r in found.roots if next(brute_force_tree(req, found, r, False), None)]
        walked = merge.trees_with_candidates(req, found, found.roots, shared_room=False)
        assert walked == expected, req
        compared += 1
        differ += walked != merge.trees_with_candidates(req, found, found.roots)
    assert compared > 450 and differ > 20, (compared, differ)


def test_first_in_tree_is_the_first_candidate_of_the_trees_walk():
    compared = found_some = 0
    for _world, req, found in random_requests(115, 600):
        first = merge.first_in_tree(req, found)
        for root in found.roots:
            candidate = first(root)
            expected = next(brute_force_tree(req, found, root), None)
            assert (None if candidate is None else normalised(candidate)) == expected, req
            alone = dataclasses.replace(found, roots=[root])
            assert candidate == next(merge.generate(req, alone), None)
            found_some += candidate is not None
        compared += 1
    assert compared > 450 and found_some > 300, (compared, found_some)


def test_first_in_tree_reads_the_room_as_it_is_when_asked():
    """Room taken away between two calls (as capacity.py claims copies): the
    next answer is the first candidate on the room left."""
    rng = random.Random(116)
    compared = moved = 0
    for _world, req, found in random_requests(116, 400):
        found.room = dict(found.room)
        first = merge.first_in_tree(req, found)
        for root in found.roots:
            candidate = first(root)
            if candidate is None:
                continue
            pid, amounts = rng.choice(sorted(candidate.allocations.items()))
            for rc in amounts:
                found.room[(pid, rc)] = found.room[(pid, rc)]._replace(free=0)
            after = first(root)
            expected = next(brute_force_tree(req, found, root), None)
            assert (None if after is None else normalised(after)) == expected, req
            moved += after is not None and after != candidate
            compared += 1
    assert compared > 300 and moved > 50, (compared, moved)


def test_count_is_the_number_of_candidates_generate_yields():
    """merge.count (an explanation's number of candidates) counts without
    building, and tells apart only the candidates of sharing providers
    alone; the brute force's count is the answer's length."""
    compared = shared_alone = 0
    for _world, req, found in random_requests(115, 400):
        answer = list(merge.generate(req, found))
        assert merge.count(req, found, 10**6) == len(answer) == len(brute_force(req, found)), req
        if len(answer) > 1:  # counting stops one past its bound
            assert merge.count(req, found, len(answer) - 2) == len(answer) - 1
        compared += 1
        shared_alone += any(all(p in found.sharing for p in c.allocations) for c in answer)
    assert compared > 300 and shared_alone > 10, (compared, shared_alone)
