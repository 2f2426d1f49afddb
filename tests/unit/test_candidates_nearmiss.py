"""candidates.explain.nearmiss on hand-built clouds (tests/support/clouds.py), no database.

What is proven: the words and details of each rule's fail: room
(capacity with its numbers, max_unit, min_unit, step_size, amounts of
several groups on one provider summed, no inventory), a granular group's
required, any-of and forbidden traits, member_of and forbidden aggregates
on the provider or, for the unsuffixed group, via its root, in_tree,
root_required / root_forbidden / root_member_of, isolation (group_policy
and isolate=), same_subtree and its negated groups, the unsuffixed group's
traits over its providers, and the conflict of two fails; the greedy
choice (a provider with fewer shortfalls, one an isolated group does not
use yet when another is as good); the ranking (fewest fails first, then
the oldest root), ``limit`` and none at all for 0, trees with candidates
left out. On random clouds, every tree without a candidate has something
to fix, and fixing each fail (the data it names, or dropping the rule it
names) gives the tree a candidate, as the module promises.
"""

from __future__ import annotations

import dataclasses
import random

from microversion_parse import Version

from placement_svc.candidates import merge, request
from placement_svc.candidates.explain import nearmiss
from tests.support.clouds import (
    AGG1,
    AGG2,
    AGG3,
    Cloud,
    Stock,
    ask,
    inventory,
    random_cloud,
    random_request,
)


def ref(cloud: Cloud, name: str) -> dict[str, str]:
    return {"uuid": cloud.uuid(name), "name": name}


def misses(cloud: Cloud, qs: str, served=(), limit: int = 5, version=None) -> list[dict]:
    req = ask(qs) if version is None else ask(qs, version)
    return nearmiss.near_misses(cloud.whole(req), req, {cloud.ids[n] for n in served}, limit)


def fails(cloud: Cloud, qs: str, root: str | None = None, **kwargs) -> list[dict]:
    """The fails of one tree's near miss (the only one, or ``root``'s)."""
    found = misses(cloud, qs, **kwargs)
    if root is None:
        (miss,) = found
    else:
        (miss,) = [m for m in found if m["root"]["name"] == root]
    return miss["fails"]


def texts(cloud: Cloud, qs: str, root: str | None = None, **kwargs) -> list[str]:
    return [fail["text"] for fail in fails(cloud, qs, root, **kwargs)]


def one_host(stock=None, traits=(), aggregates=()) -> Cloud:
    cloud = Cloud()
    cloud.provider("CN", stock=stock or {"VCPU": 8}, traits=traits, aggregates=aggregates)
    return cloud


# Room


def numbers(cloud: Cloud, name: str, rc: str, groups: list[str], needs: int) -> dict:
    """A room fail's details: where, and the whole inventory."""
    stock: Stock = cloud.data.stock[(cloud.ids[name], rc)]
    return {
        "provider": ref(cloud, name),
        "groups": groups,
        "resource_class": rc,
        "needs": needs,
        "free": stock.free if stock.free != int(stock.free) else int(stock.free),
        "total": stock.total,
        "reserved": stock.reserved,
        "allocation_ratio": stock.allocation_ratio,
        "used": stock.used,
        "min_unit": stock.min_unit,
        "max_unit": stock.max_unit,
        "step_size": stock.step_size,
    }


def test_capacity_says_the_numbers():
    cloud = one_host({"VCPU": inventory(8, reserved=1, ratio=1.5, used=8)})  # 2.5 free
    assert fails(cloud, "resources=VCPU:4") == [
        {
            "rule": "capacity",
            "text": "VCPU on CN: needs 4, 2.5 free (total 8, reserved 1, ratio 1.5, used 8)",
            **numbers(cloud, "CN", "VCPU", [""], 4),
        }
    ]
    assert fails(cloud, "resources=VCPU:4")[0]["free"] == 2.5


def test_capacity_sums_the_amounts_of_the_groups_on_one_provider():
    cloud = one_host({"VCPU": inventory(8, used=4)})
    assert fails(cloud, "resources=VCPU:2&resources_G=VCPU:3") == [
        {
            "rule": "capacity",
            "text": "VCPU on CN: needs 5, 4 free (total 8, reserved 0, ratio 1.0, used 4)",
            **numbers(cloud, "CN", "VCPU", ["", "_G"], 5),
        }
    ]


