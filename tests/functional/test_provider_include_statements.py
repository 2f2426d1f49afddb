"""GET /resource_providers?include=... (1.45) reads each embedded
sub-resource in one statement, whatever the number of providers: counted
for a tree of 4 providers and one of 40, on every backend."""

from __future__ import annotations

import uuid

from sqlalchemy import event

from placement_svc import app
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
