"""candidates.explain.explanation and .text on hand-built clouds (tests/support/clouds.py)
(test_candidates_funnel.Cloud: both from one cloud), no database.

What is proven: the request-wide filters (root_required with forbidden
traits, root_member_of) with the trees before and after each; each merge
rule as its own step with exact trees before and after, in the fixed order
(room shared by the groups, one provider per tree before 1.29, the
unsuffixed group's traits over its providers, group_policy=isolate or
isolate=, same_subtree, its negated groups), and only the rules the
request has; the count of candidates (a candidate of sharing providers
alone counted once though several trees have it) and its caps (COUNT_CAP,
max_allocation_candidates); the phrase ``first_empty_step`` gives for each
kind of emptiness; the plain text of an explanation and of a capacity
count, line for line. On random clouds, the explanation agrees with the
engine: its trees and candidates are the walk's, the merge steps start
from the trees the funnels and request filters leave, and each step
starts where the one before it ended.
"""

from __future__ import annotations

import random

import pytest
from microversion_parse import Version

from placement_svc.candidates import merge, rooms
from placement_svc.candidates.explain import cloud as explain_cloud
from placement_svc.candidates.explain import explanation as explain
from placement_svc.candidates.explain import text
from tests.support.clouds import (
    AGG1,
    AGG2,
    AGG3,
    Cloud,
    ask,
    inventory,
    random_cloud,
    random_request,
)


def explained(cloud: Cloud, qs: str, version: Version | None = None, **kwargs) -> dict:
    req = ask(qs) if version is None else ask(qs, version)
    found = cloud.found(req)
    return explain.explain(found, cloud.whole(req, found), req, **kwargs)


def rules(body: dict) -> list[tuple[str, list[str], int, int]]:
    return [(s["rule"], s["value"], s["before"], s["after"]) for s in body["merge_rules"]]


# The cloud an explanation reads


def test_the_explanation_reads_the_searchs_found_seen_whole():
    """explain/cloud.py: every provider of the shape of the cloud; the room
    of every inventory of a requested class as the search weighed it, too
    small or not, and of a class asked past MAX_INT; the sharing providers
    of the trees that hold one; and only of a search of every tree."""
    cloud = Cloud()
    cloud.provider("T1", stock={"VCPU": 4, "DISK_GB": inventory(10, used=8)})
    cloud.provider("T2", stock={"MEMORY_MB": 1024})  # no requested class
    cloud.sharing("S1", {"DISK_GB": 100}, ["T1"])
    cloud.sharing("S2", {"MEMORY_MB": 100}, ["T2"])  # in a tree without one
    req = ask(f"resources=VCPU:1,DISK_GB:5&resources_G=DISK_GB:{2**31}")
    found = cloud.found(req)
    whole = explain_cloud.of(found)
    assert whole.providers == cloud.data.providers
    assert found.room.keys() == {(1, "VCPU"), (3, "DISK_GB")}
    assert whole.room.keys() == {(1, "VCPU"), (1, "DISK_GB"), (3, "DISK_GB")}
    assert (whole.room[(1, "DISK_GB")].free, whole.room[(1, "DISK_GB")].used) == (2, 8)
    assert whole.sharing == {cloud.ids["S1"]}
    assert whole.shares_with == {cloud.ids["S1"]: {cloud.ids["S1"], cloud.ids["T1"]}}
    # Asked past MAX_INT, DISK_GB chooses no tree, but the room is counted.
    beyond = ask(f"resources=VCPU:1&resources_G=DISK_GB:{2**31}")
    assert explain_cloud.of(cloud.found(beyond)).room.keys() == whole.room.keys()
    found.complete = False  # a search of the first trees only
    with pytest.raises(ValueError):
        explain_cloud.of(found)


# Request-wide filters