def test_max_unit_min_unit_and_step_size():
    cloud = one_host({"VCPU": inventory(8, max_unit=2)})
    assert fails(cloud, "resources=VCPU:4") == [
        {
            "rule": "max_unit",
            "text": "VCPU on CN: needs 4, max_unit 2",
            **numbers(cloud, "CN", "VCPU", [""], 4),
        }
    ]
    cloud = one_host({"VCPU": inventory(8, min_unit=3)})
    assert fails(cloud, "resources=VCPU:2") == [
        {
            "rule": "min_unit",
            "text": "VCPU on CN: needs 2, min_unit 3",
            **numbers(cloud, "CN", "VCPU", [""], 2),
        }
    ]
    cloud = one_host({"VCPU": inventory(8, step=4)})
    assert fails(cloud, "resources=VCPU:6") == [
        {
            "rule": "step_size",
            "text": "VCPU on CN: needs 6, step_size 4",
            **numbers(cloud, "CN", "VCPU", [""], 6),
        }
    ]


def test_every_unit_rule_of_several_amounts_names_the_one_that_breaks_it():
    # 4 + 2 on a step of 4, min_unit 3, max_unit 5 and 5 free: all four fail.
    cloud = one_host({"VCPU": inventory(8, min_unit=3, max_unit=5, step=4, used=3)})
    assert texts(cloud, "resources=VCPU:4&resources_G=VCPU:2") == [
        "VCPU on CN: needs 6, 5 free (total 8, reserved 0, ratio 1.0, used 3)",
        "VCPU on CN: needs 6, max_unit 5",
        "VCPU on CN: needs 2, min_unit 3",
        "VCPU on CN: needs 2, step_size 4",
    ]


def test_no_inventory():
    cloud = one_host()
    assert fails(cloud, "resources=VCPU:1,DISK_GB:10") == [
        {
            "rule": "no_inventory",
            "text": "no DISK_GB inventory on CN",
            "provider": ref(cloud, "CN"),
            "groups": [""],
            "resource_class": "DISK_GB",
            "needs": 10,
        }
    ]


# Traits and aggregates of one provider


def test_a_granular_groups_required_any_of_and_forbidden_traits():
    cloud = one_host(traits=("CUSTOM_B",))
    where = {"provider": ref(cloud, "CN"), "groups": ["_G"]}
    qs = "resources_G=VCPU:1&required_G=CUSTOM_A,!CUSTOM_B&required_G=in:CUSTOM_D,CUSTOM_C"
    assert fails(cloud, qs) == [
        {
            "rule": "required_trait",
            "text": "missing trait CUSTOM_A on CN",
            **where,
            "trait": "CUSTOM_A",
        },
        {
            "rule": "any_of_traits",
            "text": "missing one of traits CUSTOM_C, CUSTOM_D on CN",
            **where,
            "traits": ["CUSTOM_C", "CUSTOM_D"],
        },
        {
            "rule": "forbidden_trait",
            "text": "forbidden trait CUSTOM_B on CN",
            **where,
            "trait": "CUSTOM_B",
        },
    ]


def test_member_of_and_forbidden_aggregates_on_the_provider():
    cloud = one_host(aggregates=(AGG3,))
    where = {"provider": ref(cloud, "CN"), "groups": ["_G"]}
    qs = f"resources_G=VCPU:1&member_of_G={AGG1}&member_of_G=in:{AGG3},{AGG2}"
    assert fails(cloud, qs) == [
        {"rule": "member_of", "text": f"CN not in aggregate {AGG1}", **where, "aggregates": [AGG1]}
    ]
    qs = f"resources_G=VCPU:1&member_of_G=in:{AGG2},{AGG1}&member_of_G=!{AGG3}"
    assert fails(cloud, qs) == [
        {
            "rule": "member_of",
            "text": f"CN not in any of aggregates {AGG1}, {AGG2}",
            **where,
            "aggregates": [AGG1, AGG2],
        },
        {
            "rule": "forbidden_aggregate",
            "text": f"CN in forbidden aggregate {AGG3}",
            **where,
            "aggregate": AGG3,
        },
    ]


