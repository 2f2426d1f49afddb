"""A nova-shaped compute host registered two ways ends the same (issue 32).

The host: a root compute node (VCPU, MEMORY_MB; COMPUTE_* and other
standard traits and a CUSTOM_ one; in an aggregate), two NUMA nodes under
it (VCPU, PCPU, MEMORY_MB, one with a CUSTOM_ resource class), two
physical NICs under it (NET_BW_EGR/IGR_KILOBIT_PER_SEC, CUSTOM_PHYSNET_
traits) and four vGPUs, two under each NUMA node (VGPU, CUSTOM_VGPU_TYPE_
traits); and a SEPARATE sharing provider, a tree of its own, with the
host's DISK_GB (MISC_SHARES_VIA_AGGREGATE, in the host's aggregate).

Registered on a fresh database each way, through the whole application
on every backend of the matrix, with the same uuids:

(a) as nova's report client and an operator do it at 1.39, one thing per
    request: custom classes (PUT /resource_classes/{name}) and custom
    traits (PUT /traits/{name}) first, providers top-down (POST
    /resource_providers with parent_provider_uuid), then per provider its
    inventories, traits and aggregates (PUT, each with the generation the
    last answer gave). The requests are counted: 39.
(b) one PUT /resource_provider_trees/{root} per tree at 1.49: 2 requests.

Then both end states are read the same way and compared: the trees
(GET /resource_providers?in_tree= at 1.39), each provider's inventories,
traits and aggregates (its own reads), GET /resource_provider_trees/{root}
(generations aside: single writes move them, the tree PUT leaves new
providers at 0), and the status and body of nova-shaped GET
/allocation_candidates queries (the candidates as a set), whose counts are
also checked against what the host definition gives by hand. Then one
vGPU child changes (its VGPU total and a trait, a new CUSTOM_ one) both
ways, and the end states are compared again; with the tree PUT only that
child's generation moved, by exactly 1, and the other tree's did not.
"""

from __future__ import annotations

import json
import uuid
from collections import Counter
from typing import Any

import pytest

from placement_svc import app
from tests.support import databases, fixtures

SINGLE = "1.39"  # what nova's report client asks for at most
TREES = "1.49"


def _uuid(name: str) -> str:
    return str(uuid.uuid5(uuid.NAMESPACE_URL, f"nova-tree-registration/{name}"))


AGG = _uuid("aggregate:az1")
PMEM = "CUSTOM_PMEM_NAMESPACE_4GB"
VGPU_A, VGPU_B, VGPU_C = "CUSTOM_VGPU_TYPE_A", "CUSTOM_VGPU_TYPE_B", "CUSTOM_VGPU_TYPE_C"
PHYSNET0, PHYSNET1 = "CUSTOM_PHYSNET_PHYSNET0", "CUSTOM_PHYSNET_PHYSNET1"
GOLD = "CUSTOM_HOST_GOLD"


def _provider(name, parent, inventories, traits, aggregates=()) -> dict[str, Any]:
    return {
        "name": name,
        "uuid": _uuid(name),
        "parent": _uuid(parent) if parent else None,
        "inventories": inventories,
        "traits": sorted(traits),
        "aggregates": sorted(aggregates),
    }


def _bandwidth() -> dict[str, dict]:
    # only the total: the other fields take their defaults, on both ways
    return {
        "NET_BW_EGR_KILOBIT_PER_SEC": {"total": 10_000_000},
        "NET_BW_IGR_KILOBIT_PER_SEC": {"total": 10_000_000},
    }


def _vgpu(total: int) -> dict[str, dict]:
    return {"VGPU": {"total": total, "max_unit": total, "min_unit": 1, "step_size": 1}}


def _numa(extra: dict) -> dict[str, dict]:
    return {
        "VCPU": {"total": 8, "max_unit": 8, "allocation_ratio": 4.0},
        "PCPU": {"total": 8, "max_unit": 8, "allocation_ratio": 1.0},
        "MEMORY_MB": {"total": 65536, "reserved": 0, "max_unit": 65536},
        **extra,
    }


