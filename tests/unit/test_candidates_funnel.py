"""candidates.explain.funnel on hand-built clouds (tests/support/clouds.py), no database.

What is proven: each filter of a group's funnel counts the providers the
ones before it left, in a fixed order (in_tree, member_of, forbidden
aggregates, required traits, forbidden traits, any-of traits, then room per
requested class), and only the filters the request asks for appear; a room
step's ``lacking`` counts each reason on its own (a provider short of both
capacity and max_unit counts in both); the unsuffixed group's classes each
count from the same providers, and its required traits are no step of the
funnel (they are a rule of the tree); member_of and forbidden aggregates
count a provider's root's aggregates for the unsuffixed group, but not for
a sharing provider nor for a granular group; in_tree with an unknown uuid
leaves none, and keeps sharing providers of other trees out; the trees a
group can be served in reach through sharing providers (per class for the
unsuffixed group). On random clouds, the funnel's providers are exactly the
options eligibility.py gives the engine on the Found the search loads for
the same cloud, and the funnel's steps are eligibility.rules, in order: one
list, read by both (a rule added to it is a step of the one and a rule of
the other). ``until_empty`` (the request log's reason of an empty answer)
gives the whole funnel's steps up to the first that leaves none; a Found
with a requested class no provider has room for is hopeless, and the
answer's own search leaves it without anchors. An answer whose first
amount no idle inventory holds is known empty from the shape alone, with
the reason the whole search gives; the idle rooms are kept per threshold
of the inventories, not per amount asked.
"""

from __future__ import annotations

import random

from placement_svc.candidates import eligibility, rooms
from placement_svc.candidates.explain import explanation as explain
from placement_svc.candidates.explain import funnel
from tests.support.clouds import (
    AGG1,
    AGG2,
    AGG3,
    UNKNOWN,
    Cloud,
    ask,
    inventory,
    random_cloud,
    random_request,
)

# Funnels by name


def funnel_of(cloud: Cloud, qs: str, suffix: str = "") -> funnel.Funnel:
    req = ask(qs)
    return funnel.group_funnel(cloud.whole(req), req.groups[suffix])


def counts(each: funnel.Funnel) -> list[tuple[str, int]]:
    """(filter, providers after it) per step."""
    return [(step["filter"], step["after"]) for step in each.steps]


def serving(cloud: Cloud, each: funnel.Funnel) -> dict:
    return {key: cloud.named(pids) for key, pids in each.serving.items()}


def room(**lacking) -> dict[str, int]:
    """A room step's ``lacking``: every reason, zero unless given."""
    return {kind: lacking.get(kind, 0) for kind in funnel.ROOM_LACKS}


# The order of the filters, and what each leaves


def filtered_host() -> Cloud:
    """Each provider of HOST's tree is kept out by exactly one filter of
    ``EVERY_FILTER``, in the funnel's order; C_OK passes them all."""
    cloud = Cloud()
    full = {"VCPU": 4, "DISK_GB": 100}
    cloud.provider("OTHER", stock=full, traits=("CUSTOM_A", "CUSTOM_C"), aggregates=(AGG1,))
    cloud.provider("HOST", traits=("CUSTOM_A", "CUSTOM_C"))
    for name, traits, aggregates, stock in (
        ("C_NOAGG", ("CUSTOM_A", "CUSTOM_C"), (), full),
        ("C_AGG3", ("CUSTOM_A", "CUSTOM_C"), (AGG1, AGG3), full),
        ("C_NOA", ("CUSTOM_C",), (AGG1,), full),
        ("C_B", ("CUSTOM_A", "CUSTOM_B", "CUSTOM_C"), (AGG2,), full),
        ("C_NOCD", ("CUSTOM_A",), (AGG1,), full),
        ("C_NOVCPU", ("CUSTOM_A", "CUSTOM_D"), (AGG1,), {"DISK_GB": 100}),
        ("C_NODISK", ("CUSTOM_A", "CUSTOM_C"), (AGG1,), {"VCPU": 4}),
        ("C_OK", ("CUSTOM_A", "CUSTOM_C"), (AGG1,), full),
    ):
        cloud.provider(name, "HOST", stock, traits, aggregates)
    return cloud


def every_filter(cloud: Cloud) -> str:
    return (
        f"resources_G=VCPU:2,DISK_GB:10&in_tree_G={cloud.uuid('HOST')}"
        f"&member_of_G=in:{AGG2},{AGG1}&member_of_G=!{AGG3}"
        "&required_G=CUSTOM_A,!CUSTOM_B&required_G=in:CUSTOM_D,CUSTOM_C"
    )