def rooted_child() -> Cloud:
    """R in AGG1; its child C, in no aggregate, holds the VCPU."""
    cloud = Cloud()
    cloud.provider("R", aggregates=(AGG1,))
    cloud.provider("C", "R", stock={"VCPU": 8})
    return cloud


def test_the_unsuffixed_groups_member_of_names_the_root_when_it_lacks_less():
    cloud = rooted_child()
    qs = f"resources=VCPU:1&member_of={AGG1}&member_of={AGG2}"
    assert fails(cloud, qs) == [
        {
            "rule": "member_of",
            "text": f"R not in aggregate {AGG2}",
            "provider": ref(cloud, "R"),
            "groups": [""],
            "aggregates": [AGG2],
        }
    ]
    # a tie names the provider itself
    qs = f"resources=VCPU:1&member_of={AGG2}"
    assert texts(cloud, qs) == [f"C not in aggregate {AGG2}"]


def test_the_unsuffixed_groups_forbidden_aggregate_on_the_root():
    cloud = rooted_child()
    assert fails(cloud, f"resources=VCPU:1&member_of=!{AGG1}") == [
        {
            "rule": "forbidden_aggregate",
            "text": f"R in forbidden aggregate {AGG1}",
            "provider": ref(cloud, "R"),
            "groups": [""],
            "aggregate": AGG1,
        }
    ]


def test_a_granular_group_and_a_sharing_provider_do_not_count_the_root():
    # R (in AGG1, no VCPU) has a forbidden trait: two fails, so the greedy
    # walk takes the child, whose one fail is the aggregate it lacks itself.
    cloud = Cloud()
    cloud.provider("R", traits=("CUSTOM_Z",), aggregates=(AGG1,))
    cloud.provider("C", "R", stock={"VCPU": 8})
    assert texts(cloud, f"resources_G=VCPU:1&member_of_G={AGG1}&required_G=!CUSTOM_Z") == [
        f"C not in aggregate {AGG1}"
    ]
    # SS serves its own tree (R in AGG1: a candidate), not R2's: serving
    # another tree, neither its root's aggregates nor R2's count.
    cloud = Cloud()
    cloud.provider("R", aggregates=(AGG1,))
    cloud.provider("R2", traits=("CUSTOM_Z",), aggregates=(AGG1, AGG2))
    cloud.sharing("SS", {"VCPU": 8}, ["R2"], parent="R", aggregates=(AGG2,))
    qs = f"resources=VCPU:1&member_of={AGG1}&required=!CUSTOM_Z"
    assert [m["root"]["name"] for m in misses(cloud, qs, served=["R"])] == ["R2"]
    assert texts(cloud, qs, served=["R"]) == [f"SS not in aggregate {AGG1}"]


def test_a_sharing_provider_serving_another_tree_needs_its_root_in_no_forbidden_aggregate():
    cloud = Cloud()
    cloud.provider("R2", traits=("CUSTOM_Z",), aggregates=(AGG2, AGG3))
    cloud.sharing("SS", {"VCPU": 8}, ["R2"], aggregates=(AGG2,))
    qs = f"resources=VCPU:1&member_of=!{AGG3}&required=!CUSTOM_Z&resources_G=VCPU:1"
    assert fails(cloud, qs, root="R2", served=["SS"]) == [
        {
            "rule": "forbidden_aggregate",
            "text": f"R2 in forbidden aggregate {AGG3}",
            "provider": ref(cloud, "R2"),
            "groups": [""],
            "aggregate": AGG3,
        }
    ]


def test_in_tree_keeps_a_sharing_provider_of_the_unsuffixed_group_home():
    cloud = Cloud()
    cloud.provider("R2", stock={"DISK_GB": 50}, aggregates=(AGG2,))
    cloud.sharing("SS", {"VCPU": 8}, ["R2"], aggregates=(AGG2,))
    qs = f"resources=VCPU:1&in_tree={cloud.uuid('SS')}&resources_G=DISK_GB:40"
    assert fails(cloud, qs, root="R2") == [
        {
            "rule": "in_tree",
            "text": f"SS serves no other tree under in_tree {cloud.uuid('SS')}",
            "provider": ref(cloud, "SS"),
            "groups": [""],
            "in_tree": cloud.uuid("SS"),
        }
    ]