# The host, parents before children (the order of the single writes).
HOST = [
    _provider(
        "cn1",
        None,
        {
            "VCPU": {"total": 16, "reserved": 0, "max_unit": 16, "allocation_ratio": 4.0},
            "MEMORY_MB": {
                "total": 32768,
                "reserved": 512,
                "min_unit": 1,
                "max_unit": 32768,
                "step_size": 1,
                "allocation_ratio": 1.5,
            },
        },
        [
            "COMPUTE_VOLUME_MULTI_ATTACH",
            "COMPUTE_NET_ATTACH_INTERFACE",
            "COMPUTE_IMAGE_TYPE_QCOW2",
            "HW_CPU_X86_AVX2",
            GOLD,
        ],
        [AGG],
    ),
    _provider("cn1_numa1", "cn1", _numa({PMEM: {"total": 2}}), ["HW_NUMA_ROOT"]),
    _provider("cn1_numa0", "cn1", _numa({}), ["HW_NUMA_ROOT"]),
    _provider("cn1_nic1", "cn1", _bandwidth(), [PHYSNET1, "CUSTOM_VNIC_TYPE_NORMAL"]),
    _provider("cn1_nic0", "cn1", _bandwidth(), [PHYSNET0, "CUSTOM_VNIC_TYPE_NORMAL"]),
    _provider("cn1_numa0_vgpu1", "cn1_numa0", _vgpu(4), [VGPU_A, "HW_GPU_API_VULKAN"]),
    _provider("cn1_numa0_vgpu0", "cn1_numa0", _vgpu(4), [VGPU_A, "HW_GPU_API_VULKAN"]),
    _provider("cn1_numa1_vgpu2", "cn1_numa1", _vgpu(4), [VGPU_A]),
    _provider("cn1_numa1_vgpu3", "cn1_numa1", _vgpu(4), [VGPU_B]),
]
SHARE = [
    _provider(
        "shared_disk",
        None,
        {"DISK_GB": {"total": 10000, "reserved": 100, "max_unit": 2000, "allocation_ratio": 1.0}},
        ["MISC_SHARES_VIA_AGGREGATE", "STORAGE_DISK_SSD"],
        [AGG],
    )
]
ROOT, SHARE_ROOT = HOST[0]["uuid"], SHARE[0]["uuid"]
TREES_OF = {ROOT: HOST, SHARE_ROOT: SHARE}
BY_NAME = {p["name"]: p for p in HOST + SHARE}
CHANGED = "cn1_numa0_vgpu1"

# GET /resource_provider_trees/{root}: depth first from the root, siblings
# by name, whatever order they were written in.
TREE_ORDER = [
    "cn1",
    "cn1_nic0",
    "cn1_nic1",
    "cn1_numa0",
    "cn1_numa0_vgpu0",
    "cn1_numa0_vgpu1",
    "cn1_numa1",
    "cn1_numa1_vgpu2",
    "cn1_numa1_vgpu3",
]

