"""candidates.eligibility on hand-built search results (model.Found), no database.

What is proven: which providers may serve a group: room for the amount
(min_unit, max_unit, step_size), one provider holding every class of a
granular group, a resourceless group open to every provider that qualifies;
forbidden traits for every group, any-of traits per provider for a granular
group only (the unsuffixed group meets them collectively, in merge.py);
member_of any-of and forbidden aggregates, where for the unsuffixed group a
provider's root's aggregates count for it, but not for a granular group; a
sharing provider of the unsuffixed group is judged so in its own tree, and
serves the other trees it shares with only by its own aggregates, never
under in_tree, and not where that tree's root is in a forbidden aggregate;
in_tree (the whole tree of the named provider, sharing providers outside it
excluded, an unknown uuid giving nothing). Request-wide:
the anchors are every tree, in id order, less those whose root fails
root_required / root_forbidden (a child's traits do not count) or, from 1.40,
root_member_of (the root's own aggregates: any-of lists, forbidden ones,
repetitions that must all hold; a child's aggregates do not count, and
sharing providers may still serve the trees that remain).
"""

from __future__ import annotations

import dataclasses
import random

from microversion_parse import Version

from placement_svc.candidates import eligibility, rooms
from placement_svc.candidates.model import Found, Provider, Room
from tests.support.clouds import CLASSES, random_cloud, random_request
from tests.unit.test_candidates_merge import LATEST, ask

AGG_A = "aaaaaaaa-aaaa-4aaa-8aaa-aaaaaaaaaaaa"
AGG_B = "bbbbbbbb-bbbb-4bbb-8bbb-bbbbbbbbbbbb"
AGG_Z = "cccccccc-cccc-4ccc-8ccc-cccccccccccc"
SHARING = "MISC_SHARES_VIA_AGGREGATE"


def uuid_of(pid: int) -> str:
    return f"00000000-0000-4000-8000-{pid:012d}"


class World:
    """Providers by name, as search would load them."""

    def __init__(self):
        self.found = Found()
        self.ids: dict[str, int] = {}
        self.names: dict[int, str] = {}

    def provider(self, name, parent=None, room=None, traits=(), aggregates=(), **units):
        pid = len(self.ids) + 1
        parent_id = self.ids[parent] if parent else None
        root_id = self.found.providers[parent_id].root_id if parent else pid
        self.ids[name], self.names[pid] = pid, name
        self.found.providers[pid] = Provider(pid, uuid_of(pid), parent_id, root_id)
        self.found.traits[pid] = frozenset(traits)
        self.found.aggregates[pid] = frozenset(aggregates)
        for rc, free in (room or {}).items():
            self.found.room[(pid, rc)] = Room(
                free, units.get("min_unit", 1), units.get("max_unit", free), units.get("step", 1)
            )
            self.found.with_room.setdefault(rc, []).append(pid)
        if SHARING in traits:
            self.found.sharing.add(pid)
        return pid

    def shares(self, name, *roots):
        self.found.shares_with[self.ids[name]] = {self.ids[r] for r in roots}

    def reach(self, qs: str, suffix: str = "") -> dict | None:
        """The trees (their roots' names) each sharing provider may serve
        for the group, where its rules narrow them (None: they do not)."""
        found = self.found
        found.options, found.reach = {}, {}
        eligibility.apply(found, ask(qs))
        narrowed = found.reach.get(suffix)
        if narrowed is None:
            return None
        return {
            self.names[pid]: [self.names[r] for r in sorted(trees)]
            for pid, trees in narrowed.items()
            if trees
        }

    def options(self, qs: str, suffix: str = "") -> dict:
        """The group's options, with provider names for ids."""
        group = ask(qs).groups[suffix]
        chosen = eligibility.group_options(self.found, group)
        return {key: [self.names[pid] for pid in pids] for key, pids in chosen.items()}

    def anchors(self, qs: str, version=LATEST) -> list[str]:
        return [self.names[pid] for pid in eligibility.anchors(self.found, ask(qs, version))]