def test_in_tree():
    cloud = Cloud()
    cloud.provider("T1", stock={"VCPU": 8})
    cloud.provider("T2", stock={"VCPU": 8})
    qs = f"resources=VCPU:1&in_tree={cloud.uuid('T2')}"
    assert fails(cloud, qs, served=["T2"]) == [
        {
            "rule": "in_tree",
            "text": f"T1 not in tree {cloud.uuid('T2')}",
            "provider": ref(cloud, "T1"),
            "groups": [""],
            "in_tree": cloud.uuid("T2"),
        }
    ]


def test_a_fail_two_groups_share_is_said_once():
    cloud = Cloud()
    cloud.provider("T1", stock={"VCPU": 8})
    cloud.provider("T2", stock={"VCPU": 8})
    tree = cloud.uuid("T2")
    qs = f"resources_A=VCPU:1&in_tree_A={tree}&resources_B=VCPU:1&in_tree_B={tree}"
    found = fails(cloud, qs, served=["T2"])
    assert [fail["text"] for fail in found] == [f"T1 not in tree {tree}"]
    # One fail, of every group it is of: dropping in_tree_A alone would
    # leave in_tree_B broken.
    assert found[0]["groups"] == ["_A", "_B"]


# Request-wide rules on the root


def test_root_required_root_forbidden_and_root_member_of():
    cloud = one_host(traits=("CUSTOM_B",), aggregates=(AGG3,))
    on = {"provider": ref(cloud, "CN")}
    qs = (
        "resources=VCPU:1&root_required=CUSTOM_A,!CUSTOM_B"
        f"&root_member_of=in:{AGG2},{AGG1}&root_member_of=!{AGG3}"
    )
    assert fails(cloud, qs) == [
        {
            "rule": "root_required",
            "text": "root CN lacks trait CUSTOM_A (root_required)",
            **on,
            "trait": "CUSTOM_A",
        },
        {
            "rule": "root_forbidden",
            "text": "root CN has forbidden trait CUSTOM_B (root_required)",
            **on,
            "trait": "CUSTOM_B",
        },
        {
            "rule": "root_member_of",
            "text": f"root CN not in any of aggregates {AGG1}, {AGG2} (root_member_of)",
            **on,
            "aggregates": [AGG1, AGG2],
        },
        {
            "rule": "root_forbidden_aggregate",
            "text": f"root CN in forbidden aggregate {AGG3} (root_member_of)",
            **on,
            "aggregate": AGG3,
        },
    ]
    assert texts(cloud, f"resources=VCPU:1&root_member_of={AGG1}") == [
        f"root CN not in aggregate {AGG1} (root_member_of)"
    ]


def test_root_rules_read_the_root_not_the_provider_serving():
    cloud = Cloud()
    cloud.provider("R")
    cloud.provider("C", "R", stock={"VCPU": 8}, traits=("CUSTOM_A",), aggregates=(AGG1,))
    assert texts(cloud, f"resources=VCPU:1&root_required=CUSTOM_A&root_member_of={AGG1}") == [
        "root R lacks trait CUSTOM_A (root_required)",
        f"root R not in aggregate {AGG1} (root_member_of)",
    ]


# Rules of several groups


def test_isolation_names_the_groups_that_would_share():
    cloud = one_host()
    assert fails(cloud, "resources_A=VCPU:1&resources_B=VCPU:1&group_policy=isolate") == [
        {
            "rule": "isolate",
            "text": "groups '_A' and '_B' would share CN (group_policy=isolate)",
            "provider": ref(cloud, "CN"),
            "groups": ["_A", "_B"],
        }
    ]
    qs = "resources_A=VCPU:1&resources_B=VCPU:1&resources_C=VCPU:1&isolate=_C,_A"
    assert texts(cloud, qs) == ["groups '_A' and '_B' and '_C' would share CN (isolate=_A,_C)"]
    # groups that are not isolated may share
    assert misses(cloud, "resources_A=VCPU:1&resources_B=VCPU:1&group_policy=none") == [
        {"root": ref(cloud, "CN"), "fails": []}
    ]