# nova-shaped queries (at 1.39) and the candidates the host gives by hand,
# before and after the change of CHANGED (None: not counted by hand).
# The unsuffixed group may be spread over the tree (1.29+): VCPU and
# MEMORY_MB each from cn1, cn1_numa0 or cn1_numa1.
QUERIES = {
    # 3 x 3 for VCPU and MEMORY_MB, times the vGPUs of type A: 3, then 2
    "vgpu": (
        f"resources=VCPU:2,MEMORY_MB:1024&resources1=VGPU:1&required1={VGPU_A}",
        27,
        18,
    ),
    # DISK_GB only from the sharing provider; the unsuffixed group's traits
    # are met by the providers it takes together
    "shared disk": (
        "resources=VCPU:1,MEMORY_MB:512,DISK_GB:20&required=COMPUTE_VOLUME_MULTI_ATTACH",
        None,
        None,
    ),
    "aggregate and root trait": (
        f"resources=VCPU:1,DISK_GB:10&member_of={AGG}&root_required={GOLD}",
        3,
        3,
    ),
    "bandwidth on a physnet": (
        "resources=VCPU:1&resources_NET=NET_BW_EGR_KILOBIT_PER_SEC:1000,"
        f"NET_BW_IGR_KILOBIT_PER_SEC:1000&required_NET={PHYSNET1}",
        3,
        3,
    ),
    "pinned CPUs beside a vGPU": (
        f"resources_CPU=PCPU:2&resources_GPU=VGPU:1&required_GPU={VGPU_B}"
        "&same_subtree=_CPU,_GPU&group_policy=none",
        1,
        1,
    ),
    "persistent memory": (f"resources=MEMORY_MB:1024&resources_PM={PMEM}:1", 3, 3),
    # the changed child's new trait: unknown (400) before, then VGPU:2 on it
    "new vGPU type": (f"resources=VCPU:1&resources1=VGPU:2&required1={VGPU_C}", None, 3),
    "vGPU too large": ("resources=VCPU:1&resources1=VGPU:5", 0, 0),
}


class Counting:
    """An in-process client of a fresh application that counts requests."""

    def __init__(self, test_db: databases.TestDatabase):
        self.client = fixtures.api_client(
            app.create_app(fixtures.make_conf(), test_db.db),
            headers={"x-auth-token": "admin"},
        )
        self.requests = 0

    def call(self, method: str, path: str, version: str, body=None, headers=None, expect=(200,)):
        sent = {"openstack-api-version": f"placement {version}", **(headers or {})}
        answer = self.client.request(method, path, json=body, headers=sent)
        self.requests += 1
        assert answer.status_code in expect, (method, path, answer.status_code, answer.text)
        return answer


# -- (a) single requests at 1.39 ---------------------------------------------------


def register_single(api: Counting) -> dict[str, int]:
    """The host and the sharing provider, one thing per request; every
    provider's generation as the last answer gave it."""
    everything = HOST + SHARE
    classes = sorted(
        {rc for p in everything for rc in p["inventories"] if rc.startswith("CUSTOM_")}
    )
    for rc in classes:
        api.call("PUT", f"/resource_classes/{rc}", SINGLE, expect=(201,))
    custom = sorted({t for p in everything for t in p["traits"] if t.startswith("CUSTOM_")})
    for trait in custom:
        api.call("PUT", f"/traits/{trait}", SINGLE, expect=(201,))
    generations = {}
    for p in everything:  # top-down: every parent is created before its children
        body = {"name": p["name"], "uuid": p["uuid"]}
        if p["parent"]:
            body["parent_provider_uuid"] = p["parent"]
        created = api.call("POST", "/resource_providers", SINGLE, body).json()
        generations[p["uuid"]] = created["generation"]
    for p in everything:
        for part, value in (
            ("inventories", p["inventories"]),
            ("traits", p["traits"]),
            ("aggregates", p["aggregates"]),
        ):
            if not value:
                continue
            body = {part: value, "resource_provider_generation": generations[p["uuid"]]}
            answer = api.call("PUT", f"/resource_providers/{p['uuid']}/{part}", SINGLE, body)
            generations[p["uuid"]] = answer.json()["resource_provider_generation"]
    return generations


def change_single(api: Counting, generations: dict[str, int]) -> None:
    """CHANGED's VGPU total 4 -> 2 and its type A -> C, as nova would."""
    rp = BY_NAME[CHANGED]["uuid"]
    api.call("PUT", f"/traits/{VGPU_C}", SINGLE, expect=(201,))
    body = {"inventories": _vgpu(2), "resource_provider_generation": generations[rp]}
    answer = api.call("PUT", f"/resource_providers/{rp}/inventories", SINGLE, body)
    traits = sorted([VGPU_C, "HW_GPU_API_VULKAN"])
    body = {
        "traits": traits,
        "resource_provider_generation": answer.json()["resource_provider_generation"],
    }
    api.call("PUT", f"/resource_providers/{rp}/traits", SINGLE, body)


