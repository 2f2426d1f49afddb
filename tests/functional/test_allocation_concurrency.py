"""Concurrent allocation writers: no overcommit, and upstream's retry rule.

Two application instances with their own engines over one database (as two
servers would be) take 16 concurrent claims on a provider with room for
exactly N of them: exactly N succeed, every other answer is a 409 saying
the capacity would be exceeded, and the provider's usage ends at its
capacity, on every backend.

The retry rule: a provider generation conflict re-runs the whole write up
to ``[placement] allocation_conflict_retry_count`` more times before the
answer is 409 placement.concurrent_update; the Database runs it again (its
one retry policy, db/retries.py), the handler calls it once. It is proved
on every backend with the race replayed inside the write's own transaction
(tests/support/races.py), and on PostgreSQL and MariaDB with a real one:
another connection bumps the provider's generation between our read and our
write. (SQLite writers are serialized from BEGIN, so a real conflict cannot
happen there.) Consumer generation conflicts are never retried: many
writers creating one consumer at once give one success and 409s.

The last test needs its own configuration rather than concurrency: the
incomplete consumer project and user given to pre-1.8 writes.
"""

from __future__ import annotations

import threading
import uuid

import httpx
import pytest
import sqlalchemy as sa
from sqlalchemy import event

from placement_svc import app
from placement_svc.db.engine import Database, create_engine
from tests.support import databases, fixtures
from tests.support.races import ChangedAfterRead

THREADS = 16
ROOM = 5  # claims the provider has room for
PROJECT = "6f2f2bd3-0d5c-4d7e-9a36-2b6a0b2c3f11"
USER = "0b1c4c4e-8a5e-4a8a-b8e5-8e3f6f3c1d22"


_ENGINES: list[sa.engine.Engine] = []


@pytest.fixture(autouse=True)
def _dispose_engines():
    """Close this test's connections, so the database can be dropped at exit."""
    yield
    while _ENGINES:
        _ENGINES.pop().dispose()


def _engine(url: str) -> sa.engine.Engine:
    _ENGINES.append(create_engine(url))
    return _ENGINES[-1]


def _servers(test_db, count=2, **conf_overrides) -> list[httpx.Client]:
    """``count`` applications, each with its own engine, over one database."""
    clients = []
    for _ in range(count):
        db = Database(_engine(test_db.url))
        clients.append(
            fixtures.api_client(app.create_app(fixtures.make_conf(**conf_overrides), db))
        )
    return clients


def _provider(client, inventories: dict) -> str:
    rp_uuid = str(uuid.uuid4())
    created = client.post("/resource_providers", json={"name": rp_uuid, "uuid": rp_uuid})
    assert created.status_code == 200, created.text
    put = client.put(
        f"/resource_providers/{rp_uuid}/inventories",
        json={"resource_provider_generation": 0, "inventories": inventories},
    )
    assert put.status_code == 200, put.text
    return rp_uuid


def _claim(allocations: dict) -> dict:
    return {
        "allocations": allocations,
        "project_id": PROJECT,
        "user_id": USER,
        "consumer_generation": None,
        "consumer_type": "INSTANCE",
    }


def _race(clients, bodies: list[dict]) -> list[httpx.Response]:
    """PUT each body for a consumer of its own, all at once, spread over the clients."""
    barrier = threading.Barrier(len(bodies))
    answers: list[httpx.Response | None] = [None] * len(bodies)

    def claim(index):
        barrier.wait()
        client = clients[index % len(clients)]
        answers[index] = client.put(f"/allocations/{uuid.uuid4()}", json=bodies[index])

    threads = [threading.Thread(target=claim, args=(i,)) for i in range(len(bodies))]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return answers


def _assert_exactly_room(answers):
    statuses = sorted(r.status_code for r in answers)
    assert statuses == [204] * ROOM + [409] * (THREADS - ROOM), [r.text for r in answers]
    for response in answers:
        if response.status_code == 409:
            assert "The requested amount would exceed the capacity" in response.text