def test_each_filter_counts_what_the_ones_before_it_left_in_a_fixed_order():
    cloud = filtered_host()
    each = funnel_of(cloud, every_filter(cloud), "_G")
    assert each.considered == 10
    assert each.steps == [
        {"filter": "in_tree", "value": [cloud.uuid("HOST")], "after": 9},
        {"filter": "member_of", "value": [f"in:{AGG1},{AGG2}"], "after": 7},
        {"filter": "forbidden_aggregates", "value": [f"!{AGG3}"], "after": 6},
        {"filter": "required_traits", "value": ["CUSTOM_A"], "after": 5},
        {"filter": "forbidden_traits", "value": ["!CUSTOM_B"], "after": 4},
        {"filter": "any_of_traits", "value": ["in:CUSTOM_C,CUSTOM_D"], "after": 3},
        {
            "filter": "resources",
            "value": ["VCPU:2"],
            "resource_class": "VCPU",
            "amount": 2,
            "after": 2,
            "lacking": room(inventory=1),
        },
        {
            "filter": "resources",
            "value": ["DISK_GB:10"],
            "resource_class": "DISK_GB",
            "amount": 10,
            "after": 1,
            "lacking": room(inventory=1),
        },
    ]
    assert serving(cloud, each) == {None: ["C_OK"]}
    assert each.trees == {cloud.ids["HOST"]}


def test_the_body_says_what_was_asked_and_what_is_left():
    cloud = filtered_host()
    req = ask(every_filter(cloud))
    each = funnel.group_funnel(cloud.whole(req), req.groups["_G"])
    assert each.body(req.groups["_G"]) == {
        "resources": {"VCPU": 2, "DISK_GB": 10},
        "considered": 10,
        "funnel": each.steps,
        "providers": 1,
        "trees": 1,
    }


def test_only_the_filters_asked_appear():
    cloud = filtered_host()
    assert counts(funnel_of(cloud, "resources_G=VCPU:2", "_G")) == [("resources", 8)]
    assert counts(funnel_of(cloud, "resources_G=VCPU:2&required_G=!CUSTOM_B", "_G")) == [
        ("forbidden_traits", 9),
        ("resources", 7),
    ]
    assert counts(funnel_of(cloud, f"resources_G=VCPU:2&member_of_G=!{AGG3}", "_G")) == [
        ("forbidden_aggregates", 9),
        ("resources", 7),
    ]
    # a repeated required: two single traits make one step listing both
    assert funnel_of(cloud, "resources_G=VCPU:2&required_G=CUSTOM_C,CUSTOM_A", "_G").steps[0] == {
        "filter": "required_traits",
        "value": ["CUSTOM_A", "CUSTOM_C"],
        "after": 7,  # OTHER, HOST, C_NOAGG, C_AGG3, C_B, C_NODISK, C_OK
    }


def test_a_resourceless_group_ends_with_its_last_filter():
    cloud = filtered_host()
    each = funnel_of(cloud, "resources_G=VCPU:1&required_R=CUSTOM_B&same_subtree=_G,_R", "_R")
    assert counts(each) == [("required_traits", 1)]
    assert serving(cloud, each) == {None: ["C_B"]}
    assert each.trees == {cloud.ids["HOST"]}


# Room


def test_lacking_counts_each_reason_on_its_own():
    cloud = Cloud()
    for name, stock in (
        ("NONE", {}),
        ("CAPACITY", {"VCPU": inventory(8, used=5)}),
        ("RESERVED", {"VCPU": inventory(8, reserved=5)}),
        ("MAX_UNIT", {"VCPU": inventory(8, max_unit=2)}),
        ("BOTH", {"VCPU": inventory(3)}),  # 3 free, max_unit 3
        ("MIN_UNIT", {"VCPU": inventory(8, min_unit=5)}),
        ("STEP", {"VCPU": inventory(8, step=3)}),
        ("RATIO", {"VCPU": inventory(2, ratio=2.0, max_unit=8)}),  # 4 free
        ("EXACT", {"VCPU": 4}),
    ):
        cloud.provider(name, stock=stock)
    each = funnel_of(cloud, "resources=VCPU:4")
    (step,) = each.steps
    assert step["lacking"] == {
        "inventory": 1,
        "capacity": 3,
        "max_unit": 2,
        "min_unit": 1,
        "step_size": 1,
    }
    assert step["after"] == 2
    assert serving(cloud, each) == {"VCPU": ["RATIO", "EXACT"]}