# -- (b) one PUT per tree at 1.49 ---------------------------------------------------


def tree_body(root: str, providers: list[dict]) -> dict[str, Any]:
    return {
        "root": root,
        "providers": [
            {
                "uuid": p["uuid"],
                "name": p["name"],
                "parent_provider_uuid": p["parent"],
                "inventories": p["inventories"],
                "traits": p["traits"],
                "aggregates": p["aggregates"],
            }
            for p in providers
        ],
    }


def register_trees(api: Counting) -> dict[str, dict]:
    answers = {}
    for root, providers in TREES_OF.items():
        answer = api.call(
            "PUT", f"/resource_provider_trees/{root}", TREES, tree_body(root, providers)
        )
        assert answer.headers.get("etag"), answer.headers
        body = answer.json()
        assert set(body) == {"root", "providers"} and body["root"] == root
        # new providers are at generation 0 once written
        assert [p["generation"] for p in body["providers"]] == [0] * len(providers), body
        answers[root] = body
    return answers


# -- the end state, read the same way on both databases ----------------------------


def canonical(value) -> str:
    return json.dumps(value, sort_keys=True)


def candidates(api: Counting, query: str, version: str = SINGLE) -> tuple[int, Any]:
    answer = api.client.get(
        f"/allocation_candidates?{query}", headers={"openstack-api-version": f"placement {version}"}
    )
    if answer.status_code != 200:
        return answer.status_code, answer.json()["errors"][0]["detail"]
    body = answer.json()
    requests = [canonical(r) for r in body["allocation_requests"]]
    assert len(requests) == len(set(requests)), query  # no candidate twice
    return 200, {"requests": sorted(requests), "summaries": body["provider_summaries"]}


def end_state(api: Counting) -> tuple[dict[str, Any], dict[str, int]]:
    """What the database holds, without generations; and the generations."""
    state: dict[str, Any] = {}
    generations: dict[str, int] = {}
    for root, providers in TREES_OF.items():
        listed = api.call("GET", f"/resource_providers?in_tree={root}", SINGLE).json()
        rows = sorted(listed["resource_providers"], key=lambda p: p["uuid"])
        for row in rows:
            generations[row["uuid"]] = row.pop("generation")
        state[f"in_tree {root}"] = rows
        assert {r["uuid"] for r in rows} == {p["uuid"] for p in providers}
        for p in providers:
            own = {}
            for part in ("inventories", "traits", "aggregates"):
                body = api.call("GET", f"/resource_providers/{p['uuid']}/{part}", SINGLE).json()
                assert body.pop("resource_provider_generation") == generations[p["uuid"]]
                own[part] = sorted(body[part]) if part != "inventories" else body[part]
            state[f"provider {p['name']}"] = own
        tree = api.call("GET", f"/resource_provider_trees/{root}", TREES)
        body = tree.json()
        assert set(body) == {"root", "providers"} and body["root"] == root
        for listed_provider in body["providers"]:
            assert listed_provider.pop("generation") == generations[listed_provider["uuid"]]
        state[f"tree {root}"] = body
    every = api.call("GET", "/resource_providers", SINGLE).json()["resource_providers"]
    state["every provider"] = sorted(p["uuid"] for p in every)
    for label, (query, _before, _after) in QUERIES.items():
        state[f"candidates {label}"] = candidates(api, query)
    return state, generations


