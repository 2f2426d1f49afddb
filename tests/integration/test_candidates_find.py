"""candidates.find.find, the whole of GET /allocation_candidates after parsing,
on a real SQLite connection (in memory, schema from the tables' metadata).

What is proven: the body at the latest microversion (allocations and
mappings, summaries with every class of a provider, traits and tree uuids),
and before 1.27 / 1.12 (requested classes only; allocations as a list); a
sharing provider joining a tree's candidate; member_of and root_required
on the rows read; ``limit``, the max_allocation_candidates cap and the
breadth-first strategy as Settings; ``rng`` giving a random order; unknown
trait names answered as a 400.
"""

from __future__ import annotations

import random

import pytest
import sqlalchemy as sa
from microversion_parse import Version

from placement_svc.candidates.find import Settings, find
from placement_svc.candidates.model import UnknownNames
from placement_svc.db import tables
from tests.support.cloud_rows import Cloud, uuid_of
from tests.unit.test_candidates_merge import LATEST, ask

CLASSES = {"VCPU": 0, "MEMORY_MB": 1, "DISK_GB": 2}
SHARING = "MISC_SHARES_VIA_AGGREGATE"
AGG = "aaaaaaaa-aaaa-4aaa-8aaa-aaaaaaaaaaaa"


@pytest.fixture
def conn():
    engine = sa.create_engine("sqlite://")
    with engine.connect() as connection:
        tables.metadata.create_all(connection)
        cloud = Cloud(connection, CLASSES)
        # host1: all it needs itself; host2: its disk from the shared storage.
        cloud.provider(
            "host1",
            inventory={"VCPU": 8, "MEMORY_MB": 4096, "DISK_GB": 100},
            traits=["CUSTOM_FAST"],
            used={"VCPU": 2},
        )
        cloud.provider("numa1", parent="host1", inventory={"VCPU": 2})
        cloud.provider("host2", inventory={"VCPU": 4, "MEMORY_MB": 2048}, aggregates=[AGG])
        cloud.provider("numa2", parent="host2", inventory={"VCPU": 2})
        cloud.provider("storage", inventory={"DISK_GB": 1000}, traits=[SHARING], aggregates=[AGG])
        yield connection
    engine.dispose()


H1, NUMA1, H2, NUMA2, STORAGE = map(uuid_of, ("host1", "numa1", "host2", "numa2", "storage"))


def allocations(body) -> list[dict[str, dict[str, int]]]:
    """Each candidate as provider uuid -> class -> amount (1.12+)."""
    return [
        {uuid: r["resources"] for uuid, r in c["allocations"].items()}
        for c in body["allocation_requests"]
    ]


def test_the_latest_body_has_mappings_and_whole_summaries(conn):
    body = find(conn, ask("resources=VCPU:1,DISK_GB:10"), LATEST)
    assert body["allocation_requests"] == [
        {
            "allocations": {H1: {"resources": {"VCPU": 1, "DISK_GB": 10}}},
            "mappings": {"": [H1]},
        },
        {
            "allocations": {
                NUMA1: {"resources": {"VCPU": 1}},
                H1: {"resources": {"DISK_GB": 10}},
            },
            "mappings": {"": [NUMA1, H1]},
        },
        {
            "allocations": {
                H2: {"resources": {"VCPU": 1}},
                STORAGE: {"resources": {"DISK_GB": 10}},
            },
            "mappings": {"": [H2, STORAGE]},
        },
        {
            "allocations": {
                NUMA2: {"resources": {"VCPU": 1}},
                STORAGE: {"resources": {"DISK_GB": 10}},
            },
            "mappings": {"": [NUMA2, STORAGE]},
        },
    ]
    vcpu_of_numa = {"resources": {"VCPU": {"capacity": 2, "used": 0}}, "traits": []}
    assert body["provider_summaries"] == {
        H1: {
            "resources": {
                "DISK_GB": {"capacity": 100, "used": 0},
                "MEMORY_MB": {"capacity": 4096, "used": 0},
                "VCPU": {"capacity": 8, "used": 2},
            },
            "traits": ["CUSTOM_FAST"],
            "parent_provider_uuid": None,
            "root_provider_uuid": H1,
        },
        NUMA1: {**vcpu_of_numa, "parent_provider_uuid": H1, "root_provider_uuid": H1},
        H2: {
            "resources": {
                "MEMORY_MB": {"capacity": 2048, "used": 0},
                "VCPU": {"capacity": 4, "used": 0},
            },
            "traits": [],
            "parent_provider_uuid": None,
            "root_provider_uuid": H2,
        },
        NUMA2: {**vcpu_of_numa, "parent_provider_uuid": H2, "root_provider_uuid": H2},
        STORAGE: {
            "resources": {"DISK_GB": {"capacity": 1000, "used": 0}},
            "traits": [SHARING],
            "parent_provider_uuid": None,
            "root_provider_uuid": STORAGE,
        },
    }