def test_a_granular_groups_classes_count_from_what_the_class_before_left():
    cloud = Cloud()
    cloud.provider("VCPU_ONLY", stock={"VCPU": 4})
    cloud.provider("DISK_ONLY", stock={"DISK_GB": 40})
    cloud.provider("BOTH", stock={"VCPU": 4, "DISK_GB": 40})
    each = funnel_of(cloud, "resources_G=VCPU:1,DISK_GB:10", "_G")
    assert counts(each) == [("resources", 2), ("resources", 1)]
    assert each.steps[1]["lacking"] == room(inventory=1)  # VCPU_ONLY; DISK_ONLY went before
    assert serving(cloud, each) == {None: ["BOTH"]}


def test_the_unsuffixed_groups_classes_each_count_from_the_same_providers():
    cloud = Cloud()
    cloud.provider("H")
    cloud.provider("A", "H", stock={"VCPU": 4}, traits=("CUSTOM_X",))
    cloud.provider("B", "H", stock={"VCPU": 4})
    cloud.provider("C", "H", stock={"DISK_GB": 40})
    cloud.provider("D", stock={"VCPU": 4, "DISK_GB": 40})
    each = funnel_of(cloud, "resources=VCPU:1,DISK_GB:10&required=!CUSTOM_X")
    assert counts(each) == [("forbidden_traits", 4), ("resources", 2), ("resources", 2)]
    assert [step["lacking"] for step in each.steps[1:]] == [room(inventory=2)] * 2
    assert serving(cloud, each) == {"VCPU": ["B", "D"], "DISK_GB": ["C", "D"]}
    assert each.trees == {cloud.ids["H"], cloud.ids["D"]}
    assert each.body(ask("resources=VCPU:1,DISK_GB:10").groups[""])["providers"] == 3


def test_until_empty_stops_at_the_first_step_that_leaves_none():
    cloud = Cloud()
    cloud.provider("A", stock={"VCPU": 4, "DISK_GB": 40}, traits=("CUSTOM_X",))
    cloud.provider("B", stock={"VCPU": 4, "DISK_GB": 40})
    req = ask("resources=VCPU:8,DISK_GB:10&required=!CUSTOM_X")
    whole = cloud.whole(req)
    full = funnel.group_funnel(whole, req.groups[""])
    short = funnel.group_funnel(whole, req.groups[""], until_empty=True)
    assert counts(full) == [("forbidden_traits", 1), ("resources", 0), ("resources", 1)]
    # the same steps up to the empty one, without what each provider lacks
    assert counts(short) == [("forbidden_traits", 1), ("resources", 0)]
    assert short.steps[1] == {key: v for key, v in full.steps[1].items() if key != "lacking"}
    assert short.trees == set() and full.trees == set()
    # a rule that leaves none ends it before any room is weighed
    req = ask("resources_G=VCPU:1&required_G=CUSTOM_Y")
    assert counts(funnel.group_funnel(cloud.whole(req), req.groups["_G"], until_empty=True)) == [
        ("required_traits", 0)
    ]


def test_until_empty_is_the_whole_funnel_when_no_step_leaves_none():
    cloud = Cloud()
    cloud.provider("A", stock={"VCPU": 4, "DISK_GB": 40})
    req = ask("resources_G=VCPU:1,DISK_GB:10")
    whole = cloud.whole(req)
    full = funnel.group_funnel(whole, req.groups["_G"])
    short = funnel.group_funnel(whole, req.groups["_G"], until_empty=True)
    assert counts(short) == counts(full) == [("resources", 1), ("resources", 1)]
    assert short.serving == full.serving and short.trees == full.trees == {cloud.ids["A"]}


def test_a_class_no_provider_has_room_for_makes_a_found_hopeless():
    cloud = Cloud()
    cloud.provider("A", stock={"VCPU": 4, "DISK_GB": 40})
    cloud.provider("B", stock={"VCPU": 8})
    for qs, hopeless in (
        ("resources=VCPU:8", False),  # B
        ("resources=VCPU:9", True),  # nobody's VCPU holds 9
        ("resources=VCPU:8,DISK_GB:10", False),  # B and A's DISK_GB: a tree may not hold it, yet
        ("resources_1=VCPU:1&resources_2=DISK_GB:41&group_policy=none", True),
        ("resources_1=VCPU:1&resources_2=MEMORY_MB:1&group_policy=none", True),  # no inventory
    ):
        req = ask(qs)
        found = cloud.found(req)
        assert rooms.hopeless(found, req) is hopeless, qs
        quick = cloud.found(req, answer_only=True)
        assert bool(quick.roots) is (not hopeless and bool(found.roots)), qs


