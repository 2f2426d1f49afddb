"""A placement simulation with ranked candidates (1.48): what ``sort=`` and
``prefer=`` do to a cloud when every claim takes the first candidate.

Through the whole WSGI application, in-process, on SQLite: 100 identical
hosts (VCPU 16, MEMORY_MB 32768), then claims one after another, each
``GET /allocation_candidates?resources=VCPU:1,MEMORY_MB:128&...&limit=1``
and a ``PUT /allocations/{new consumer}`` of the one allocation request
it gives, as a scheduler would. The hosts' usages are read every 50
claims (one ``GET /resource_providers?include=usages``) and compared with
what the definition (candidates/rank.py) makes them, exactly: exact ties
go to the answer's order without ranking, the hosts' creation order.

- ``sort=spread:VCPU``, 1,000 claims: the hosts take turns; after k claims
  host i has k // 100 VCPU, one more for the first k % 100 hosts; every
  host's usage within 1 of every other's, 10 each at the end.
- ``sort=pack:VCPU``, 1,000 claims: the hosts fill one by one; after k
  claims, k // 16 hosts full, the next with k % 16, the rest empty.
- ``prefer=CUSTOM_FAST:10&sort=spread:VCPU``, 300 claims: the 10 hosts
  with the trait (spread over the cloud) take the first 160 claims, in
  turns, then the other 90 take turns.

Each answer's ``rank`` is checked too: the score, and the fraction of the
chosen host's VCPU left after the claim.
"""

from __future__ import annotations

import uuid

import pytest
from sqlalchemy import event

from placement_svc import app
from placement_svc.db.engine import Database, create_engine
from tests.support import fixtures

pytestmark = pytest.mark.parametrize("backend", ["sqlite"], indirect=True)

HOSTS = 100
VCPU, MEMORY_MB = 16, 32768
ASK = "resources=VCPU:1,MEMORY_MB:128&limit=1"
CHECK_EVERY = 50
FAST = "CUSTOM_FAST"
FAST_HOSTS = range(5, HOSTS, 10)  # 10 hosts with the trait, none of them first
PROJECT = str(uuid.uuid5(uuid.NAMESPACE_URL, "ranked-project"))
USER = str(uuid.uuid5(uuid.NAMESPACE_URL, "ranked-user"))
HEADERS = {"x-auth-token": "admin", "openstack-api-version": "placement 1.48"}


class Cloud:
    """The application over the test database, with HOSTS identical hosts
    (in creation order: the answer's order without ranking)."""

    def __init__(self, database: Database, fast: bool = False):
        self.client = fixtures.api_client(
            app.create_app(fixtures.make_conf(), database), headers=HEADERS
        )
        self.hosts: list[str] = []
        if fast:
            assert self.client.put(f"/traits/{FAST}").status_code == 201
        for index in range(HOSTS):
            rp = str(uuid.uuid5(uuid.NAMESPACE_URL, f"ranked-host-{index}"))
            answer = self.client.post("/resource_providers", json={"name": f"h{index}", "uuid": rp})
            assert answer.status_code == 200, answer.text
            inventories = {"VCPU": {"total": VCPU}, "MEMORY_MB": {"total": MEMORY_MB}}
            answer = self.client.put(
                f"/resource_providers/{rp}/inventories",
                json={"resource_provider_generation": 0, "inventories": inventories},
            )
            assert answer.status_code == 200, answer.text
            if fast and index in FAST_HOSTS:
                answer = self.client.put(
                    f"/resource_providers/{rp}/traits",
                    json={"resource_provider_generation": 1, "traits": [FAST]},
                )
                assert answer.status_code == 200, answer.text
            self.hosts.append(rp)
        self.index = {rp: index for index, rp in enumerate(self.hosts)}

    def claim(self, ranking: str) -> tuple[int, dict]:
        """One scheduling step: the first candidate, claimed for a new
        consumer; the host it is on and its rank."""
        answer = self.client.get(f"/allocation_candidates?{ASK}&{ranking}")
        assert answer.status_code == 200, answer.text
        body = answer.json()
        (chosen,) = body["allocation_requests"]
        (host,) = chosen["allocations"]
        assert chosen["allocations"][host] == {"resources": {"VCPU": 1, "MEMORY_MB": 128}}
        assert chosen["mappings"] == {"": [host]}
        claim = {
            "allocations": chosen["allocations"],
            "mappings": chosen["mappings"],
            "consumer_generation": None,
            "project_id": PROJECT,
            "user_id": USER,
            "consumer_type": "INSTANCE",  # required from 1.38
        }
        answer = self.client.put(f"/allocations/{uuid.uuid4()}", json=claim)
        assert answer.status_code == 204, answer.text
        return self.index[host], chosen["rank"]

    def usages(self) -> list[tuple[int, int]]:
        """Each host's (VCPU, MEMORY_MB) used, in creation order."""
        answer = self.client.get("/resource_providers?include=usages")
        assert answer.status_code == 200, answer.text
        used = {rp["uuid"]: rp["usages"]["usages"] for rp in answer.json()["resource_providers"]}
        assert set(used) == set(self.hosts)
        return [(used[rp].get("VCPU", 0), used[rp].get("MEMORY_MB", 0)) for rp in self.hosts]


