"""GET /resource_providers?include=... (1.45) reads each embedded
sub-resource in one statement, whatever the number of providers: counted
for a tree of 4 providers and one of 40, on every backend."""

from __future__ import annotations

import uuid

from sqlalchemy import event

from placement_svc import app
from placement_svc.db import embedded
from placement_svc.db.engine import Database, create_engine
from tests.support import fixtures, small_cloud

INCLUDE = "include=inventories,traits,aggregates,usages"


def _statements(test_db, providers: int) -> tuple[int, dict]:
    test_db.reset()
    engine = create_engine(test_db.url)
    client = fixtures.api_client(app.create_app(fixtures.make_conf(), Database(engine)))
    root = str(uuid.uuid4())
    aggregate = str(uuid.uuid4())
    small_cloud.one_tree(client, providers, root, aggregate, {"VCPU": 8})
    seen: list[str] = []

    def listener(*args):
        seen.append(args[2])

    event.listen(engine, "before_cursor_execute", listener)
    try:
        answer = client.get(f"/resource_providers?in_tree={root}&{INCLUDE}")
    finally:
        event.remove(engine, "before_cursor_execute", listener)
    engine.dispose()
    assert answer.status_code == 200, answer.text
    return len(seen), answer.json()


def test_the_statement_count_does_not_grow_with_the_providers(test_db):
    small, few = _statements(test_db, 4)
    large, many = _statements(test_db, 40)
    assert small == large <= 10
    assert len(few["resource_providers"]) == 4 and len(many["resource_providers"]) == 40
    last = many["resource_providers"][-1]
    assert last["traits"] == {"traits": ["HW_CPU_X86_AVX2"], "resource_provider_generation": 3}
    assert last["usages"] == {"resource_provider_generation": 3, "usages": {"VCPU": 0}}


def test_a_long_list_reads_every_row_and_keeps_its_own(test_db, monkeypatch):
    """Past embedded.LISTED_AT_MOST providers the reads name none (no IN list
    of thousands, nor past SQLite's 32,766 parameters) and keep the rows of
    the providers listed: the same bodies, in as many statements, as a list
    that names them; another tree's rows stay out."""
    test_db.reset()
    engine = create_engine(test_db.url)
    client = fixtures.api_client(app.create_app(fixtures.make_conf(), Database(engine)))
    mine = str(uuid.uuid4())
    small_cloud.one_tree(client, 5, mine, str(uuid.uuid4()), {"VCPU": 8, "DISK_GB": 10})
    other = small_cloud.api_provider(
        client, "other", inventory={"VGPU": 4}, traits=["HW_GPU_API_VULKAN"]
    )
    small_cloud.api_provider(client, "other child", parent=other, aggregates=[str(uuid.uuid4())])
    consumer = str(uuid.uuid4())
    claim = {
        "allocations": {mine: {"resources": {"VCPU": 3}}, other: {"resources": {"VGPU": 1}}},
        "consumer_generation": None,
        "project_id": str(uuid.uuid4()),
        "user_id": str(uuid.uuid4()),
        "consumer_type": "INSTANCE",
    }
    assert client.put(f"/allocations/{consumer}", json=claim).status_code == 204
    seen: list[str] = []
    event.listen(engine, "before_cursor_execute", lambda *args: seen.append(args[2]))
    named = client.get(f"/resource_providers?in_tree={mine}&{INCLUDE}")
    statements = len(seen)
    monkeypatch.setattr(embedded, "LISTED_AT_MOST", 2)
    read_whole = client.get(f"/resource_providers?in_tree={mine}&{INCLUDE}")
    engine.dispose()
    assert named.status_code == read_whole.status_code == 200
    assert len(seen) == 2 * statements
    assert " IN " in " ".join(seen[:statements]).upper()
    assert named.json() == read_whole.json()
    providers = read_whole.json()["resource_providers"]
    assert len(providers) == 5
    assert {p["root_provider_uuid"] for p in providers} == {mine}
    first = providers[0]
    assert first["usages"]["usages"] == {"DISK_GB": 0, "VCPU": 3}
    assert first["inventories"]["inventories"]["VCPU"] == {
        "total": 8,
        "reserved": 0,
        "min_unit": 1,
        "max_unit": 2147483647,
        "step_size": 1,
        "allocation_ratio": 1.0,
    }
