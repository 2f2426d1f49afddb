"""The candidates walks that held a worker until it was killed (issue 28,
item 3) answer correctly, at the default search budget and group cap,
through the application on every backend.

The cloud: root R with nine children of 10 to 18 VCPU (no two alike), and
five more trees of a root and nine children of 16 VCPU each. The cases:
ten groups of VCPU:10 where only nine fit (a pigeonhole: empty, not a walk
over every arrangement; the same for explain and capacity); N one-VCPU
groups under same_subtree (all on one child, since siblings share no chosen
ancestor: 9, 9 and 8 candidates for N = 9, 10, 11, not a budget error); 30
one-VCPU groups without a limit (a number of candidates past any answer:
the budget's 400, without holding hundreds of megabytes first) and with
limit=1; 250 groups (the group cap's 400, not a RecursionError).
The brute-force comparisons of the same shapes are in
tests/unit/test_candidates_prune.py.
"""

from __future__ import annotations

import pytest

from placement_svc import app
from tests.support import fixtures

R = "cc000200-0000-0000-0000-000000000000"
H = {"openstack-api-version": "placement 1.39"}


def provider(client, uuid: str, parent: str | None, vcpu: int) -> None:
    body = {"name": uuid, "uuid": uuid}
    if parent:
        body["parent_provider_uuid"] = parent
    assert client.post("/resource_providers", json=body, headers=H).status_code == 200
    if vcpu:
        inventory = {"resource_provider_generation": 0, "inventories": {"VCPU": {"total": vcpu}}}
        answer = client.put(f"/resource_providers/{uuid}/inventories", json=inventory, headers=H)
        assert answer.status_code == 200


@pytest.fixture
def client(test_db):
    client = fixtures.api_client(app.create_app(fixtures.make_conf(), test_db.db))
    provider(client, R, None, 0)
    for child in range(9):
        provider(client, f"ee0002{child:02d}-0000-0000-0000-000000000000", R, 10 + child)
    for tree in range(5):
        root = f"cc0003{tree:02d}-0000-0000-0000-000000000000"
        provider(client, root, None, 0)
        for child in range(9):
            provider(client, f"ee03{tree:02d}{child:02d}-0000-0000-0000-000000000000", root, 16)
    return client


def groups(count: int, amount: int, tree: str | None = None) -> str:
    parts = [f"resources_G{g}=VCPU:{amount}" for g in range(count)]
    if tree:
        parts += [f"in_tree_G{g}={tree}" for g in range(count)]
    return "&".join(parts) + "&group_policy=none"


def candidates(client, qs: str, version: str = "1.39"):
    answer = client.get(
        f"/allocation_candidates?{qs}", headers={"openstack-api-version": f"placement {version}"}
    )
    return answer.status_code, answer.json()


def test_a_pigeonhole_is_empty_at_once(client):
    status, body = candidates(client, groups(9, 10, R) + "&limit=1")
    assert status == 200 and len(body["allocation_requests"]) == 1
    status, body = candidates(client, groups(10, 10, R) + "&limit=1")
    assert (status, body["allocation_requests"]) == (200, [])
    status, body = candidates(client, groups(10, 10, R))
    assert (status, body["allocation_requests"]) == (200, [])


def test_explain_and_capacity_see_the_pigeonhole_too(client):
    qs = groups(10, 10, R)
    explained = client.get(
        f"/allocation_candidates/explain?{qs}", headers={"openstack-api-version": "placement 1.44"}
    )
    assert explained.status_code == 200, explained.text
    assert explained.json()["candidates"] == 0
    capacity = client.get(
        f"/allocation_candidates/capacity?{qs}", headers={"openstack-api-version": "placement 1.44"}
    )
    assert capacity.status_code == 200, capacity.text
    assert capacity.json()["total"] == 0


@pytest.mark.parametrize(("count", "expected"), [(9, 9), (10, 9), (11, 8)])
def test_same_subtree_over_one_vcpu_groups_puts_them_all_on_one_child(client, count, expected):
    qs = groups(count, 1, R) + "&same_subtree=" + ",".join(f"_G{g}" for g in range(count))
    status, body = candidates(client, qs)
    assert status == 200, body
    requests = body["allocation_requests"]
    assert len(requests) == expected
    for request in requests:
        (only,) = request["allocations"]  # one child holds every group
        assert request["allocations"][only]["resources"] == {"VCPU": count}
    status, body = candidates(client, qs + "&limit=1")
    assert status == 200 and len(body["allocation_requests"]) == 1


def test_thirty_groups_without_a_limit_reach_the_budget(client):
    status, body = candidates(client, groups(30, 1))
    assert status == 400
    assert (
        "The search for allocation candidates took more than its budget of 1000000 steps "
        "([placement] allocation_candidates_search_budget)" in body["errors"][0]["detail"]
    )
    status, body = candidates(client, groups(30, 1) + "&limit=1")
    assert status == 200 and len(body["allocation_requests"]) == 1


def test_more_groups_than_the_cap_are_refused(client):
    status, body = candidates(client, groups(250, 1) + "&limit=1")
    assert status == 400
    assert (
        "The request names 250 request groups; at most 64 are allowed "
        "([placement] max_request_groups)." in body["errors"][0]["detail"]
    )
    status, body = candidates(client, groups(64, 1) + "&limit=1")
    assert status == 200 and len(body["allocation_requests"]) == 1