def unservable_cloud() -> Cloud:
    cloud = Cloud()
    cloud.provider("A", stock={"VCPU": inventory(4, used=4), "DISK_GB": 40})  # full
    cloud.provider("B", stock={"VCPU": inventory(8, max_unit=6)}, traits=("CUSTOM_X",))
    return cloud


def test_an_amount_no_idle_inventory_holds_is_known_empty_before_any_usage():
    cloud = unservable_cloud()
    for qs, known in (
        ("resources=VCPU:7", True),  # past A's 4 and B's max_unit of 6
        ("resources=VCPU:6", False),  # B could, were nothing allocated: usage decides
        ("resources=VCPU:5", False),  # B holds it; A is full, which takes usage to know
        ("resources=DISK_GB:1,VCPU:7", False),  # the first step is not the empty one
        ("resources_1=VCPU:7&resources_2=DISK_GB:1&group_policy=none", True),
        ("resources_1=VCPU:1&resources_2=VCPU:7&group_policy=none", False),
        ("resources=VCPU:2147483648", True),  # past MAX_INT: no inventory holds it
    ):
        req = ask(qs)
        shape = cloud.world(req.resource_classes())
        wanted, beyond = rooms.weighed(req, shape.class_ids)
        made = rooms.unservable(shape, req, wanted, beyond)
        assert (made is not None) is known, qs
        if made is not None:  # no room, the trees of the full search, the same reason
            full = cloud.found(req)
            assert (made.room, made.full, made.roots) == ({}, {}, [])
            assert (made.providers, made.members) == (full.providers, full.members)
            assert made.classes == full.classes and made.sharing == full.sharing
            said = explain.why_empty(made, cloud.whole(req, made), req)
            assert said == explain.why_empty(full, cloud.whole(req, full), req), qs


def test_the_idle_rooms_are_kept_per_threshold_not_per_amount():
    cloud = unservable_cloud()
    req = ask("resources=VCPU:1")
    shape = cloud.world(req.resource_classes())
    vcpu = shape.class_ids["VCPU"]
    assert rooms.thresholds(shape, vcpu) == [4, 6]
    for amount in range(1, 50):
        asked = ask(f"resources=VCPU:{amount}")
        kept = cloud.found(asked, shape)
        fresh = cloud.found(asked, cloud.world(asked.resource_classes()))
        assert (kept.room, kept.full, kept.with_room) == (fresh.room, fresh.full, fresh.with_room)
    idle = [key for key in shape._memo if isinstance(key, tuple) and key[0] == "idle"]
    assert sorted(idle) == [("idle", vcpu, 0), ("idle", vcpu, 1), ("idle", vcpu, 2)]


def test_the_unsuffixed_groups_required_traits_are_no_step_of_its_funnel():
    cloud = Cloud()
    cloud.provider("CN", stock={"VCPU": 4})
    each = funnel_of(cloud, "resources=VCPU:1&required=CUSTOM_X&required=in:CUSTOM_Y,CUSTOM_Z")
    assert counts(each) == [("resources", 1)]
    each = funnel_of(cloud, "resources=VCPU:1&required=CUSTOM_X,!CUSTOM_Y")
    assert counts(each) == [("forbidden_traits", 1), ("resources", 1)]


# member_of: via the root for the unsuffixed group only


def aggregated_trees() -> Cloud:
    """R in AGG1, its child C not; a sharing child SS of R, not in AGG1;
    R2 and its child C2 in no aggregate. Each has VCPU but the roots."""
    cloud = Cloud()
    cloud.provider("R", aggregates=(AGG1,))
    cloud.provider("C", "R", stock={"VCPU": 4})
    cloud.sharing("SS", {"VCPU": 4}, [], parent="R")
    cloud.provider("R2")
    cloud.provider("C2", "R2", stock={"VCPU": 4})
    return cloud