@pytest.fixture
def database(test_db):
    """The test database, through an engine of its own that does not wait
    for the disk at each commit (WAL with synchronous=NORMAL): the claims'
    commits are most of the time otherwise, and durability is not what is
    tested here."""
    engine = create_engine(test_db.url)

    @event.listens_for(engine, "connect")
    def _no_fsync(dbapi_conn, _record):
        dbapi_conn.execute("PRAGMA synchronous = NORMAL")

    yield Database(engine)
    engine.dispose()


def simulate(cloud: Cloud, ranking: str, claims: int, expected, score=lambda host: 0) -> None:
    """``claims`` claims with ``ranking``; the VCPU of each host after k
    claims must be ``expected(k)`` (a list in creation order), checked
    every CHECK_EVERY claims; each claim's rank is the score and the
    fraction of the host's VCPU left after it."""
    model = [0] * HOSTS  # VCPU used per host, as the claims made it
    for k in range(1, claims + 1):
        host, rank = cloud.claim(ranking)
        assert rank == {"score": score(host), "keys": [(VCPU - model[host] - 1) / VCPU]}, (k, host)
        model[host] += 1
        if k % CHECK_EVERY == 0:
            wanted = expected(k)
            assert model == wanted, f"after {k} claims"
            assert cloud.usages() == [(vcpu, 128 * vcpu) for vcpu in wanted], f"after {k} claims"


def test_spread_takes_turns_over_the_hosts(database):
    cloud = Cloud(database)

    def expected(k: int) -> list[int]:
        return [k // HOSTS + (index < k % HOSTS) for index in range(HOSTS)]

    simulate(cloud, "sort=spread:VCPU", 1000, expected)
    final = [vcpu for vcpu, _memory in cloud.usages()]
    assert max(final) - min(final) <= 1
    assert final == [10] * HOSTS


def test_pack_fills_the_hosts_one_by_one(database):
    cloud = Cloud(database)

    def expected(k: int) -> list[int]:
        full, partly = divmod(k, VCPU)
        return [VCPU] * full + [partly] + [0] * (HOSTS - full - 1)

    simulate(cloud, "sort=pack:VCPU", 1000, expected)
    final = [vcpu for vcpu, _memory in cloud.usages()]
    assert final.count(VCPU) == 62 and final.count(0) == 37 and final[62] == 8


def test_preferred_hosts_fill_first(database):
    cloud = Cloud(database, fast=True)
    fast = list(FAST_HOSTS)
    others = [index for index in range(HOSTS) if index not in FAST_HOSTS]
    room = VCPU * len(fast)

    def expected(k: int) -> list[int]:
        used = [0] * HOSTS
        on_fast, on_others = min(k, room), max(0, k - room)
        for turn, index in enumerate(fast):
            used[index] = on_fast // len(fast) + (turn < on_fast % len(fast))
        for turn, index in enumerate(others):
            used[index] = on_others // len(others) + (turn < on_others % len(others))
        return used

    simulate(
        cloud,
        f"prefer={FAST}:10&sort=spread:VCPU",
        300,
        expected,
        score=lambda host: 10 if host in FAST_HOSTS else 0,
    )