def test_root_required_and_root_member_of_count_trees_before_and_after():
    cloud = Cloud()
    cloud.provider("T1", stock={"VCPU": 4}, traits=("CUSTOM_A",), aggregates=(AGG1,))
    cloud.provider("T2", stock={"VCPU": 4}, traits=("CUSTOM_A", "CUSTOM_B"), aggregates=(AGG1,))
    cloud.provider("T3", stock={"VCPU": 4}, aggregates=(AGG1,))
    cloud.provider("T4", stock={"VCPU": 4}, traits=("CUSTOM_A",))
    cloud.provider("T5", stock={"VCPU": 4}, traits=("CUSTOM_A",), aggregates=(AGG2, AGG3))
    cloud.provider("T6", traits=("CUSTOM_A",), aggregates=(AGG1,))  # no VCPU
    qs = (
        "resources=VCPU:1&root_required=CUSTOM_A,!CUSTOM_B"
        f"&root_member_of=in:{AGG2},{AGG1}&root_member_of=!{AGG3}"
    )
    body = explained(cloud, qs)
    assert body["cloud"] == {"providers": 6, "trees": 6}
    assert body["trees_for_all_groups"] == 5
    assert body["request_filters"] == [
        {"filter": "root_required", "value": ["CUSTOM_A", "!CUSTOM_B"], "before": 5, "after": 3},
        {
            "filter": "root_member_of",
            "value": [f"in:{AGG1},{AGG2}", f"!{AGG3}"],
            "before": 3,
            "after": 1,
        },
    ]
    assert body["merge_rules"] == []
    assert (body["trees_with_candidates"], body["candidates"]) == (1, 1)
    assert body["candidates_capped"] is None


def test_no_request_filter_without_its_parameter():
    cloud = Cloud()
    cloud.provider("T1", stock={"VCPU": 4})
    body = explained(cloud, "resources=VCPU:1")
    assert body["request_filters"] == [] and body["merge_rules"] == []
    body = explained(cloud, f"resources=VCPU:1&root_member_of={AGG1}")
    assert body["request_filters"] == [
        {"filter": "root_member_of", "value": [AGG1], "before": 1, "after": 0}
    ]


# Merge rules, one at a time


def test_room_shared_by_groups():
    cloud = Cloud()
    cloud.provider("CN1", stock={"VCPU": 3, "DISK_GB": 10})
    cloud.provider("CN2", stock={"VCPU": 4, "DISK_GB": 10})
    body = explained(cloud, "resources=VCPU:2,DISK_GB:1&resources_G=VCPU:2")
    assert rules(body) == [("shared_room", ["VCPU"], 2, 1)]
    assert (body["trees_with_candidates"], body["candidates"]) == (1, 1)
    # no class asked twice: no such step
    assert rules(explained(cloud, "resources=VCPU:2&resources_G=DISK_GB:2")) == []


def test_the_unsuffixed_groups_traits_over_the_tree():
    cloud = Cloud()
    cloud.provider("CN1", stock={"VCPU": 4}, traits=("CUSTOM_A",))
    cloud.provider("PF1", "CN1", stock={"SRIOV_NET_VF": 4}, traits=("CUSTOM_B",))
    cloud.provider("CN2", stock={"VCPU": 4}, traits=("CUSTOM_A",))
    cloud.provider("PF2", "CN2", stock={"SRIOV_NET_VF": 4})
    qs = "resources=VCPU:1,SRIOV_NET_VF:1&required=CUSTOM_A,CUSTOM_B"
    assert rules(explained(cloud, qs)) == [("tree_traits", ["CUSTOM_A", "CUSTOM_B"], 2, 1)]
    qs = "resources=VCPU:1,SRIOV_NET_VF:1&required=in:CUSTOM_C,CUSTOM_B"
    assert rules(explained(cloud, qs)) == [("tree_traits", ["in:CUSTOM_B,CUSTOM_C"], 2, 1)]
    # forbidden traits are each provider's own: a funnel step, not this one
    assert rules(explained(cloud, "resources=VCPU:1&required=!CUSTOM_B")) == []


def isolation_cloud() -> Cloud:
    """CN: one provider; HOST: two children."""
    cloud = Cloud()
    cloud.provider("CN", stock={"VCPU": 8})
    cloud.provider("HOST")
    cloud.provider("N0", "HOST", stock={"VCPU": 8})
    cloud.provider("N1", "HOST", stock={"VCPU": 8})
    return cloud


def test_group_policy_isolate_and_isolate_are_named_as_asked():
    cloud = isolation_cloud()
    body = explained(cloud, "resources_A=VCPU:1&resources_B=VCPU:1&group_policy=isolate")
    assert rules(body) == [
        ("shared_room", ["VCPU"], 2, 2),
        ("group_policy=isolate", ["_A", "_B"], 2, 1),
    ]
    body = explained(cloud, "resources_A=VCPU:1&resources_B=VCPU:1&isolate=_B")
    assert rules(body) == [("shared_room", ["VCPU"], 2, 2), ("isolate", ["_B"], 2, 1)]
    body = explained(cloud, "resources_A=VCPU:1&resources_B=VCPU:1&group_policy=none")
    assert rules(body) == [("shared_room", ["VCPU"], 2, 2)]
    # one granular group: nothing to keep apart
    body = explained(cloud, "resources=VCPU:1&resources_A=VCPU:1&group_policy=isolate")
    assert rules(body) == [("shared_room", ["VCPU"], 2, 2)]