def check_against_the_definition(state: dict[str, Any], changed: bool) -> None:
    """The end state holds what the host definition says: not only the two
    ways agreeing, but agreeing with what was meant."""
    for p in HOST + SHARE:
        inventories = _vgpu(2) if changed and p["name"] == CHANGED else p["inventories"]
        traits = (
            sorted([VGPU_C, "HW_GPU_API_VULKAN"])
            if changed and p["name"] == CHANGED
            else p["traits"]
        )
        own = state[f"provider {p['name']}"]
        assert own["traits"] == traits, p["name"]
        assert own["aggregates"] == p["aggregates"], p["name"]
        assert set(own["inventories"]) == set(inventories), p["name"]
        for rc, fields in inventories.items():
            read = own["inventories"][rc]
            for key, value in fields.items():
                assert read[key] == value, (p["name"], rc, key)
            # the defaults of the fields not given
            defaults = {"reserved": 0, "min_unit": 1, "step_size": 1, "allocation_ratio": 1.0}
            for key, value in defaults.items():
                if key not in fields:
                    assert read[key] == value, (p["name"], rc, key)
    tree = state[f"tree {ROOT}"]
    assert [p["name"] for p in tree["providers"]] == TREE_ORDER
    for p in tree["providers"]:
        own = state[f"provider {p['name']}"]
        assert p["parent_provider_uuid"] == BY_NAME[p["name"]]["parent"]
        assert p["traits"] == own["traits"] and p["aggregates"] == own["aggregates"]
        assert p["inventories"] == own["inventories"], p["name"]
    assert [p["name"] for p in state[f"tree {SHARE_ROOT}"]["providers"]] == ["shared_disk"]
    for row in state[f"in_tree {ROOT}"]:
        assert row["root_provider_uuid"] == ROOT
        assert row["parent_provider_uuid"] == BY_NAME[row["name"]]["parent"]
    for label, (_query, before, after) in QUERIES.items():
        expected = after if changed else before
        status, body = state[f"candidates {label}"]
        if label == "new vGPU type" and not changed:
            assert status == 400 and VGPU_C in body, (label, status, body)
            continue
        assert status == 200, (label, body)
        if expected is not None:
            assert len(body["requests"]) == expected, (label, len(body["requests"]))
        else:
            assert body["requests"], label
    # every shared-disk candidate takes its DISK_GB from the sharing provider
    # and names the root: the trait is the root's alone
    status, body = state["candidates shared disk"]
    for one in map(json.loads, body["requests"]):
        assert one["allocations"][SHARE_ROOT] == {"resources": {"DISK_GB": 20}}
        assert ROOT in one["allocations"], one
    # the vGPU candidates are on vGPUs of type A only
    type_a = {
        p["uuid"] for p in HOST if VGPU_A in p["traits"] and not (changed and p["name"] == CHANGED)
    }
    status, body = state["candidates vgpu"]
    for one in map(json.loads, body["requests"]):
        assert set(one["mappings"]["1"]) <= type_a, one


@pytest.fixture
def two_ways(test_db):
    """Each way on a fresh database: its end states after registration and
    after the change, its request counts, and the tree PUT's answers."""
    single = Counting(test_db)
    generations = register_single(single)
    registered_requests = single.requests
    state_a, generations_a = end_state(single)
    assert generations_a == generations  # the answers gave the generations it is at
    single.requests = 0
    change_single(single, generations)
    changed_requests = single.requests
    changed_a, _gens = end_state(single)

    test_db.reset()
    trees = Counting(test_db)
    answers = register_trees(trees)
    tree_requests = trees.requests
    state_b, generations_b = end_state(trees)
    return {
        "single": (state_a, changed_a, registered_requests, changed_requests),
        "trees": (trees, answers, state_b, generations_b, tree_requests),
    }


def test_both_registrations_end_the_same(two_ways):
    state_a, _changed_a, registered, _changed = two_ways["single"]
    _trees, answers, state_b, generations_b, tree_requests = two_ways["trees"]
    # 1 custom class, 6 custom traits, 10 providers, 10 inventories,
    # 10 traits, 2 aggregates
    assert registered == 39
    assert tree_requests == 2
    assert set(generations_b.values()) == {0}
    check_against_the_definition(state_a, changed=False)
    check_against_the_definition(state_b, changed=False)
    differing = sorted(
        k for k in state_a.keys() | state_b.keys() if state_a.get(k) != state_b.get(k)
    )
    assert not differing, {k: (state_a.get(k), state_b.get(k)) for k in differing[:2]}
    # the PUT's answer is the GET's body (generations included)
    for root, body in answers.items():
        got = _trees.call("GET", f"/resource_provider_trees/{root}", TREES).json()
        assert got == body


