"""Concurrent tree writers (1.49): one wins, the others are told they are
stale, nothing is half written, never a 5xx, on every backend.

Two application instances with their own engines over one database (as two
servers would be), 8 writers at once:

* all making the same new tree: one 200, seven 409
  ``placement.concurrent_update`` naming the root (on PostgreSQL and
  MariaDB the losers' inserts wait for the winner's commit, fail on the
  uuid and run again, then find their "new" root there);
* all changing the same tree from the same read: one 200, seven 409s, and
  the tree is the winner's answer;
* a tree write that deletes a child while claims on that child race it:
  either the claims or the deletion, never both, and no claim is left on a
  provider that is gone.
"""

from __future__ import annotations

import copy
import threading
import uuid

import httpx
import pytest

from tests.support import fixtures

WRITERS = 8
V149 = {"openstack-api-version": "placement 1.49"}
PROJECT = "6f2f2bd3-0d5c-4d7e-9a36-2b6a0b2c3f11"
USER = "0b1c4c4e-8a5e-4a8a-b8e5-8e3f6f3c1d22"


@pytest.fixture
def clients(test_db):
    """Two applications over the test database, each with its own engine (as
    two API hosts would be)."""
    with fixtures.servers_over(test_db.url, headers=fixtures.ADMIN_HEADERS) as made:
        yield made


def _all_at_once(calls) -> list[httpx.Response]:
    barrier = threading.Barrier(len(calls))
    answers: list[httpx.Response | None] = [None] * len(calls)

    def run(index):
        barrier.wait()
        answers[index] = calls[index]()

    threads = [threading.Thread(target=run, args=(i,)) for i in range(len(calls))]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return answers  # type: ignore[return-value]


def _tree(root: str, children: int, total: int = 8) -> dict:
    return {
        "root": root,
        "providers": [{"uuid": root, "name": f"host-{root}", "parent_provider_uuid": None}]
        + [
            {
                "uuid": str(uuid.uuid5(uuid.UUID(root), str(i))),
                "name": f"host-{root}-numa{i}",
                "parent_provider_uuid": root,
                "inventories": {"VCPU": {"total": total}},
            }
            for i in range(children)
        ],
    }


def _put(client, root, body):
    return lambda: client.put(f"/resource_provider_trees/{root}", json=body, headers=V149)


def _assert_one_winner(answers):
    statuses = sorted(a.status_code for a in answers)
    assert statuses == [200] + [409] * (len(answers) - 1), [a.text for a in answers]
    for answer in answers:
        if answer.status_code == 409:
            error = answer.json()["errors"][0]
            assert error["code"] == "placement.concurrent_update", error
            assert "resource provider generation conflict" in error["detail"], error
    return next(a for a in answers if a.status_code == 200)


def test_many_making_one_new_tree_give_one_tree_and_stale_answers(test_db, clients):
    root = str(uuid.uuid4())
    body = _tree(root, 4)
    winner = _assert_one_winner(
        _all_at_once([_put(clients[i % 2], root, body) for i in range(WRITERS)])
    )
    read = clients[0].get(f"/resource_provider_trees/{root}", headers=V149)
    assert read.json() == winner.json()
    assert len(read.json()["providers"]) == 5


def test_many_changing_one_tree_from_one_read_give_one_change(test_db, clients):
    root = str(uuid.uuid4())
    made = clients[0].put(f"/resource_provider_trees/{root}", json=_tree(root, 4), headers=V149)
    assert made.status_code == 200, made.text
    calls = []
    for writer in range(WRITERS):
        body = copy.deepcopy(made.json())
        for provider in body["providers"][1:]:
            provider["inventories"]["VCPU"]["total"] = 16 + writer
        body["providers"][0]["name"] = f"renamed-by-{writer}"
        calls.append(_put(clients[writer % 2], root, body))
    winner = _assert_one_winner(_all_at_once(calls))
    read = clients[1].get(f"/resource_provider_trees/{root}", headers=V149).json()
    assert read == winner.json()
    totals = {p["inventories"]["VCPU"]["total"] for p in read["providers"][1:]}
    assert len(totals) == 1  # every child from the one winner, none from a loser
    assert read["providers"][0]["name"] == f"renamed-by-{totals.pop() - 16}"
    assert [p["generation"] for p in read["providers"]] == [1] * 5


def test_a_child_deleted_while_claims_race_it_keeps_no_claim(test_db, clients):
    root = str(uuid.uuid4())
    made = clients[0].put(f"/resource_provider_trees/{root}", json=_tree(root, 2), headers=V149)
    assert made.status_code == 200, made.text
    child = made.json()["providers"][1]["uuid"]
    without_child = copy.deepcopy(made.json())
    without_child["providers"] = [p for p in without_child["providers"] if p["uuid"] != child]

    def claim(client):
        body = {
            "allocations": {child: {"resources": {"VCPU": 1}}},
            "project_id": PROJECT,
            "user_id": USER,
            "consumer_generation": None,
            "consumer_type": "INSTANCE",
        }
        return lambda: client.put(
            f"/allocations/{uuid.uuid4()}",
            json=body,
            headers={"openstack-api-version": "placement 1.39"},
        )

    calls = [_put(clients[0], root, without_child)] + [
        claim(clients[i % 2]) for i in range(WRITERS - 1)
    ]
    answers = _all_at_once(calls)
    assert all(a.status_code < 500 for a in answers), [a.text for a in answers]
    tree_answer, claims = answers[0], answers[1:]
    made_claims = [a for a in claims if a.status_code == 204]
    if tree_answer.status_code == 200:
        assert made_claims == []  # each claim then found no provider, or lost to the write
        for answer in claims:
            assert answer.status_code in (400, 409), answer.text
    else:
        assert tree_answer.status_code == 409, tree_answer.text
        assert tree_answer.json()["errors"][0]["code"] == "placement.resource_provider.inuse"
        assert made_claims
    usage = (
        clients[1]
        .get(f"/allocations?in_tree={root}", headers={"openstack-api-version": "placement 1.46"})
        .json()["allocations"]
    )
    assert len(usage) == len(made_claims)