def subtree_cloud() -> Cloud:
    """H1: NUMA0 above its FPGA; H2: NUMA and FPGA side by side."""
    cloud = Cloud()
    cloud.provider("H1")
    cloud.provider("NUMA0", "H1", stock={"VCPU": 4})
    cloud.provider("F0", "NUMA0", stock={"CUSTOM_FPGA": 2})
    cloud.provider("H2")
    cloud.provider("NUMA1", "H2", stock={"VCPU": 4})
    cloud.provider("F1", "H2", stock={"CUSTOM_FPGA": 2})
    return cloud


def test_same_subtree_and_its_negated_groups():
    cloud = subtree_cloud()
    qs = "resources_C=VCPU:1&resources_F=CUSTOM_FPGA:1&same_subtree="
    body = explained(cloud, qs + "_F,_C")
    assert rules(body) == [("same_subtree", ["_C,_F"], 2, 1)]
    body = explained(cloud, qs + "_C,!_F")
    # The positive part alone (_C) always holds: no step of its own.
    assert rules(body) == [("same_subtree_apart", ["_C,!_F"], 2, 1)]
    assert body["trees_with_candidates"] == 1


def test_one_provider_per_tree_before_1_29():
    cloud = Cloud()
    cloud.provider("CN1", stock={"VCPU": 4})
    cloud.provider("PF1", "CN1", stock={"SRIOV_NET_VF": 4})
    cloud.provider("CN2", stock={"VCPU": 4, "SRIOV_NET_VF": 4})
    qs = "resources=VCPU:1,SRIOV_NET_VF:1"
    body = explained(cloud, qs, Version(1, 28))
    assert rules(body) == [("one_provider_per_tree", [], 2, 1)]
    assert (body["trees_with_candidates"], body["candidates"]) == (1, 1)
    assert rules(explained(cloud, qs, Version(1, 29))) == []


def test_the_rules_come_in_a_fixed_order_each_from_where_the_last_ended():
    cloud = subtree_cloud()
    cloud.data.traits[cloud.ids["NUMA0"]] = frozenset({"CUSTOM_A"})
    cloud.data.traits[cloud.ids["NUMA1"]] = frozenset({"CUSTOM_A"})
    qs = (
        "resources=VCPU:1&required=CUSTOM_A&resources_C=VCPU:1&resources_F=CUSTOM_FPGA:1"
        "&resources_G=CUSTOM_FPGA:1&same_subtree=_C,!_F&isolate=_F"
    )
    body = explained(cloud, qs)
    assert [(name, before, after) for name, _value, before, after in rules(body)] == [
        ("shared_room", 2, 2),
        ("tree_traits", 2, 2),
        ("isolate", 2, 0),  # one FPGA per tree, for two groups
        ("same_subtree_apart", 0, 0),
    ]
    assert explain.first_empty_step(body) == "isolate _F left none of 2 trees"


# Counting candidates


def three_hosts() -> Cloud:
    cloud = Cloud()
    for name in ("T1", "T2", "T3"):
        cloud.provider(name, stock={"VCPU": 4})
    return cloud


def test_the_count_and_its_caps(monkeypatch):
    cloud = three_hosts()
    qs = "resources=VCPU:1"
    body = explained(cloud, qs)
    assert (body["candidates"], body["candidates_capped"]) == (3, None)
    assert explained(cloud, qs, max_candidates=3)["candidates_capped"] is None
    body = explained(cloud, qs, max_candidates=2)
    assert (body["candidates"], body["candidates_capped"]) == (
        2,
        {"at": 2, "by": "max_allocation_candidates"},
    )
    body = explained(cloud, qs, max_candidates=0)
    assert (body["candidates"], body["candidates_capped"]) == (
        0,
        {"at": 0, "by": "max_allocation_candidates"},
    )
    monkeypatch.setattr(explain, "COUNT_CAP", 2)
    for cap in (-1, 5):  # none, or one above the count's own cap
        body = explained(cloud, qs, max_candidates=cap)
        assert (body["candidates"], body["candidates_capped"]) == (2, {"at": 2, "by": "explain"})
    monkeypatch.setattr(explain, "COUNT_CAP", 3)
    assert explained(cloud, qs)["candidates_capped"] is None
    # the trees with candidates are not capped
    assert explained(cloud, qs, max_candidates=1)["trees_with_candidates"] == 3


