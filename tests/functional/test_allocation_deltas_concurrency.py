"""100 concurrent PATCH /allocations/{consumer_uuid} (1.50) on one consumer.

Two application instances with their own engines over one database (as two
servers would be), eight client threads, one consumer. The consumer is first
given VCPU and MEMORY_MB on two providers by a PUT; then 100 PATCHes, none
with a consumer generation, add and remove VCPU and MEMORY_MB on three
providers, shuffled, each thread taking the next one and sending it to the
instances in turn. The removes are fewer than what the PUT gave, so that no
interleaving ever takes a class below zero: every PATCH must apply.

The spec: without consumer_generation, concurrent PATCHes on one consumer all
apply; the server serializes or retries its own conflicts and never answers
409 for them. So, on every backend: every answer is a 200 (no client retry is
made, none is needed), the consumer generations the answers give are exactly
the 100 after the PUT's (each PATCH moved it by one, none was lost or applied
twice), the consumer ends holding exactly the PUT plus the sum of the deltas,
and each provider's usages say the same.
"""

from __future__ import annotations

import collections
import threading
import uuid

import httpx
import pytest

from tests.support import fixtures
from tests.support.deltas import INITIAL, PATCHES, PLAN, expected_holdings, named, patch_bodies

HEADERS = {"x-auth-token": "admin", "openstack-api-version": "placement 1.50"}
THREADS = 8
PROJECT = "3e0c4d55-6a1f-4b9e-8d21-7f5a2c9b0e31"
USER = "a7b2e4f6-1c3d-4e5f-9a8b-0c1d2e3f4a52"


@pytest.fixture
def clients(test_db):
    """Two applications over the test database, each with its own engine (as
    two API hosts would be)."""
    with fixtures.servers_over(test_db.url, headers=HEADERS) as made:
        yield made


def _provider(client: httpx.Client, name: str) -> str:
    rp_uuid = str(uuid.uuid4())
    created = client.post("/resource_providers", json={"name": name, "uuid": rp_uuid})
    assert created.status_code == 200, created.text
    inventories = {"VCPU": {"total": 1000}, "MEMORY_MB": {"total": 100000}}
    put = client.put(
        f"/resource_providers/{rp_uuid}/inventories",
        json={"resource_provider_generation": 0, "inventories": inventories},
    )
    assert put.status_code == 200, put.text
    return rp_uuid


def test_the_plan_never_goes_below_zero_and_changes_every_class():
    """The plan itself: in the worst interleaving (every remove first) nothing
    goes below zero, and the final holdings differ from the PUT's on every
    provider (a lost PATCH of any kind would show)."""
    providers = ["p0", "p1", "p2"]
    lowest = collections.defaultdict(collections.Counter)
    for i, res in INITIAL.items():
        lowest[i].update(res)
    for count, _add, remove in PLAN:
        for i, res in remove.items():
            lowest[i].subtract({rc: n * count for rc, n in res.items()})
    assert all(n > 0 for res in lowest.values() for n in res.values()), lowest
    final = expected_holdings(providers)
    assert final == {
        "p0": {"VCPU": 50, "MEMORY_MB": 5000 + 640 - 160},
        "p1": {"VCPU": 40, "MEMORY_MB": 5000 + 15 * 256 - 15 * 128},
        "p2": {"VCPU": 20, "MEMORY_MB": 320},
    }
    assert len(patch_bodies(providers, seed=50)) == PATCHES == 100


def test_concurrent_patches_on_one_consumer_all_apply(test_db, clients):
    providers = [_provider(clients[i % 2], f"delta-{i}-{uuid.uuid4().hex[:8]}") for i in range(3)]
    consumer = str(uuid.uuid4())
    put = clients[0].put(
        f"/allocations/{consumer}",
        json={
            "allocations": named(INITIAL, providers),
            "project_id": PROJECT,
            "user_id": USER,
            "consumer_generation": None,
            "consumer_type": "INSTANCE",
        },
    )
    assert put.status_code == 204, put.text
    start = clients[1].get(f"/allocations/{consumer}")
    assert start.status_code == 200, start.text
    first_generation = start.json()["consumer_generation"]

    bodies = patch_bodies(providers, seed=50)
    answers: list[httpx.Response | None] = [None] * len(bodies)
    errors: list[str] = []
    next_index = iter(range(len(bodies)))
    take = threading.Lock()
    barrier = threading.Barrier(THREADS)

    def client(thread: int) -> None:
        turn = thread
        barrier.wait()
        while True:
            with take:
                index = next(next_index, None)
            if index is None:
                return
            http = clients[turn % len(clients)]
            turn += 1
            try:
                answers[index] = http.patch(f"/allocations/{consumer}", json=bodies[index])
            except Exception as exc:  # noqa: BLE001 - reported by the test
                errors.append(f"PATCH {index}: {exc!r}")

    threads = [threading.Thread(target=client, args=(t,)) for t in range(THREADS)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=120)
    assert not any(thread.is_alive() for thread in threads), "a client thread did not end"
    assert not errors, errors

    statuses = collections.Counter(answer.status_code for answer in answers)
    refused = [
        (answer.status_code, answer.text[:400]) for answer in answers if answer.status_code != 200
    ]
    assert statuses == {200: PATCHES}, (dict(statuses), refused[:10])

    # Each PATCH moved the generation by exactly one: the answers saw every
    # generation from the PUT's on, each once.
    seen = sorted(answer.json()["consumer_generation"] for answer in answers)
    assert seen == list(range(first_generation + 1, first_generation + PATCHES + 1)), seen

    expected = expected_holdings(providers)
    for http in clients:
        shown = http.get(f"/allocations/{consumer}")
        assert shown.status_code == 200, shown.text
        body = shown.json()
        held = {rp: a["resources"] for rp, a in body["allocations"].items()}
        assert held == expected
        assert body["consumer_generation"] == first_generation + PATCHES
        assert (body["project_id"], body["user_id"]) == (PROJECT, USER)
        assert body["consumer_type"] == "INSTANCE"
        for rp in providers:
            usages = http.get(f"/resource_providers/{rp}/usages")
            assert usages.status_code == 200, usages.text
            used = {rc: n for rc, n in usages.json()["usages"].items() if n}
            assert used == expected.get(rp, {}), rp
