"""Concurrent writers on one provider: the generation lets exactly one win.

Several threads, spread over two application instances with their own
engines (as two servers over one database), PUT the inventory of the same
provider with the generation they all read. Each round must have exactly
one 200 and 409 placement.concurrent_update for the rest, never a 500, and
the provider's generation must end at exactly one bump per round.
"""

from __future__ import annotations

import threading
import uuid

import httpx

from placement_svc import app
from placement_svc.db.engine import Database, create_engine
from tests.support import fixtures

THREADS = 8
ROUNDS = 5


def _clients(test_db, count=2):
    clients = []
    for _ in range(count):
        engine = create_engine(test_db.url)
        application = app.create_app(fixtures.make_conf(), Database(engine))
        client = fixtures.api_client(application)
        client.engine = engine  # disposed with the client, so the database can be dropped
        clients.append(client)
    return clients


def _race(clients, rp_uuid, generation) -> list[httpx.Response]:
    """THREADS writers released together, all sending the same generation."""
    barrier = threading.Barrier(THREADS)
    answers: list[httpx.Response] = []
    lock = threading.Lock()

    def write(index):
        body = {
            "resource_provider_generation": generation,
            "inventories": {"VCPU": {"total": 10 + index}},
        }
        barrier.wait()
        response = clients[index % len(clients)].put(
            f"/resource_providers/{rp_uuid}/inventories", json=body
        )
        with lock:
            answers.append(response)

    threads = [threading.Thread(target=write, args=(i,)) for i in range(THREADS)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return answers


def test_one_winner_per_round_of_inventory_writers(test_db):
    clients = _clients(test_db)
    rp_uuid = str(uuid.uuid4())
    created = clients[0].post("/resource_providers", json={"name": "cn", "uuid": rp_uuid})
    assert created.status_code == 200

    for round_number in range(ROUNDS):
        generation = clients[0].get(f"/resource_providers/{rp_uuid}").json()["generation"]
        assert generation == round_number
        answers = _race(clients, rp_uuid, generation)

        statuses = sorted(r.status_code for r in answers)
        assert statuses == [200] + [409] * (THREADS - 1), [r.text for r in answers]
        for response in answers:
            if response.status_code == 409:
                assert response.json()["errors"][0]["code"] == "placement.concurrent_update"
        winner = next(r for r in answers if r.status_code == 200).json()
        assert winner["resource_provider_generation"] == generation + 1
        stored = clients[1].get(f"/resource_providers/{rp_uuid}/inventories").json()
        assert stored == winner

    final = clients[1].get(f"/resource_providers/{rp_uuid}").json()
    assert final["generation"] == ROUNDS
    for client in clients:
        client.close()
        client.engine.dispose()