def test_member_of_counts_the_roots_aggregates_for_the_unsuffixed_group():
    cloud = aggregated_trees()
    each = funnel_of(cloud, f"resources=VCPU:1&member_of={AGG1}")
    # R, C and SS: a sharing provider in its own tree is one of its providers
    assert counts(each) == [("member_of", 3), ("resources", 2)]
    assert serving(cloud, each) == {"VCPU": ["C", "SS"]}
    each = funnel_of(cloud, f"resources=VCPU:1&member_of=!{AGG1}")
    # R2 and C2: SS shares with no tree but its own, whose root is in AGG1
    assert counts(each) == [("forbidden_aggregates", 2), ("resources", 1)]
    assert serving(cloud, each) == {"VCPU": ["C2"]}


def test_member_of_is_a_granular_groups_providers_own():
    cloud = aggregated_trees()
    each = funnel_of(cloud, f"resources_G=VCPU:1&member_of_G={AGG1}", "_G")
    assert counts(each) == [("member_of", 1), ("resources", 0)]  # R alone, without VCPU
    each = funnel_of(cloud, f"resources_G=VCPU:1&member_of_G=!{AGG1}", "_G")
    assert counts(each) == [("forbidden_aggregates", 4), ("resources", 3)]
    assert serving(cloud, each) == {None: ["C", "SS", "C2"]}


def test_member_of_wants_one_holder_to_meet_every_list():
    # The provider meets one list, its root the other: neither meets both.
    cloud = Cloud()
    cloud.provider("R", aggregates=(AGG1,))
    cloud.provider("C", "R", stock={"VCPU": 4}, aggregates=(AGG2,))
    each = funnel_of(cloud, f"resources=VCPU:1&member_of={AGG1}&member_of={AGG2}")
    assert counts(each) == [("member_of", 0), ("resources", 0)]
    each = funnel_of(cloud, f"resources=VCPU:1&member_of=in:{AGG1},{AGG3}")
    assert counts(each) == [("member_of", 2), ("resources", 1)]


# in_tree and the trees a group can be served in


def shared_disk() -> Cloud:
    """T1 and T2 share S's disk; T3 does not. VCPU on T1's child and T3."""
    cloud = Cloud()
    cloud.provider("T1")
    cloud.provider("T1C", "T1", stock={"VCPU": 4})
    cloud.provider("T2")
    cloud.provider("T3", stock={"VCPU": 4})
    cloud.sharing("S", {"DISK_GB": 100}, ["T1", "T2"])
    return cloud


def test_in_tree_with_an_unknown_uuid_leaves_none():
    cloud = shared_disk()
    each = funnel_of(cloud, f"resources=VCPU:1&in_tree={UNKNOWN}")
    assert counts(each) == [("in_tree", 0), ("resources", 0)]
    assert serving(cloud, each) == {"VCPU": []}
    assert each.trees == set()


def test_in_tree_keeps_out_a_sharing_provider_of_another_tree():
    cloud = shared_disk()
    each = funnel_of(cloud, f"resources=DISK_GB:10&in_tree={cloud.uuid('T1C')}")
    assert counts(each) == [("in_tree", 2), ("resources", 0)]  # T1 and T1C, not S


def test_a_sharing_provider_reaches_every_tree_it_shares_with():
    cloud = shared_disk()
    each = funnel_of(cloud, "resources_D=DISK_GB:10", "_D")
    assert serving(cloud, each) == {None: ["S"]}
    assert each.trees == {cloud.ids[n] for n in ("T1", "T2", "S")}


def test_the_unsuffixed_group_is_served_in_trees_that_hold_every_class():
    cloud = shared_disk()
    each = funnel_of(cloud, "resources=VCPU:1,DISK_GB:10")
    assert serving(cloud, each) == {"VCPU": ["T1C", "T3"], "DISK_GB": ["S"]}
    assert each.trees == {cloud.ids["T1"]}
    req = ask("resources=VCPU:1")
    assert funnel.trees_served(cloud.whole(req), req.groups[""], {}) == set()


# The funnel and the engine never disagree: one list of rules


def test_the_funnel_steps_are_the_engines_rules_in_their_order():
    """On random clouds: every rule eligibility.rules gives a group is a step
    of its funnel, in that order, named and valued as the rule, and the
    steps after them are room, one per requested class."""
    rng = random.Random(29)
    stepped = 0
    for _ in range(300):
        cloud = random_cloud(rng)
        try:
            req = ask(random_request(rng, cloud))
        except Exception:  # a combination parse refuses
            continue
        whole = cloud.whole(req)
        for group in req.groups.values():
            rules = eligibility.rules(group, whole)
            steps = funnel.group_funnel(whole, group).steps
            assert [(s["filter"], s["value"]) for s in steps[: len(rules)]] == [
                (rule.name, rule.asked) for rule in rules
            ]
            assert [s["filter"] for s in steps[len(rules) :]] == ["resources"] * len(
                group.resources
            )
            stepped += len(rules)
    assert stepped > 200, stepped


