"""GET /allocation_candidates never answers 500 to hostile input, on every backend.

These cases run on each backend because what goes wrong differs by database
(PostgreSQL's 32-bit integers and its refusal of NUL bytes, SQLite's 64-bit
binding limit). The expected answers are upstream's (on MySQL, its usual
backend): an amount no inventory can ever serve is no candidate, not an error
(max_unit is at most 2**31 - 1); a name with a NUL byte is a name that does
not exist (400).
"""

from __future__ import annotations

import pytest

from placement_svc import app
from tests.support import fixtures

CN = "cc000001-0000-0000-0000-000000000000"


def _client(test_db):
    client = fixtures.api_client(app.create_app(fixtures.make_conf(), test_db.db))
    assert client.post("/resource_providers", json={"name": "cn", "uuid": CN}).status_code == 200
    inventory = {"resource_provider_generation": 0, "inventories": {"VCPU": {"total": 4}}}
    assert client.put(f"/resource_providers/{CN}/inventories", json=inventory).status_code == 200
    return client


AMOUNTS = {
    "2**31": "2147483648",
    "2**63 - 1": "9223372036854775807",
    "10**23": "99999999999999999999999",
}
NAMES = {
    "resource class": "resources=VCPU%00:1",
    "required trait": "resources=VCPU:1&required=HW_CPU_X86_AVX2%00",
    "root trait": "resources=VCPU:1&root_required=HW_CPU_X86_AVX2%00",
    "granular trait": "resources_A=VCPU:1&required_A=%00",
}
CASES = [
    pytest.param(f"resources=VCPU:{amount}", 200, id=f"amount {label}")
    for label, amount in AMOUNTS.items()
] + [pytest.param(qs, 400, id=f"NUL in {label}") for label, qs in NAMES.items()]


@pytest.mark.parametrize(("qs", "status"), CASES)
def test_hostile_values_never_give_a_500(test_db, qs, status):
    response = _client(test_db).get(f"/allocation_candidates?{qs}")
    assert response.status_code == status, response.text
    if status == 200:
        assert response.json() == {"allocation_requests": [], "provider_summaries": {}}
    else:
        assert "No such" in response.json()["errors"][0]["detail"]


EXPLAINERS = ["/allocation_candidates/explain", "/allocation_candidates/capacity"]


@pytest.mark.parametrize("path", EXPLAINERS)
@pytest.mark.parametrize(("qs", "status"), CASES)
def test_explain_and_capacity_take_the_same_hostile_values(test_db, path, qs, status):
    """The same query, the same verdict: an amount nothing can hold is an
    answer (no candidate, no copy), a NUL byte in a name a 400."""
    response = _client(test_db).get(
        f"{path}?{qs}", headers={"openstack-api-version": "placement 1.44"}
    )
    assert response.status_code == status, response.text
    if status == 400:
        assert "No such" in response.json()["errors"][0]["detail"]
    elif path.endswith("explain"):
        body = response.json()
        assert (body["candidates"], body["trees_with_candidates"]) == (0, 0)
        assert body["groups"][""]["funnel"][-1]["lacking"]["capacity"] == 1
        (miss,) = body["near_misses"]
        assert miss["fails"][0]["rule"] == "capacity"
    else:
        assert response.json() == {
            "trees": [],
            "trees_with_room": 0,
            "total": 0,
            "total_exact": True,
        }