# Room


def test_the_unsuffixed_group_takes_each_class_from_providers_with_room():
    world = World()
    world.provider("host1", room={"VCPU": 4, "MEMORY_MB": 512})
    world.provider("host2", room={"VCPU": 1, "MEMORY_MB": 4096})
    world.provider("host3", room={"VCPU": 8})
    assert world.options("resources=VCPU:2,MEMORY_MB:1024") == {
        "VCPU": ["host1", "host3"],
        "MEMORY_MB": ["host2"],
    }


def test_room_honours_min_unit_max_unit_and_step_size():
    world = World()
    world.provider("small_max", room={"VCPU": 16}, max_unit=2)
    world.provider("big_min", room={"VCPU": 16}, min_unit=8)
    world.provider("steps_of_4", room={"VCPU": 16}, step=4)
    world.provider("any", room={"VCPU": 16})
    assert world.options("resources=VCPU:4") == {"VCPU": ["steps_of_4", "any"]}
    assert world.options("resources=VCPU:2") == {"VCPU": ["small_max", "any"]}


def test_a_granular_group_needs_one_provider_with_room_for_every_class():
    world = World()
    world.provider("host")
    world.provider("numa0", parent="host", room={"VCPU": 4})
    world.provider("numa1", parent="host", room={"VCPU": 4, "MEMORY_MB": 2048})
    world.provider("numa2", parent="host", room={"VCPU": 1, "MEMORY_MB": 2048})
    world.provider("numa3", parent="host", room={"VCPU": 2, "MEMORY_MB": 1024})
    qs = "resources1=VCPU:2,MEMORY_MB:1024"
    assert world.options(qs, "1") == {None: ["numa1", "numa3"]}


def test_a_resourceless_group_is_open_to_every_provider_that_qualifies():
    world = World()
    world.provider("host", room={"VCPU": 4})
    world.provider("nic1", parent="host", traits=["CUSTOM_PHYSNET1"])
    world.provider("nic2", parent="host", traits=["CUSTOM_PHYSNET2"])
    qs = "resources=VCPU:1&required_NET=CUSTOM_PHYSNET1&same_subtree=_NET"
    assert world.options(qs, "_NET") == {None: ["nic1"]}
    qs = "resources=VCPU:1&required_NET=!CUSTOM_PHYSNET1&same_subtree=_NET"
    assert world.options(qs, "_NET") == {None: ["host", "nic2"]}


# Traits


def test_forbidden_traits_rule_out_a_provider_in_every_group():
    world = World()
    world.provider("plain", room={"VCPU": 4})
    world.provider("slow", room={"VCPU": 4}, traits=["CUSTOM_SLOW"])
    assert world.options("resources=VCPU:1&required=!CUSTOM_SLOW") == {"VCPU": ["plain"]}
    assert world.options("resources1=VCPU:1&required1=!CUSTOM_SLOW", "1") == {None: ["plain"]}


def test_a_granular_groups_provider_holds_every_required_trait_itself():
    world = World()
    world.provider("fast", room={"VCPU": 4}, traits=["CUSTOM_FAST"])
    world.provider("fast_avx", room={"VCPU": 4}, traits=["CUSTOM_FAST", "HW_CPU_X86_AVX"])
    world.provider("none", room={"VCPU": 4})
    qs = "resources1=VCPU:1&required1=CUSTOM_FAST,HW_CPU_X86_AVX"
    assert world.options(qs, "1") == {None: ["fast_avx"]}