def test_before_1_27_summaries_show_the_requested_classes_only(conn):
    version = Version(1, 26)
    body = find(conn, ask("resources=VCPU:1", version), version)
    assert list(body["provider_summaries"]) == [H1, NUMA1, H2, NUMA2]
    assert body["provider_summaries"][H1] == {
        "resources": {"VCPU": {"capacity": 8, "used": 2}},
        "traits": ["CUSTOM_FAST"],
    }


def test_before_1_12_allocations_are_a_list(conn):
    version = Version(1, 10)
    body = find(conn, ask("resources=MEMORY_MB:1024", version), version)
    assert body == {
        "allocation_requests": [
            {
                "allocations": [
                    {"resource_provider": {"uuid": H1}, "resources": {"MEMORY_MB": 1024}}
                ]
            },
            {
                "allocations": [
                    {"resource_provider": {"uuid": H2}, "resources": {"MEMORY_MB": 1024}}
                ]
            },
        ],
        "provider_summaries": {
            H1: {"resources": {"MEMORY_MB": {"capacity": 4096, "used": 0}}},
            H2: {"resources": {"MEMORY_MB": {"capacity": 2048, "used": 0}}},
        },
    }


def test_limit_and_the_cap_cut_the_answer_in_generation_order(conn):
    assert allocations(find(conn, ask("resources=VCPU:1&limit=2"), LATEST)) == [
        {H1: {"VCPU": 1}},
        {NUMA1: {"VCPU": 1}},
    ]
    capped = find(conn, ask("resources=MEMORY_MB:1"), LATEST, Settings(max_candidates=1))
    assert allocations(capped) == [{H1: {"MEMORY_MB": 1}}]
    assert list(capped["provider_summaries"]) == [H1, NUMA1]


def test_breadth_first_takes_a_candidate_from_each_tree_in_turn(conn):
    wanted = ask("resources=VCPU:1")
    assert allocations(find(conn, wanted, LATEST)) == [
        {H1: {"VCPU": 1}},
        {NUMA1: {"VCPU": 1}},
        {H2: {"VCPU": 1}},
        {NUMA2: {"VCPU": 1}},
    ]
    breadth_first = Settings(strategy="breadth-first")
    assert allocations(find(conn, wanted, LATEST, breadth_first)) == [
        {H1: {"VCPU": 1}},
        {H2: {"VCPU": 1}},
        {NUMA1: {"VCPU": 1}},
        {NUMA2: {"VCPU": 1}},
    ]
    cut = Settings(strategy="breadth-first", max_candidates=2)
    assert allocations(find(conn, wanted, LATEST, cut)) == [{H1: {"VCPU": 1}}, {H2: {"VCPU": 1}}]


def test_an_rng_gives_the_same_candidates_in_a_random_order(conn):
    wanted = ask("resources=VCPU:1")
    ordered = allocations(find(conn, wanted, LATEST))
    orders = {
        tuple(map(str, allocations(find(conn, wanted, LATEST, rng=random.Random(seed)))))
        for seed in range(20)
    }
    assert {frozenset(order) for order in orders} == {frozenset(map(str, ordered))}
    assert len(orders) > 1


def test_unknown_names_are_a_fact_of_the_search_traits_first(conn):
    """The search reports names the database lacks as a fact (the API
    words it: api/allocation_candidates.searching)."""
    with pytest.raises(UnknownNames) as raised:
        find(conn, ask("resources=CUSTOM_NONE:1&required=CUSTOM_NOWHERE"), LATEST)
    assert (raised.value.traits, raised.value.classes) == (["CUSTOM_NOWHERE"], [])
    with pytest.raises(UnknownNames) as raised:
        find(conn, ask("resources=CUSTOM_NONE:1,CUSTOM_ZERO:1"), LATEST)
    assert (raised.value.traits, raised.value.classes) == ([], ["CUSTOM_NONE", "CUSTOM_ZERO"])


def test_the_filters_apply_to_the_rows_read(conn):
    """member_of through the loaded aggregates (numa2 by its root's);
    root_required through the loaded traits of the roots."""
    assert allocations(find(conn, ask(f"resources=VCPU:1&member_of={AGG}"), LATEST)) == [
        {H2: {"VCPU": 1}},
        {NUMA2: {"VCPU": 1}},
    ]
    assert allocations(find(conn, ask("resources=VCPU:1&root_required=CUSTOM_FAST"), LATEST)) == [
        {H1: {"VCPU": 1}},
        {NUMA1: {"VCPU": 1}},
    ]