def fpga_host() -> Cloud:
    """CN; NUMA0 (VCPU) with FPGA F0; NUMA1 (VCPU) with FPGA F1."""
    cloud = Cloud()
    cloud.provider("CN")
    cloud.provider("NUMA0", "CN", stock={"VCPU": 4})
    cloud.provider("F0", "NUMA0", stock={"CUSTOM_FPGA": 1})
    cloud.provider("NUMA1", "CN", stock={"VCPU": 4}, traits=("CUSTOM_X",))
    cloud.provider("F1", "NUMA1", stock={"CUSTOM_FPGA": 1})
    return cloud


def test_same_subtree_names_the_providers_that_are_not_in_one():
    # VCPU only on NUMA0, the trait only on F1: no subtree holds both.
    cloud = Cloud()
    cloud.provider("CN")
    cloud.provider("NUMA0", "CN", stock={"VCPU": 4})
    cloud.provider("F0", "NUMA0", stock={"CUSTOM_FPGA": 1})
    cloud.provider("NUMA1", "CN")
    cloud.provider("F1", "NUMA1", stock={"CUSTOM_FPGA": 1}, traits=("CUSTOM_X",))
    qs = "resources_C=VCPU:1&resources_F=CUSTOM_FPGA:1&required_F=CUSTOM_X&same_subtree=_C,_F"
    assert fails(cloud, qs) == [
        {
            "rule": "same_subtree",
            "text": "same_subtree=_C,_F: NUMA0, F1 are not in one subtree",
            "groups": ["_C", "_F"],
            "providers": [ref(cloud, "NUMA0"), ref(cloud, "F1")],
        }
    ]


def test_a_negated_group_in_the_subtree():
    cloud = Cloud()
    cloud.provider("CN")
    cloud.provider("NUMA0", "CN", stock={"VCPU": 4})
    cloud.provider("F0", "NUMA0", stock={"CUSTOM_FPGA": 1})
    qs = "resources_C=VCPU:1&resources_F=CUSTOM_FPGA:1&same_subtree=_C,!_F"
    assert fails(cloud, qs) == [
        {
            "rule": "same_subtree_apart",
            "text": "same_subtree=_C,!_F: F0 (group '_F') is in the subtree of NUMA0",
            "groups": ["_C"],
            "negated": "_F",
            "provider": ref(cloud, "F0"),
        }
    ]


def test_a_negated_group_is_not_judged_when_the_positive_ones_have_no_subtree():
    cloud = fpga_host()
    qs = "resources_A=CUSTOM_FPGA:1&resources_B=CUSTOM_FPGA:1&resources_C=VCPU:1"
    qs += "&same_subtree=_A,_B,!_C"
    assert [fail["rule"] for fail in fails(cloud, qs)] == ["same_subtree"]


def test_the_unsuffixed_groups_traits_over_its_providers():
    cloud = Cloud()
    cloud.provider("CN", stock={"VCPU": 4}, traits=("CUSTOM_A",))
    cloud.provider("PF", "CN", stock={"SRIOV_NET_VF": 4}, traits=("CUSTOM_C",))
    where = {"provider": ref(cloud, "CN"), "groups": [""]}
    qs = "resources=VCPU:1,SRIOV_NET_VF:1&required=CUSTOM_A,CUSTOM_B&required=in:CUSTOM_D,CUSTOM_E"
    assert fails(cloud, qs) == [
        {
            "rule": "required_trait",
            "text": "missing trait CUSTOM_B on any of CN, PF (the unsuffixed group's providers)",
            **where,
            "trait": "CUSTOM_B",
        },
        {
            "rule": "any_of_traits",
            "text": (
                "missing one of traits CUSTOM_D, CUSTOM_E on any of CN, PF "
                "(the unsuffixed group's providers)"
            ),
            **where,
            "traits": ["CUSTOM_D", "CUSTOM_E"],
        },
    ]
    # met together: PF's trait counts for the group
    assert misses(cloud, "resources=VCPU:1,SRIOV_NET_VF:1&required=CUSTOM_A,CUSTOM_C") == [
        {"root": ref(cloud, "CN"), "fails": []}
    ]
    assert texts(cloud, "resources=VCPU:1&required=CUSTOM_C") == ["missing trait CUSTOM_C on CN"]