def test_a_candidate_of_sharing_providers_alone_counts_once():
    cloud = Cloud()
    cloud.provider("T1")
    cloud.provider("T2")
    cloud.sharing("S", {"DISK_GB": 100}, ["T1", "T2"])
    body = explained(cloud, "resources=DISK_GB:10")
    # every tree S serves has it (see test_candidates_merge), the answer once
    assert (body["trees_with_candidates"], body["candidates"]) == (3, 1)


# first_empty_step


def why(cloud: Cloud, qs: str, version: Version | None = None, **kwargs) -> str:
    """The phrase of the whole explanation, which why_empty (the request
    log's, worked out only up to the empty step) must give too."""
    phrase = explain.first_empty_step(explained(cloud, qs, version, **kwargs))
    req = ask(qs) if version is None else ask(qs, version)
    found = cloud.found(req)
    assert explain.why_empty(found, cloud.whole(req, found), req) == phrase
    return phrase


def test_first_empty_step_with_no_provider_or_in_a_groups_funnel():
    assert why(Cloud(), "resources=VCPU:1") == "there are no resource providers"
    cloud = Cloud()
    cloud.provider("T1", stock={"VCPU": 4}, traits=("CUSTOM_B",))
    cloud.provider("T2", stock={"VCPU": 4, "DISK_GB": 5}, traits=("CUSTOM_B",))
    cloud.provider("T3", stock={"DISK_GB": 100}, traits=("CUSTOM_B",))
    assert (
        why(cloud, "resources_G=VCPU:1&required_G=!CUSTOM_B")
        == "group '_G' forbidden_traits !CUSTOM_B left none of 3 providers"
    )
    assert (
        why(cloud, "resources_G=VCPU:1,DISK_GB:10")
        == "group '_G' resources DISK_GB:10 left none of 2 providers"
    )
    # the unsuffixed group's classes each count from the providers before room
    cloud.provider("T4", stock={"VCPU": 4}, traits=("CUSTOM_X",))
    assert (
        why(cloud, "resources=VCPU:1,MEMORY_MB:1&required=!CUSTOM_X")
        == "group '' resources MEMORY_MB:1 left none of 3 providers"
    )
    assert (
        why(cloud, "resources=VCPU:5&resources_D=DISK_GB:10")
        == "group '' resources VCPU:5 left none of 4 providers"
    )


def test_first_empty_step_among_trees():
    cloud = Cloud()
    cloud.provider("T1", stock={"VCPU": 4})
    cloud.provider("T2", stock={"VCPU": 4, "DISK_GB": 5})
    cloud.provider("T3", stock={"DISK_GB": 100})
    cloud.provider("T4", stock={"VCPU": 4})
    assert (
        why(cloud, "resources=VCPU:4,DISK_GB:10")
        == "group '' has providers, but no tree holds all its classes"
    )
    assert (
        why(cloud, "resources=VCPU:4&resources_D=DISK_GB:10")
        == "no tree can serve every group (trees per group: '' 3, '_D' 1)"
    )
    assert (
        why(cloud, "resources=VCPU:1,DISK_GB:1&root_required=CUSTOM_X")
        == "root_required CUSTOM_X left none of 1 tree"
    )


def test_first_empty_step_at_a_merge_rule_or_after_them_all():
    cloud = Cloud()
    cloud.provider("T2", stock={"VCPU": 4, "DISK_GB": 5})
    cloud.provider("T3", stock={"DISK_GB": 100})
    assert (
        why(cloud, "resources=DISK_GB:60&resources_G=DISK_GB:60")
        == "shared_room DISK_GB left none of 1 tree"
    )
    cloud = isolation_cloud()
    cloud.data.stock.pop((cloud.ids["N1"], "VCPU"))
    assert (
        why(cloud, "resources_A=VCPU:1&resources_B=VCPU:1&group_policy=isolate")
        == "group_policy=isolate _A,_B left none of 2 trees"
    )
    cloud = Cloud()
    cloud.provider("H")
    cloud.provider("NUMA", "H", stock={"VCPU": 4})
    cloud.provider("FPGA", "H", stock={"CUSTOM_FPGA": 1})
    assert (
        why(cloud, "resources_C=VCPU:1&resources_F=CUSTOM_FPGA:1&same_subtree=_F,_C")
        == "same_subtree _C,_F left none of 1 tree"
    )
    # max_allocation_candidates=0: every step leaves trees, the answer none
    assert why(three_hosts(), "resources=VCPU:1", max_candidates=0) == "no candidate"