def test_an_unchanged_tree_put_moves_nothing(two_ways):
    trees, _answers, _state_b, _generations_b, _requests = two_ways["trees"]
    before = trees.call("GET", f"/resource_provider_trees/{ROOT}", TREES)
    tag = before.headers["etag"]
    again = trees.call("PUT", f"/resource_provider_trees/{ROOT}", TREES, before.json())
    assert again.json() == before.json()
    assert again.headers["etag"] == tag
    not_modified = trees.call(
        "GET",
        f"/resource_provider_trees/{ROOT}",
        TREES,
        headers={"if-none-match": tag},
        expect=(304,),
    )
    assert not_modified.content == b""


def test_one_child_changed_both_ways_ends_the_same(two_ways):
    _state_a, changed_a, _registered, changed_requests = two_ways["single"]
    trees, _answers, _state_b, _generations_b, _requests = two_ways["trees"]
    assert changed_requests == 3  # the new trait, the inventories, the traits

    share_tag = trees.call("GET", f"/resource_provider_trees/{SHARE_ROOT}", TREES).headers["etag"]
    before = trees.call("GET", f"/resource_provider_trees/{ROOT}", TREES).json()
    body = json.loads(json.dumps(before))
    (child,) = [p for p in body["providers"] if p["name"] == CHANGED]
    child["inventories"] = _vgpu(2)
    child["traits"] = sorted([VGPU_C, "HW_GPU_API_VULKAN"])
    trees.requests = 0
    put = trees.call("PUT", f"/resource_provider_trees/{ROOT}", TREES, body)
    answer = put.json()
    assert trees.requests == 1

    # the PUT's ETag is the one the next GET has: a conditional read at once
    trees.call(
        "GET",
        f"/resource_provider_trees/{ROOT}",
        TREES,
        headers={"if-none-match": put.headers["etag"]},
        expect=(304,),
    )
    was = {p["uuid"]: p["generation"] for p in before["providers"]}
    now = {p["uuid"]: p["generation"] for p in answer["providers"]}
    moved = {rp: now[rp] - was[rp] for rp in was if now[rp] != was[rp]}
    assert moved == {BY_NAME[CHANGED]["uuid"]: 1}, moved
    assert set(now) == set(was)
    # the other tree was not touched
    trees.call(
        "GET",
        f"/resource_provider_trees/{SHARE_ROOT}",
        TREES,
        headers={"if-none-match": share_tag},
        expect=(304,),
    )

    changed_b, generations_b = end_state(trees)
    assert generations_b == {**now, SHARE_ROOT: 0}
    check_against_the_definition(changed_a, changed=True)
    check_against_the_definition(changed_b, changed=True)
    differing = sorted(
        k for k in changed_a.keys() | changed_b.keys() if changed_a.get(k) != changed_b.get(k)
    )
    assert not differing, {k: (changed_a.get(k), changed_b.get(k)) for k in differing[:2]}


def test_the_definition_is_what_the_counts_say():
    """The figures above, from the definition itself."""
    everything = HOST + SHARE
    assert len(HOST) == 9 and len({p["uuid"] for p in everything}) == 10
    classes = {rc for p in everything for rc in p["inventories"] if rc.startswith("CUSTOM_")}
    traits = {t for p in everything for t in p["traits"] if t.startswith("CUSTOM_")}
    writes = sum(
        bool(p[part]) for p in everything for part in ("inventories", "traits", "aggregates")
    )
    assert len(classes) + len(traits) + len(everything) + writes == 39
    assert Counter(p["parent"] for p in HOST)[ROOT] == 4