def test_sixteen_claims_on_room_for_five_give_five_successes(test_db):
    clients = _servers(test_db)
    rp_uuid = _provider(clients[0], {"VCPU": {"total": ROOM}})

    answers = _race(clients, [_claim({rp_uuid: {"resources": {"VCPU": 1}}})] * THREADS)

    _assert_exactly_room(answers)
    usages = clients[1].get(f"/resource_providers/{rp_uuid}/usages").json()
    assert usages["usages"] == {"VCPU": ROOM}
    held = clients[0].get(f"/resource_providers/{rp_uuid}/allocations").json()
    assert len(held["allocations"]) == ROOM
    assert all(a["resources"] == {"VCPU": 1} for a in held["allocations"].values())
    # one bump for the inventory, one per successful claim, none for the failures
    assert held["resource_provider_generation"] == 1 + ROOM
    assert clients[1].get(f"/usages?project_id={PROJECT}").json()["usages"] == {
        "INSTANCE": {"VCPU": ROOM, "consumer_count": ROOM}
    }


def test_claims_across_two_providers_are_all_or_nothing(test_db):
    """Each claim takes cpu from one provider and disk from another, naming them in
    either order; the cpu provider has room for five, the disk provider for all."""
    clients = _servers(test_db)
    cpu = _provider(clients[0], {"VCPU": {"total": ROOM}})
    disk = _provider(clients[1], {"DISK_GB": {"total": 100 * THREADS}})
    forward = {cpu: {"resources": {"VCPU": 1}}, disk: {"resources": {"DISK_GB": 100}}}
    backward = dict(reversed(list(forward.items())))
    bodies = [_claim(forward if i % 2 else backward) for i in range(THREADS)]

    answers = _race(clients, bodies)

    _assert_exactly_room(answers)
    cpu_usage = clients[0].get(f"/resource_providers/{cpu}/usages").json()["usages"]
    disk_usage = clients[1].get(f"/resource_providers/{disk}/usages").json()["usages"]
    assert cpu_usage == {"VCPU": ROOM}
    assert disk_usage == {"DISK_GB": 100 * ROOM}