def test_a_granular_groups_any_of_traits_need_one_of_each_set():
    world = World()
    world.provider("ssd", room={"DISK_GB": 9}, traits=["CUSTOM_SSD"])
    world.provider("nvme_raid", room={"DISK_GB": 9}, traits=["CUSTOM_NVME", "CUSTOM_RAID"])
    world.provider("nvme", room={"DISK_GB": 9}, traits=["CUSTOM_NVME"])
    world.provider("hdd_raid", room={"DISK_GB": 9}, traits=["CUSTOM_HDD", "CUSTOM_RAID"])
    qs = "resources1=DISK_GB:1&required1=in:CUSTOM_SSD,CUSTOM_NVME&required1=in:CUSTOM_RAID"
    assert world.options(qs, "1") == {None: ["nvme_raid"]}
    qs = "resources1=DISK_GB:1&required1=in:CUSTOM_SSD,CUSTOM_NVME"
    assert world.options(qs, "1") == {None: ["ssd", "nvme_raid", "nvme"]}


def test_the_unsuffixed_groups_required_traits_rule_out_no_provider_alone():
    """Its providers meet them together: merge.py checks the combination."""
    world = World()
    world.provider("host", room={"VCPU": 4}, traits=["HW_CPU_X86_AVX"])
    world.provider("disk", parent="host", room={"DISK_GB": 9})
    qs = "resources=VCPU:1,DISK_GB:1&required=HW_CPU_X86_AVX"
    assert world.options(qs) == {"VCPU": ["host"], "DISK_GB": ["disk"]}


def test_only_forbidden_traits_judge_a_provider_of_the_unsuffixed_group():
    # Its any-of sets judge no provider alone: room decides, with no verdict
    # asked per provider; a forbidden trait is judged per provider.
    def named(qs: str, suffix: str = "") -> list[str]:
        return [rule.name for rule in eligibility.rules(ask(qs).groups[suffix], Found())]

    assert named("resources=VCPU:1&required=in:HW_CPU_X86_AVX,CUSTOM_GOLD&required=A") == []
    assert named(
        "resources=VCPU:1&required=in:HW_CPU_X86_AVX,CUSTOM_GOLD&required=!CUSTOM_OLD"
    ) == ["forbidden_traits"]
    granular = "resources1=VCPU:1&required1=in:HW_CPU_X86_AVX,CUSTOM_GOLD&required1=A"
    assert named(granular, "1") == ["required_traits", "any_of_traits"]


# Aggregates


def test_member_of_for_a_granular_group_is_the_providers_own():
    world = World()
    world.provider("host", aggregates=[AGG_A])
    world.provider("numa_in", parent="host", room={"VCPU": 4}, aggregates=[AGG_A])
    world.provider("numa_out", parent="host", room={"VCPU": 4})
    assert world.options(f"resources1=VCPU:1&member_of1={AGG_A}", "1") == {None: ["numa_in"]}


def test_member_of_for_the_unsuffixed_group_counts_the_roots_aggregates():
    world = World()
    world.provider("host_in", room={"VCPU": 4}, aggregates=[AGG_A])
    world.provider("child_of_in", parent="host_in", room={"VCPU": 4})
    world.provider("host_out", room={"VCPU": 4})
    world.provider("child_in", parent="host_out", room={"VCPU": 4}, aggregates=[AGG_A])
    world.provider("child_of_out", parent="host_out", room={"VCPU": 4})
    assert world.options(f"resources=VCPU:1&member_of={AGG_A}") == {
        "VCPU": ["host_in", "child_of_in", "child_in"]
    }


def test_member_of_any_of_takes_one_aggregate_of_the_list():
    world = World()
    world.provider("in_a", room={"VCPU": 4}, aggregates=[AGG_A])
    world.provider("in_b", room={"VCPU": 4}, aggregates=[AGG_B])
    world.provider("in_none", room={"VCPU": 4})
    assert world.options(f"resources=VCPU:1&member_of=in:{AGG_A},{AGG_B}") == {
        "VCPU": ["in_a", "in_b"]
    }