# Conflicts


def test_a_trait_one_group_needs_and_another_forbids_on_one_provider_is_a_conflict():
    cloud = one_host()
    qs = (
        "resources_A=VCPU:1&required_A=CUSTOM_X&resources_B=VCPU:1&required_B=!CUSTOM_X"
        "&group_policy=none"
    )
    # Adding CUSTOM_X to CN (the only fix of the data) would break
    # required_B=!CUSTOM_X: no data fixes both, and the near miss says so.
    assert texts(cloud, qs) == [
        "missing trait CUSTOM_X on CN",
        "CN would gain trait CUSTOM_X for one rule and break another",
    ]
    assert fails(cloud, qs)[-1] == {
        "rule": "conflict",
        "text": "CN would gain trait CUSTOM_X for one rule and break another",
        "provider": ref(cloud, "CN"),
        "trait": "CUSTOM_X",
    }


def test_taking_away_the_only_trait_of_an_any_of_list_another_group_needs_is_a_conflict():
    cloud = one_host(traits=("CUSTOM_X",))
    qs = (
        "resources_A=VCPU:1&required_A=!CUSTOM_X&resources_B=VCPU:1&required_B=in:CUSTOM_X,CUSTOM_Y"
        "&group_policy=none"
    )
    assert texts(cloud, qs) == [
        "forbidden trait CUSTOM_X on CN",
        "CN would lose trait CUSTOM_X for one rule and break another",
    ]


def test_a_fix_on_another_provider_is_no_conflict():
    cloud = Cloud()
    cloud.provider("CN", stock={"VCPU": 8}, traits=("CUSTOM_X",))
    cloud.provider("NUMA", parent="CN", stock={"VCPU": 8})
    qs = (
        "resources_A=VCPU:1&required_A=CUSTOM_X&resources_B=VCPU:1&required_B=!CUSTOM_X"
        "&group_policy=isolate&required_A=CUSTOM_Z"
    )
    assert "conflict" not in [fail["rule"] for fail in fails(cloud, qs)]


# The greedy choice


def test_the_greedy_choice_takes_the_provider_with_fewer_shortfalls():
    cloud = Cloud()
    cloud.provider("R")
    cloud.provider("P1", "R", stock={"VCPU": inventory(2, max_unit=8)})
    cloud.provider("P2", "R", stock={"VCPU": inventory(2, max_unit=8)}, traits=("CUSTOM_A",))
    # R: no VCPU, no trait; P1: short and no trait; P2: short only.
    assert texts(cloud, "resources_G=VCPU:4&required_G=CUSTOM_A") == [
        "VCPU on P2: needs 4, 2 free (total 2, reserved 0, ratio 1.0, used 0)"
    ]


def test_the_greedy_choice_keeps_an_isolated_group_apart_when_it_costs_nothing():
    cloud = Cloud()
    cloud.provider("R")
    cloud.provider("P1", "R", stock={"VCPU": 8})
    cloud.provider("P2", "R", stock={"VCPU": 8})
    qs = "resources_A=VCPU:1&required_A=CUSTOM_X&resources_B=VCPU:1&required_B=CUSTOM_X"
    assert texts(cloud, qs + "&group_policy=isolate") == [
        "missing trait CUSTOM_X on P1",
        "missing trait CUSTOM_X on P2",
    ]
    # not isolated: both on P1, and the one fix is said once
    assert texts(cloud, qs + "&group_policy=none") == ["missing trait CUSTOM_X on P1"]


def test_the_greedy_choice_shares_a_provider_rather_than_break_more():
    # For _B, sharing P1 with the isolated _A is one fail; R and P2 would
    # be two each (no VCPU, a forbidden trait).
    cloud = Cloud()
    cloud.provider("R", traits=("CUSTOM_Z",))
    cloud.provider("P1", "R", stock={"VCPU": 8})
    cloud.provider("P2", "R", stock={"DISK_GB": 8}, traits=("CUSTOM_Z",))
    qs = "resources_A=VCPU:1&resources_B=VCPU:1&required_B=!CUSTOM_Z&isolate=_A"
    assert texts(cloud, qs) == ["groups '_A' and '_B' would share P1 (isolate=_A)"]