def test_one_new_consumer_claimed_by_many_at_once_is_created_once(test_db):
    """All say consumer_generation null: one wins, the rest are told the consumer
    changed (409 placement.concurrent_update, never retried by the server)."""
    clients = _servers(test_db)
    rp_uuid = _provider(clients[0], {"VCPU": {"total": 100}})
    consumer = str(uuid.uuid4())
    barrier = threading.Barrier(THREADS)
    answers: list[httpx.Response | None] = [None] * THREADS

    def claim(index):
        body = _claim({rp_uuid: {"resources": {"VCPU": index + 1}}})
        barrier.wait()
        answers[index] = clients[index % 2].put(f"/allocations/{consumer}", json=body)

    threads = [threading.Thread(target=claim, args=(i,)) for i in range(THREADS)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()

    statuses = sorted(r.status_code for r in answers)
    assert statuses == [204] + [409] * (THREADS - 1), [r.text for r in answers]
    for response in answers:
        if response.status_code == 409:
            assert response.json()["errors"][0]["code"] == "placement.concurrent_update"
    winner = next(i for i, r in enumerate(answers) if r.status_code == 204)
    held = clients[1].get(f"/allocations/{consumer}").json()
    assert held["consumer_generation"] == 1
    assert held["allocations"][rp_uuid]["resources"] == {"VCPU": winner + 1}


def test_a_provider_conflict_is_retried_up_to_the_configured_count(test_db, monkeypatch):
    """create_app gives its Database the configured count (its engine is this
    test's, to be closed at the end); each retry is counted in the metrics."""
    conf = fixtures.make_conf(
        **{
            "placement.allocation_conflict_retry_count": 3,
            "placement_database.connection": test_db.url,
            "metrics.enabled": True,
        }
    )
    monkeypatch.setattr(app, "create_engine", lambda url, _db_conf: _engine(url))
    client = fixtures.api_client(app.create_app(conf))
    rp_uuid = _provider(client, {"VCPU": {"total": 8}})
    body = _claim({rp_uuid: {"resources": {"VCPU": 1}}})

    changes = ChangedAfterRead(monkeypatch, times=3)
    assert client.put(f"/allocations/{uuid.uuid4()}", json=body).status_code == 204
    assert changes.reads == 4  # the first try and three retries
    assert _retries_counted(client, "generation_conflict") == 3

    changes = ChangedAfterRead(monkeypatch, times=4)
    refused = client.put(f"/allocations/{uuid.uuid4()}", json=body)
    assert refused.status_code == 409
    assert changes.reads == 4
    error = refused.json()["errors"][0]
    assert error["code"] == "placement.concurrent_update"
    assert "Inventory and/or allocations changed while attempting to allocate" in error["detail"]
    assert client.get(f"/resource_providers/{rp_uuid}/usages").json()["usages"] == {"VCPU": 1}
    assert _retries_counted(client, "generation_conflict") == 6


def _retries_counted(client, reason: str) -> float:
    """placement_db_retries_total of PUT /allocations/{consumer_uuid} for ``reason``."""
    for line in client.get("/metrics").text.splitlines():
        if (
            line.startswith("placement_db_retries_total{")
            and 'route="/allocations/{consumer_uuid}"' in line
            and f'reason="{reason}"' in line
        ):
            return float(line.rsplit(" ", 1)[1])
    return 0.0


def _bump_before_our_update(engine, other: sa.engine.Engine, rp_uuid: str, times: int):
    """Make another connection change the provider just before each of our next
    ``times`` conditional updates of it: a genuine generation conflict."""
    remaining = [times]

    @event.listens_for(engine, "before_cursor_execute")
    def interfere(conn, cursor, statement, parameters, context, executemany):
        if remaining[0] and statement.lstrip().upper().startswith("UPDATE RESOURCE_PROVIDERS"):
            remaining[0] -= 1
            with other.begin() as other_conn:
                other_conn.execute(
                    sa.text(
                        "UPDATE resource_providers SET generation = generation + 1 "
                        "WHERE uuid = :uuid"
                    ),
                    {"uuid": rp_uuid},
                )

    return remaining


@pytest.mark.parametrize("backend", databases.server_backends(), indirect=True)
def test_a_real_provider_conflict_is_retried_then_refused(test_db):
    engine = _engine(test_db.url)
    other = _engine(test_db.url)
    client = fixtures.api_client(
        app.create_app(fixtures.make_conf(), Database(engine, conflict_retries=2))
    )
    rp_uuid = _provider(client, {"VCPU": {"total": 8}})
    body = _claim({rp_uuid: {"resources": {"VCPU": 1}}})

    remaining = _bump_before_our_update(engine, other, rp_uuid, times=2)
    assert client.put(f"/allocations/{uuid.uuid4()}", json=body).status_code == 204
    assert remaining[0] == 0
    # inventory (1), two outside bumps, our write
    assert client.get(f"/resource_providers/{rp_uuid}").json()["generation"] == 4

    remaining = _bump_before_our_update(engine, other, rp_uuid, times=3)
    refused = client.put(f"/allocations/{uuid.uuid4()}", json=body)
    assert refused.status_code == 409, refused.text
    assert refused.json()["errors"][0]["code"] == "placement.concurrent_update"
    assert remaining[0] == 0
    assert client.get(f"/resource_providers/{rp_uuid}/usages").json()["usages"] == {"VCPU": 1}


def test_incomplete_consumers_get_the_configured_project_and_user(test_db):
    """Not about concurrency: the one allocation behaviour that needs a
    configuration the gabbi fixture does not set. Before 1.8 a consumer
    carries no owner; it gets [placement] incomplete_consumer_*_id."""
    conf = fixtures.make_conf(
        **{
            "placement.incomplete_consumer_project_id": "legacy-project",
            "placement.incomplete_consumer_user_id": "legacy-user",
        }
    )
    client = fixtures.api_client(app.create_app(conf, Database(_engine(test_db.url))))
    rp_uuid = _provider(client, {"VCPU": {"total": 8}})
    consumer = str(uuid.uuid4())
    old = {"openstack-api-version": "placement 1.7"}
    body = {"allocations": [{"resource_provider": {"uuid": rp_uuid}, "resources": {"VCPU": 2}}]}
    assert client.put(f"/allocations/{consumer}", json=body, headers=old).status_code == 204

    shown = client.get(f"/allocations/{consumer}").json()
    assert (shown["project_id"], shown["user_id"]) == ("legacy-project", "legacy-user")
    assert client.get("/usages?project_id=legacy-project").json()["usages"] == {
        "unknown": {"VCPU": 2, "consumer_count": 1}
    }