def test_repeated_member_of_is_met_by_the_provider_or_its_root_alone():
    """Every member_of by the provider itself, or every one by its root: one
    each does not do (as the code decides today)."""
    world = World()
    world.provider("root_a", aggregates=[AGG_A])
    world.provider("child_b", parent="root_a", room={"VCPU": 4}, aggregates=[AGG_B])
    world.provider("root_ab", aggregates=[AGG_A, AGG_B])
    world.provider("child", parent="root_ab", room={"VCPU": 4})
    world.provider("both", room={"VCPU": 4}, aggregates=[AGG_A, AGG_B])
    qs = f"resources=VCPU:1&member_of={AGG_A}&member_of={AGG_B}"
    assert world.options(qs) == {"VCPU": ["child", "both"]}


def test_a_forbidden_aggregate_on_the_provider_or_for_the_unsuffixed_group_its_root():
    world = World()
    world.provider("host_in", room={"VCPU": 4}, aggregates=[AGG_A])
    world.provider("child_of_in", parent="host_in", room={"VCPU": 4})
    world.provider("host_out", room={"VCPU": 4})
    world.provider("child_in", parent="host_out", room={"VCPU": 4}, aggregates=[AGG_A])
    world.provider("child_of_out", parent="host_out", room={"VCPU": 4})
    assert world.options(f"resources=VCPU:1&member_of=!{AGG_A}") == {
        "VCPU": ["host_out", "child_of_out"]
    }
    assert world.options(f"resources1=VCPU:1&member_of1=!{AGG_A}", "1") == {
        None: ["child_of_in", "host_out", "child_of_out"]
    }


def test_a_sharing_provider_in_its_own_tree_counts_its_roots_aggregates():
    """As every provider of its tree does, for the unsuffixed group: nfs_in
    is in no aggregate of its own, its root is in A (upstream's answer)."""
    world = World()
    world.provider("rack", aggregates=[AGG_A])
    world.provider("nfs_in", parent="rack", room={"DISK_GB": 99}, traits=[SHARING])
    world.provider("nfs_own", room={"DISK_GB": 99}, traits=[SHARING], aggregates=[AGG_A])
    assert world.options(f"resources=DISK_GB:1&member_of={AGG_A}") == {
        "DISK_GB": ["nfs_in", "nfs_own"]
    }
    # Its root in a forbidden aggregate keeps it from its own tree, and it
    # shares with no other tree.
    assert world.options(f"resources=DISK_GB:1&member_of=!{AGG_A}") == {"DISK_GB": []}


def shared_rack() -> World:
    """nfs, a sharing child of rack (in A), is itself in B, as are host_b
    and host_bz (also in Z): it shares with their trees."""
    world = World()
    world.provider("rack", aggregates=[AGG_A])
    world.provider("nfs", parent="rack", room={"DISK_GB": 99}, traits=[SHARING], aggregates=[AGG_B])
    world.provider("host_b", room={"VCPU": 4}, aggregates=[AGG_B])
    world.provider("host_bz", room={"VCPU": 4}, aggregates=[AGG_B, AGG_Z])
    world.shares("nfs", "rack", "host_b", "host_bz")
    return world


def test_a_sharing_provider_serves_other_trees_by_its_own_aggregates_alone():
    world = shared_rack()
    assert world.reach(f"resources=DISK_GB:1&member_of={AGG_A}") == {"nfs": ["rack"]}
    assert world.reach(f"resources=DISK_GB:1&member_of={AGG_B}") == {
        "nfs": ["rack", "host_b", "host_bz"]
    }


def test_a_forbidden_aggregate_on_the_root_of_the_tree_served_keeps_a_sharing_provider_out():
    world = shared_rack()
    assert world.reach(f"resources=DISK_GB:1&member_of=!{AGG_Z}") == {"nfs": ["rack", "host_b"]}
    assert world.reach(f"resources=DISK_GB:1&member_of=!{AGG_A}") == {"nfs": ["host_b", "host_bz"]}


def test_in_tree_keeps_a_sharing_provider_of_the_unsuffixed_group_in_its_own_tree():
    world = shared_rack()
    rack, host = uuid_of(world.ids["rack"]), uuid_of(world.ids["host_b"])
    assert world.reach(f"resources=DISK_GB:1&in_tree={rack}") == {"nfs": ["rack"]}
    assert world.reach(f"resources=DISK_GB:1&in_tree={host}") == {}
    # A granular group's sharing provider serves every tree it shares with.
    assert world.reach(f"resources1=DISK_GB:1&in_tree1={rack}", "1") is None