def test_the_greedy_choice_counts_room_the_groups_before_took():
    # _A takes P1's room: _B goes to P2, which has room left.
    cloud = Cloud()
    cloud.provider("R", traits=("CUSTOM_X",))
    cloud.provider("P1", "R", stock={"VCPU": 4})
    cloud.provider("P2", "R", stock={"VCPU": 4})
    qs = "resources_A=VCPU:4&resources_B=VCPU:4&required_H=CUSTOM_X&same_subtree=_A,_H"
    qs += "&same_subtree=_B,_A&group_policy=none"
    found = fails(cloud, qs)
    assert [fail["text"] for fail in found] == ["same_subtree=_A,_B: P1, P2 are not in one subtree"]


# Ranking, limit, trees with candidates


def ranked_cloud() -> Cloud:
    """T1 breaks two rules, T2 and T3 one each, T4 none (it has candidates)."""
    cloud = Cloud()
    cloud.provider("T1", stock={"VCPU": inventory(1, max_unit=8)})
    cloud.provider("T2", stock={"VCPU": 8})
    cloud.provider("T3", stock={"VCPU": 8})
    cloud.provider("T4", stock={"VCPU": 8}, traits=("CUSTOM_A",))
    return cloud


def test_fewest_fails_first_then_the_oldest_root():
    cloud = ranked_cloud()
    qs = "resources=VCPU:2&required=CUSTOM_A"
    found = misses(cloud, qs, served=["T4"])
    assert [(m["root"]["name"], len(m["fails"])) for m in found] == [
        ("T2", 1),
        ("T3", 1),
        ("T1", 2),
    ]
    assert [m["root"] for m in found] == [ref(cloud, n) for n in ("T2", "T3", "T1")]


def test_limit_and_none_at_all():
    cloud = ranked_cloud()
    qs = "resources=VCPU:2&required=CUSTOM_A"
    assert [m["root"]["name"] for m in misses(cloud, qs, served=["T4"], limit=2)] == ["T2", "T3"]
    assert misses(cloud, qs, served=["T4"], limit=0) == []
    assert misses(cloud, qs, served=["T4"], limit=-1) == []


def test_trees_with_candidates_are_left_out():
    cloud = ranked_cloud()
    qs = "resources=VCPU:2&required=CUSTOM_A"
    assert [m["root"]["name"] for m in misses(cloud, qs, served=["T2", "T4"])] == ["T3", "T1"]
    # T4 is not among those that have candidates: it is listed, with nothing to fix
    assert misses(cloud, qs, served=["T1", "T2", "T3"]) == [{"root": ref(cloud, "T4"), "fails": []}]


def test_one_provider_per_tree_before_1_29():
    cloud = Cloud()
    cloud.provider("CN", stock={"VCPU": 4})
    cloud.provider("PF", "CN", stock={"SRIOV_NET_VF": 4})
    found = misses(cloud, "resources=VCPU:1,SRIOV_NET_VF:1", version=Version(1, 28))
    assert found == [
        {
            "root": ref(cloud, "CN"),
            "fails": [
                {
                    "rule": "one_provider_per_tree",
                    "text": "CN, PF are one tree's providers "
                    "(before 1.29 a candidate takes one provider per tree)",
                    "providers": [ref(cloud, "CN"), ref(cloud, "PF")],
                }
            ],
        }
    ]


# On random clouds


def tree_served(cloud: Cloud, req: request.Request) -> set[int]:
    found = cloud.found(req)
    return set(merge.trees_with_candidates(req, found, found.roots))


def test_every_tree_without_a_candidate_has_something_to_fix():
    rng = random.Random(1044)
    compared = missed = 0
    for _ in range(300):
        cloud = random_cloud(rng)
        try:
            req = ask(random_request(rng, cloud))
        except Exception:  # a combination parse refuses
            continue
        served = tree_served(cloud, req)
        for miss in nearmiss.near_misses(cloud.whole(req), req, served, 100):
            assert miss["fails"], (req, miss)
            missed += 1
        compared += 1
    assert compared > 200 and missed > 300, (compared, missed)


# Fixing every fail of a near miss gives its tree a candidate.