def test_first_empty_step_for_one_provider_per_tree():
    cloud = Cloud()
    cloud.provider("CN", stock={"VCPU": 4})
    cloud.provider("PF", "CN", stock={"SRIOV_NET_VF": 4})
    body = explained(cloud, "resources=VCPU:1,SRIOV_NET_VF:1", Version(1, 28))
    phrase = explain.first_empty_step(body)
    # The INFO log line of an empty GET /allocation_candidates at 1.28.
    assert phrase == "one_provider_per_tree left none of 1 tree"


# The plain text


def small_cloud() -> Cloud:
    cloud = Cloud()
    cloud.provider(
        "CN1",
        stock={"VCPU": 4, "DISK_GB": inventory(100, used=95)},
        traits=("CUSTOM_A",),
    )
    cloud.provider("CN2", stock={"VCPU": 1, "DISK_GB": 100}, traits=("CUSTOM_A",))
    cloud.provider("CN3", stock={"VCPU": 8, "DISK_GB": 100})
    return cloud


def test_the_text_of_an_explanation():
    cloud = small_cloud()
    body = explained(cloud, "resources=VCPU:2,DISK_GB:10&root_required=CUSTOM_A")
    uuid = {name: cloud.uuid(name) for name in ("CN1", "CN2", "CN3")}
    assert text.explain(body).splitlines() == [
        "Candidates: 0, in 0 trees (the cloud: 3 providers in 3 trees).",
        "",
        "Group '' (VCPU:2,DISK_GB:10): providers",
        "  providers considered            3",
        "  resources VCPU:2                2  lacking capacity 1, max_unit 1",
        "  resources DISK_GB:10            2  lacking capacity 1",
        "  can serve a class of the group  3  in 1 tree",
        "",
        "Trees",
        "  every group can be served  1",
        "  root_required CUSTOM_A     0  of 1",
        "  with candidates            0",
        "",
        "Near misses (fewest shortfalls first)",
        f"  CN1 ({uuid['CN1']}): 1 to fix",
        "    - DISK_GB on CN1: needs 10, 5 free (total 100, reserved 0, ratio 1.0, used 95)",
        f"  CN3 ({uuid['CN3']}): 1 to fix",
        "    - root CN3 lacks trait CUSTOM_A (root_required)",
        f"  CN2 ({uuid['CN2']}): 2 to fix",
        "    - VCPU on CN2: needs 2, 1 free (total 1, reserved 0, ratio 1.0, used 0)",
        "    - VCPU on CN2: needs 2, max_unit 1",
    ]
    assert text.explain(body).endswith("max_unit 1\n")


def test_the_text_of_merge_rules_capped_counts_and_no_near_misses(monkeypatch):
    cloud = small_cloud()
    monkeypatch.setattr(explain, "COUNT_CAP", 1)
    body = explained(cloud, "resources=VCPU:2&resources_G=VCPU:2&required_G=!CUSTOM_B", near=0)
    assert text.explain(body) == (
        "Candidates: at least 1 (counting stopped at 1, explain), in 2 trees "
        "(the cloud: 3 providers in 3 trees).\n"
        "\n"
        "Group '' (VCPU:2): providers\n"
        "  providers considered            3\n"
        "  resources VCPU:2                2  lacking capacity 1, max_unit 1\n"
        "  can serve a class of the group  2  in 2 trees\n"
        "\n"
        "Group '_G' (VCPU:2): providers\n"
        "  providers considered        3\n"
        "  forbidden_traits !CUSTOM_B  3\n"
        "  resources VCPU:2            2  lacking capacity 1, max_unit 1\n"
        "  can serve the group         2  in 2 trees\n"
        "\n"
        "Trees\n"
        "  every group can be served    2\n"
        "  room shared by groups: VCPU  2  of 2\n"
        "  with candidates              2\n"
    )