# in_tree


def test_in_tree_keeps_the_whole_tree_of_the_named_provider():
    world = World()
    world.provider("host1", room={"VCPU": 4})
    numa = world.provider("numa", parent="host1", room={"VCPU": 4})
    world.provider("host2", room={"VCPU": 4})
    assert world.options(f"resources=VCPU:1&in_tree={uuid_of(numa)}") == {"VCPU": ["host1", "numa"]}


def test_in_tree_leaves_out_sharing_providers_of_other_trees():
    world = World()
    host = world.provider("host", room={"VCPU": 4})
    world.provider("nfs", room={"DISK_GB": 99}, traits=[SHARING])
    qs = f"resources=VCPU:1,DISK_GB:1&in_tree={uuid_of(host)}"
    assert world.options(qs) == {"VCPU": ["host"], "DISK_GB": []}


def test_in_tree_naming_no_loaded_provider_gives_nothing():
    world = World()
    world.provider("host", room={"VCPU": 4})
    assert world.options(f"resources=VCPU:1&in_tree={uuid_of(99)}") == {"VCPU": []}


# Request-wide: the anchors


def test_the_anchors_are_every_tree_in_id_order():
    world = World()
    world.provider("host1")
    world.provider("numa", parent="host1", room={"VCPU": 4})
    world.provider("host2", room={"VCPU": 4})
    assert world.anchors("resources=VCPU:1") == ["host1", "host2"]


def test_root_required_and_forbidden_are_checked_on_the_root_only():
    world = World()
    world.provider("fast", traits=["CUSTOM_FAST"])
    world.provider("fast_off", traits=["CUSTOM_FAST", "CUSTOM_OFF"])
    world.provider("slow")
    world.provider("fast_child", parent="slow", traits=["CUSTOM_FAST"])
    assert world.anchors("resources=VCPU:1&root_required=CUSTOM_FAST") == ["fast", "fast_off"]
    assert world.anchors("resources=VCPU:1&root_required=!CUSTOM_OFF") == ["fast", "slow"]
    qs = "resources=VCPU:1&root_required=CUSTOM_FAST,!CUSTOM_OFF"
    assert world.anchors(qs) == ["fast"]


def test_apply_fills_the_options_of_every_group_and_the_anchors():
    world = World()
    world.provider("host", room={"MEMORY_MB": 4096}, traits=["CUSTOM_OFF"])
    world.provider("numa", parent="host", room={"VCPU": 4})
    world.provider("other", room={"MEMORY_MB": 4096, "VCPU": 4})
    wanted = ask("resources=MEMORY_MB:1024&resources1=VCPU:1&root_required=!CUSTOM_OFF")
    eligibility.apply(world.found, wanted)
    assert world.found.options == {"": {"MEMORY_MB": [1, 3]}, "1": {None: [2, 3]}}
    assert world.found.roots == [3]


# root_member_of (1.40): the root's aggregates decide, as root_required its traits.

ROOT_MEMBER_OF = Version(1, 40)
AZ_1, AZ_2 = AGG_A, AGG_B


def zones() -> World:
    """host1 in AZ_1, host2 in AZ_2, host3 in both, host4 in none but its
    NUMA child in AZ_1; storage shared with all, in AZ_2 only."""
    world = World()
    world.provider("host1", room={"VCPU": 4}, aggregates=[AZ_1])
    world.provider("host2", room={"VCPU": 4}, aggregates=[AZ_2])
    world.provider("host3", room={"VCPU": 4}, aggregates=[AZ_1, AZ_2])
    world.provider("host4")
    world.provider("numa4", parent="host4", room={"VCPU": 4}, aggregates=[AZ_1])
    world.provider("storage", room={"DISK_GB": 100}, traits=[SHARING], aggregates=[AZ_2])
    return world


