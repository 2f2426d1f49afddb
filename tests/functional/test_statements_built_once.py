"""The reads operators, nova's periodic tasks and nova's scheduler make most,
and a claim and its removal, run only statements built once (on every
backend): SQLAlchemy works out a key of every statement it runs by walking it
whole, once per statement object, and walking one cost more than SQLite
running it (a third of an ``in_tree=`` read). Counted here: the keys worked
out afresh (``HasCacheKey._generate_cache_key``, which a statement object
calls once and then remembers) while a request runs the second time."""

from __future__ import annotations

import uuid
from unittest import mock

import pytest
from sqlalchemy.sql import cache_key, elements

from placement_svc import app
from placement_svc.db.engine import Database, create_engine
from tests.support import fixtures, small_cloud

AGGREGATE = str(uuid.uuid4())
ROOT = str(uuid.uuid4())
CONSUMER = str(uuid.uuid4())
CLAIM = {
    "allocations": {ROOT: {"resources": {"VCPU": 1}}},
    "project_id": "demo",
    "user_id": "demo",
    "consumer_generation": None,
    "consumer_type": "INSTANCE",
}
READS = [
    "/resource_providers",
    "/resource_providers?name=rp1",
    f"/resource_providers?in_tree={ROOT}",
    f"/resource_providers?member_of=in:{AGGREGATE}",
    "/resource_providers?required=HW_CPU_X86_AVX2,!CUSTOM_NONE",
    "/resource_providers?resources=VCPU:1,MEMORY_MB:512",
    f"/resource_providers/{ROOT}",
    f"/resource_providers/{ROOT}/inventories",
    f"/resource_providers/{ROOT}/traits",
    f"/resource_providers/{ROOT}/aggregates",
    f"/resource_providers/{ROOT}/usages",
    f"/resource_providers/{ROOT}/allocations",
    f"/allocations/{CONSUMER}",
    "/usages?project_id=demo",
    "/usages?project_id=demo&user_id=demo",
    "/usages?project_id=demo&consumer_type=INSTANCE",
    "/allocation_candidates?resources=VCPU:1,MEMORY_MB:512&required=HW_CPU_X86_AVX2",
]


@pytest.fixture
def served(test_db):
    test_db.reset()
    engine = create_engine(test_db.url)
    client = fixtures.api_client(
        app.create_app(fixtures.make_conf(), Database(engine)),
        headers={**fixtures.ADMIN_HEADERS, "OpenStack-API-Version": "placement 1.39"},
    )
    small_cloud.one_tree(client, 3, ROOT, AGGREGATE, {"VCPU": 8, "MEMORY_MB": 1024})
    assert client.put("/traits/CUSTOM_NONE").status_code == 201
    assert client.put(f"/allocations/{CONSUMER}", json=CLAIM).status_code == 204
    yield client
    engine.dispose()


def _fresh_keys(run) -> int:
    """How many statement keys ``run()`` works out afresh, but for the
    SAVEPOINT and RELEASE SAVEPOINT SQLAlchemy makes for a nested
    transaction (a consumer's insert on MariaDB)."""
    with mock.patch.object(
        cache_key.HasCacheKey,
        "_generate_cache_key",
        autospec=True,
        side_effect=cache_key.HasCacheKey._generate_cache_key,
    ) as worked_out:
        run()
    keyed = [call.args[0] for call in worked_out.call_args_list]
    return sum(not isinstance(element, SAVEPOINTS) for element in keyed)


SAVEPOINTS = (elements.SavepointClause, elements.ReleaseSavepointClause)


def test_the_reads_build_no_statement_of_their_own(served):
    built = {}
    for path in READS:
        for _ in range(2):  # the first runs build what is kept
            assert served.get(path).status_code == 200, path
        built[path] = _fresh_keys(lambda path=path: served.get(path))
    assert built == dict.fromkeys(READS, 0)


def test_a_claim_and_its_removal_build_no_statement_of_their_own(served):
    def claim_and_remove():
        consumer = str(uuid.uuid4())
        assert served.put(f"/allocations/{consumer}", json=CLAIM).status_code == 204
        assert served.delete(f"/allocations/{consumer}").status_code == 204

    claim_and_remove()
    claim_and_remove()
    assert _fresh_keys(claim_and_remove) == 0


def test_the_count_sees_a_statement_built_for_one_request(served):
    """The counter can fail: a statement made anew is keyed afresh."""
    from placement_svc.db import providers

    def built_anew():
        statement = providers._LIST_SELECT.where(providers.RP.c.id > 0)
        statement._generate_cache_key()

    assert _fresh_keys(built_anew) == 1
