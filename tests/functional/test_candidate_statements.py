"""The number of SQL statements GET /allocation_candidates runs does not grow
with the number of providers: counted for a cloud of 4 hosts and of 40 hosts
(each a root with two NUMA children, sharing storage, traits and aggregates).
Nor do those of its explanation and its capacity count (1.44), which read
the whole cloud besides. An answer known empty from the shape of the cloud
alone reads no usage at all."""

from __future__ import annotations

import uuid
from functools import partial

import pytest
from sqlalchemy import event

from placement_svc import app
from placement_svc.db.engine import Database, create_engine
from tests.support import fixtures
from tests.support.small_cloud import api_provider

QUERIES = [
    "resources=VCPU:1,MEMORY_MB:512,DISK_GB:10",
    "resources=VCPU:1,MEMORY_MB:512&resources1=DISK_GB:10&required=CUSTOM_FAST",
    "resources=MEMORY_MB:512&resources_A=VCPU:1&resources_B=VCPU:1&group_policy=isolate"
    "&root_required=!CUSTOM_OFF",
    "resources=VCPU:1&member_of=in:{agg}&limit=5",
    # root_member_of (1.40) reads the roots' aggregates in one statement
    "resources=VCPU:1,MEMORY_MB:512&root_member_of={agg}&root_member_of=!{other}",
]


def _build(client, hosts: int, agg: str) -> None:
    provider = partial(api_provider, client)

    client.put("/traits/CUSTOM_FAST")
    client.put("/traits/CUSTOM_OFF")
    provider(
        "storage",
        inventory={"DISK_GB": 10000},
        traits=["MISC_SHARES_VIA_AGGREGATE"],
        aggregates=[agg],
    )
    for index in range(hosts):
        host = provider(
            f"host{index}",
            inventory={"MEMORY_MB": 4096, "DISK_GB": 100},
            traits=["CUSTOM_FAST"] if index % 2 else [],
            aggregates=[agg],
        )
        for numa in range(2):
            provider(f"host{index}-numa{numa}", parent=host, inventory={"VCPU": 8})


# path -> what says the answer is not empty
PATHS = {
    "/allocation_candidates": lambda body: body["allocation_requests"],
    "/allocation_candidates/explain": lambda body: body["candidates"],
    "/allocation_candidates/capacity": lambda body: body["total"],
}


def _statements(test_db, hosts, path):
    test_db.reset()
    engine = create_engine(test_db.url)
    client = fixtures.api_client(app.create_app(fixtures.make_conf(), Database(engine)))
    agg = str(uuid.uuid4())
    _build(client, hosts, agg)
    counts = []
    for query in QUERIES:
        seen = []

        def listener(*args, seen=seen):
            seen.append(args[2])  # the statement text

        event.listen(engine, "before_cursor_execute", listener)
        try:
            answer = client.get(f"{path}?" + query.format(agg=agg, other=uuid.uuid4()))
        finally:
            event.remove(engine, "before_cursor_execute", listener)
        assert answer.status_code == 200, answer.text
        assert PATHS[path](answer.json()), query
        counts.append(len(seen))
    engine.dispose()
    return counts


@pytest.mark.parametrize("path", PATHS)
def test_statement_count_does_not_grow_with_providers(test_db, path):
    small = _statements(test_db, hosts=4, path=path)
    large = _statements(test_db, hosts=40, path=path)
    assert small == large
    assert max(large) <= 15


def test_an_answer_known_empty_from_the_shape_reads_no_usage(test_db):
    """No inventory holds 9 VCPU (a NUMA node has 8): the answer is empty
    before any usage is read, in as many statements for 40 hosts as for 4."""
    counted = []
    for hosts in (4, 40):
        test_db.reset()
        engine = create_engine(test_db.url)
        client = fixtures.api_client(app.create_app(fixtures.make_conf(), Database(engine)))
        _build(client, hosts, str(uuid.uuid4()))
        assert client.get("/allocation_candidates?resources=VCPU:1").status_code == 200
        seen: list[str] = []

        def listener(*args, seen=seen):
            seen.append(args[2])

        event.listen(engine, "before_cursor_execute", listener)
        try:
            answer = client.get("/allocation_candidates?resources=VCPU:9,MEMORY_MB:512")
        finally:
            event.remove(engine, "before_cursor_execute", listener)
        engine.dispose()
        assert answer.status_code == 200, answer.text
        assert answer.json()["allocation_requests"] == []
        assert [text for text in seen if "allocations" in text] == []
        counted.append(len(seen))
    assert counted[0] == counted[1] and counted[0] <= 4, counted