def test_root_member_of_keeps_the_trees_whose_root_is_in_the_aggregate():
    anchors = zones().anchors(f"resources=VCPU:1&root_member_of={AZ_1}", ROOT_MEMBER_OF)
    assert anchors == ["host1", "host3"]  # not host4: its child's aggregate does not count


def test_root_member_of_in_takes_roots_in_any_of_the_aggregates():
    anchors = zones().anchors(f"resources=VCPU:1&root_member_of=in:{AZ_1},{AZ_2}", ROOT_MEMBER_OF)
    assert anchors == ["host1", "host2", "host3", "storage"]


def test_a_forbidden_root_aggregate_leaves_out_the_trees_whose_root_is_in_it():
    world = zones()
    qs = f"resources=VCPU:1&root_member_of=!{AZ_1}"
    assert world.anchors(qs, ROOT_MEMBER_OF) == ["host2", "host4", "storage"]
    qs = f"resources=VCPU:1&root_member_of=!in:{AZ_1},{AZ_2}"
    assert world.anchors(qs, ROOT_MEMBER_OF) == ["host4"]


def test_repeated_root_member_of_must_all_hold():
    world = zones()
    qs = f"resources=VCPU:1&root_member_of={AZ_1}&root_member_of={AZ_2}"
    assert world.anchors(qs, ROOT_MEMBER_OF) == ["host3"]
    qs = f"resources=VCPU:1&root_member_of=in:{AZ_1},{AZ_2}&root_member_of=!{AZ_2}"
    assert world.anchors(qs, ROOT_MEMBER_OF) == ["host1"]


def test_root_member_of_and_root_required_both_hold():
    world = zones()
    world.found.traits[world.ids["host3"]] = frozenset({"CUSTOM_FAST"})
    qs = f"resources=VCPU:1&root_member_of={AZ_1}&root_required=!CUSTOM_FAST"
    assert world.anchors(qs, ROOT_MEMBER_OF) == ["host1"]


def test_sharing_providers_still_serve_the_trees_root_member_of_keeps():
    world = zones()
    wanted = ask(f"resources=VCPU:1,DISK_GB:10&root_member_of={AZ_1}", ROOT_MEMBER_OF)
    eligibility.apply(world.found, wanted)
    names = world.names
    assert [names[pid] for pid in world.found.roots] == ["host1", "host3"]
    # The storage is in AZ_2 only, yet it may serve the AZ_1 hosts' DISK_GB.
    assert [names[pid] for pid in world.found.options[""]["DISK_GB"]] == ["storage"]
    assert [names[pid] for pid in world.found.options[""]["VCPU"]] == [
        "host1",
        "host2",
        "host3",
        "numa4",
    ]


# What a shape of the cloud keeps across requests


def test_what_the_shape_keeps_across_requests_is_keyed_on_what_their_rules_ask():
    """The providers each group's rules allow and the anchors of a search
    of the first trees are kept in the shape of the cloud, across requests,
    under what the rules ask (eligibility.asked): on one shape asked many
    random requests, each is what a fresh shape gives."""
    rng = random.Random(2929)
    asked = 0
    for _ in range(60):
        cloud = random_cloud(rng)
        shape = cloud.world(CLASSES)
        for _ in range(10):
            try:
                req = ask(random_request(rng, cloud))
            except Exception:  # a combination parse refuses
                continue
            fresh = dataclasses.replace(shape, _memo={})
            kept, new = cloud.found(req, shape), cloud.found(req, fresh)
            assert (kept.options, kept.reach, kept.roots) == (new.options, new.reach, new.roots)
            wanted, _beyond = rooms.weighed(req, shape.class_ids)
            for first in (1, 2):
                assert rooms.window(shape, req, wanted, first) == rooms.window(
                    fresh, req, wanted, first
                ), req
            asked += 1
    assert asked > 250 and len(shape._memo) > 5, (asked, len(shape._memo))