def test_a_rule_added_to_the_list_is_a_funnel_step_and_a_rule_of_the_walk(monkeypatch):
    """The walk's options and the funnel read the one list: a rule added to
    it (providers with an odd id only) is the funnel's last step before
    room, and the walk's options lose what it keeps out."""
    cloud = filtered_host()
    req = ask(every_filter(cloud))
    group = req.groups["_G"]
    before = funnel.group_funnel(cloud.whole(req), group)
    options = cloud.found(req).options["_G"][None]
    assert options == [cloud.ids["C_OK"]] and options[0] % 2 == 0
    listed = eligibility.rules

    def with_odd_ids(group, within):
        odd = eligibility.Rule("odd_ids", ["odd"], lambda pid: pid % 2 == 1)
        return [*listed(group, within), odd]

    monkeypatch.setattr(eligibility, "rules", with_odd_ids)
    after = funnel.group_funnel(cloud.whole(req), group)
    names = [step["filter"] for step in after.steps]
    assert names == [step["filter"] for step in before.steps][:6] + ["odd_ids"] + names[7:]
    assert names[7:] == ["resources", "resources"]
    assert after.steps[6]["after"] < before.steps[5]["after"]
    assert after.serving == {None: []}
    assert cloud.found(req).options["_G"] == {None: []}


def test_the_funnel_leaves_exactly_the_options_the_engine_gives_each_group():
    """On random clouds: for every group, the funnel's providers (of the
    whole cloud) are eligibility.group_options' (on the Found the search
    loads, which holds room only where there is room for the smallest
    amount of a class). A resourceless group's funnel may also name
    providers of trees the search does not load (no inventory of a
    requested class): those are left out of the comparison."""
    rng = random.Random(44)
    compared = nonempty = resourceless = 0
    for _ in range(400):
        cloud = random_cloud(rng)
        try:
            req = ask(random_request(rng, cloud))
        except Exception:  # a combination parse refuses
            continue
        found = cloud.found(req)
        whole = cloud.whole(req, found)
        for suffix, group in req.groups.items():
            each = funnel.group_funnel(whole, group)
            if not found.options:  # the search found no room at all, and stopped there
                assert not any(each.serving.values()), req
                continue
            options = found.options[suffix]
            if not group.resources:
                loaded = {None: [p for p in each.serving[None] if p in found.providers]}
                assert loaded == options, (req, suffix)
                resourceless += 1
            else:
                assert each.serving == options, (req, suffix)
            nonempty += any(options.values())
        compared += 1
    assert compared > 300 and nonempty > 150 and resourceless > 20, (
        compared,
        nonempty,
        resourceless,
    )


# Like groups: one ask under several suffixes


def test_like_groups_have_one_funnel_and_one_list_of_options(monkeypatch):
    cloud = Cloud()
    cloud.provider("HOST")
    for n in range(3):
        cloud.provider(f"DEV{n}", "HOST", {"VGPU": 1}, traits=("CUSTOM_A",))
    cloud.provider("DEV_B", "HOST", {"VGPU": 1}, traits=("CUSTOM_B",))
    qs = (
        "resources1=VGPU:1&required1=CUSTOM_A&resources2=VGPU:1&required2=CUSTOM_A"
        "&resources3=VGPU:1&required3=CUSTOM_B&group_policy=isolate"
    )
    req = ask(qs)
    worked = []
    real = funnel.group_funnel
    monkeypatch.setattr(
        funnel, "group_funnel", lambda c, g, u=False: worked.append(g.suffix) or real(c, g, u)
    )
    funnels = dict(funnel.group_funnels(cloud.whole(req), req.groups))
    assert worked == ["1", "3"]  # group 2 asks what group 1 asks
    assert funnels["1"] is funnels["2"] and funnels["3"] is not funnels["1"]
    assert serving(cloud, funnels["2"]) == {None: ["DEV0", "DEV1", "DEV2"]}
    assert serving(cloud, funnels["3"]) == {None: ["DEV_B"]}
    found = cloud.found(req)
    assert found.options["1"] is found.options["2"]
    assert cloud.named(found.options["2"][None]) == ["DEV0", "DEV1", "DEV2"]
    assert cloud.named(found.options["3"][None]) == ["DEV_B"]