def _fix(cloud: Cloud, req: request.Request, fail: dict) -> request.Request:
    """Mend what ``fail`` names: the data, or (for a rule no data mends)
    the request."""
    data = cloud.data
    rule = fail["rule"]
    pid = cloud.ids[fail["provider"]["name"]] if "provider" in fail else None
    if rule in ("capacity", "no_inventory", "max_unit", "min_unit", "step_size"):
        key = (pid, fail["resource_class"])
        stock = data.stock.get(key, inventory(0))
        if rule in ("capacity", "no_inventory"):
            stock = stock._replace(total=1000, reserved=0, allocation_ratio=1.0, used=0)
        if rule == "no_inventory":
            stock = stock._replace(max_unit=1000)
        if rule == "max_unit":
            stock = stock._replace(max_unit=fail["needs"])
        if rule == "min_unit":
            stock = stock._replace(min_unit=1)
        if rule == "step_size":
            stock = stock._replace(step_size=1)
        data.stock[key] = stock
    elif rule in ("required_trait", "root_required"):
        data.traits[pid] |= {fail["trait"]}
    elif rule == "any_of_traits":
        data.traits[pid] |= {fail["traits"][0]}
    elif rule in ("forbidden_trait", "root_forbidden"):
        data.traits[pid] -= {fail["trait"]}
    elif rule in ("member_of", "root_member_of"):
        data.aggregates[pid] |= {fail["aggregates"][0]}
    elif rule in ("forbidden_aggregate", "root_forbidden_aggregate"):
        data.aggregates[pid] -= {fail["aggregate"]}
    elif rule == "in_tree":  # every group asking for that tree
        groups = {
            s: dataclasses.replace(g, in_tree=None) if g.in_tree == fail["in_tree"] else g
            for s, g in req.groups.items()
        }
        req = dataclasses.replace(req, groups=groups)
    elif rule == "isolate":
        req = dataclasses.replace(req, isolated=frozenset(), group_policy="none")
    elif rule == "same_subtree":
        named = set(fail["groups"])
        req = dataclasses.replace(
            req,
            same_subtrees=[s for s in req.same_subtrees if s != named],
            apart=[(p, n) for p, n in req.apart if set(p) != named],
        )
    elif rule == "same_subtree_apart":
        apart = []
        for positive, negated in req.apart:
            if sorted(positive) == fail["groups"]:
                negated = negated - {fail["negated"]}
            if negated:
                apart.append((positive, negated))
        req = dataclasses.replace(req, apart=apart)
    else:
        raise AssertionError(f"no fix for {fail}")
    return req


def test_fixing_every_fail_gives_the_tree_a_candidate():
    rng = random.Random(4404)
    fixed = conflicts = 0
    for _ in range(300):
        cloud = random_cloud(rng)
        try:
            req = ask(random_request(rng, cloud))
        except Exception:  # a combination parse refuses
            continue
        served = tree_served(cloud, req)
        for miss in nearmiss.near_misses(cloud.whole(req), req, served, 2):
            if any(fail["rule"] == "conflict" for fail in miss["fails"]):
                conflicts += 1
                continue
            mended = Cloud()
            mended.ids = cloud.ids
            mended.data = dataclasses.replace(
                cloud.data,
                traits=dict(cloud.data.traits),
                aggregates=dict(cloud.data.aggregates),
                stock=dict(cloud.data.stock),
            )
            asked = req
            for fail in miss["fails"]:
                asked = _fix(mended, asked, fail)
            root = mended.ids[miss["root"]["name"]]
            assert root in tree_served(mended, asked), (req, miss)
            fixed += 1
    assert fixed > 150 and conflicts < fixed, (fixed, conflicts)


def test_fix_mends_what_it_names():
    # the helper itself, on the four fails of one inventory
    cloud = one_host({"VCPU": inventory(2, used=1, max_unit=1, min_unit=4, step=2)})
    req = ask("resources=VCPU:3")
    found = fails(cloud, "resources=VCPU:3")
    assert [fail["rule"] for fail in found] == ["capacity", "max_unit", "min_unit", "step_size"]
    for fail in found:
        req = _fix(cloud, req, fail)
    assert cloud.data.stock[(1, "VCPU")] == Stock(1000, 0, 1.0, 1, 3, 1, 0)
    assert tree_served(cloud, req) == {1}