def test_the_text_of_a_rule_without_values_and_of_a_resourceless_group():
    cloud = Cloud()
    cloud.provider("CN1", stock={"VCPU": 4})
    cloud.provider("PF1", "CN1", stock={"SRIOV_NET_VF": 4})
    cloud.provider("CN2", stock={"VCPU": 4, "SRIOV_NET_VF": 4}, traits=("CUSTOM_X",))
    body = explained(cloud, "resources=VCPU:1,SRIOV_NET_VF:1", Version(1, 28), near=0)
    assert text.explain(body).split("Trees\n")[1] == (
        "  every group can be served            2\n"
        "  one provider per tree (before 1.29)  1  of 2\n"
        "  with candidates                      1\n"
    )
    body = explained(cloud, "resources_A=VCPU:1&required_X=CUSTOM_X&same_subtree=_A,_X")
    assert text.explain(body).split("Group '_X'")[1].split("\n\n")[0] == (
        " (no resources): providers\n"
        "  providers considered      3\n"
        "  required_traits CUSTOM_X  1\n"
        "  can serve the group       1  in 1 tree"
    )


def capacity_body(cloud: Cloud, trees, total, exact) -> dict:
    """A capacity body as find.capacity shapes it: (root name, copies, exact)."""
    return {
        "trees": [
            {"root": {"uuid": cloud.uuid(n), "name": n}, "copies": c, "exact": e}
            for n, c, e in trees
        ],
        "trees_with_room": len(trees),
        "total": total,
        "total_exact": exact,
    }


def test_the_text_of_a_capacity_count():
    cloud = small_cloud()
    uuid = {name: cloud.uuid(name) for name in ("CN1", "CN2", "CN3")}
    body = capacity_body(cloud, [("CN3", 12, True), ("CN1", 2, False)], 14, False)
    assert text.capacity(body).splitlines() == [
        "Copies that fit: 14 (a lower bound), in 2 trees.",
        "  copies  tree",
        f"      12  CN3 ({uuid['CN3']})",
        f"     >=2  CN1 ({uuid['CN1']})",
        "  (>=: a lower bound, the tree has more than one provider in reach)",
    ]
    body = capacity_body(cloud, [("CN2", 1234567, True)], 1234567, True)
    assert text.capacity(body) == (
        f"Copies that fit: 1234567, in 1 tree.\n   copies  tree\n  1234567  CN2 ({uuid['CN2']})\n"
    )
    assert text.capacity(capacity_body(cloud, [], 0, True)) == "Copies that fit: 0, in 0 trees.\n"


# Against the engine, on random clouds


def test_the_explanation_agrees_with_the_engine():
    rng = random.Random(144)
    compared = with_rules = emptied = hopeless = unservable = 0
    for _ in range(300):
        cloud = random_cloud(rng)
        try:
            req = ask(random_request(rng, cloud))
        except Exception:  # a combination parse refuses
            continue
        found = cloud.found(req)
        body = explain.explain(found, cloud.whole(req, found), req, near=0)
        trees = merge.trees_with_candidates(req, found, found.roots)
        assert body["trees_with_candidates"] == len(trees)
        assert body["candidates"] == len(list(merge.generate(req, found)))
        # the merge steps start from what the funnels and filters left
        start = body["trees_for_all_groups"]
        for step in body["request_filters"]:
            assert step["before"] == start
            start = step["after"]
        for step in body["merge_rules"]:
            assert step["before"] == start, (req, body)
            assert step["after"] <= step["before"]
            start = step["after"]
        assert start == len(trees), (req, body)
        said = explain.why_empty(found, cloud.whole(req, found), req)
        assert said == explain.first_empty_step(body), (req, body)
        # The answer's own search leaves a hopeless Found without the rules:
        # the same candidates, and none when it is hopeless.
        quick = cloud.found(req, answer_only=True)
        assert list(merge.generate(req, quick)) == list(merge.generate(req, found)), req
        if rooms.hopeless(found, req):
            assert not trees and not quick.roots, (req, body)
            hopeless += 1
        if not quick.room and not quick.full and found.room:  # unservable: no usage read
            assert not trees, (req, body)
            assert explain.why_empty(quick, cloud.whole(req, quick), req) == said, (req, body)
            unservable += 1
        if not trees:
            assert said != "no candidate", (req, body)
            emptied += 1
        compared += 1
        with_rules += bool(body["merge_rules"])
    assert (
        compared > 200 and with_rules > 50 and emptied > 50 and hopeless > 20 and unservable > 10
    ), (
        compared,
        with_rules,
        emptied,
        hopeless,
        unservable,
    )
