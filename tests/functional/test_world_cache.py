"""A process keeps the shape of the cloud between requests (candidates/world.py)
and reads it again only when the world generation has moved. Its answers
must be those of a fresh read, whatever other processes write meanwhile.

On each backend: a ``placement-svc serve`` process answers allocation
candidates while this process writes through its own application (new
providers and children, inventories changed and removed, traits and
aggregates set, sharing providers, re-parenting, providers deleted, claims
made and removed). After every write, each query's answer from the server
must equal, byte for byte once parsed, the answer of this process's
application with its kept world forgotten first: a fresh read. Then writers
in threads and the server's readers run at once; every answer is a 200, and
once the writers stop the answers agree again.
"""

from __future__ import annotations

import json
import random
import threading
import urllib.error
import urllib.request
import uuid

import pytest

from placement_svc import app
from placement_svc.candidates import world
from placement_svc.db.engine import Database, create_engine
from tests.support import fixtures
from tests.support.servers import serving

AGGREGATES = [str(uuid.UUID(int=n + 0xA0)) for n in range(2)]
QUERIES = [
    ("1.39", "resources=VCPU:1,MEMORY_MB:128"),
    (
        "1.36",
        "resources=VCPU:1,MEMORY_MB:128,DISK_GB:10&limit=3&group_policy=none"
        "&root_required=!COMPUTE_STATUS_DISABLED",
    ),
    ("1.39", "resources=VCPU:1&resources1=VGPU:1&group_policy=isolate"),
    ("1.39", f"resources=VCPU:1,DISK_GB:5&member_of=in:{','.join(AGGREGATES)}"),
    ("1.39", "resources=MEMORY_MB:64&required=CUSTOM_GOLD&limit=2"),
    ("1.44", "resources=VCPU:1,DISK_GB:10"),  # capacity: the same search
    # Names that come and go: a 400 while they do not exist.
    ("1.39", "resources=VCPU:1&required=!CUSTOM_FLEETING"),
    ("1.39", "resources=VCPU:1&resources1=CUSTOM_FLEETING:1"),
]


class Cloud:
    """The cloud one writer changes at random, through the API."""

    def __init__(self, client, rng: random.Random):
        self.client, self.rng = client, rng
        self.roots: list[str] = []
        self.children: dict[str, str] = {}  # child -> parent
        self.claims: list[str] = []
        self.fleeting = False  # whether this writer last made CUSTOM_FLEETING

    def call(self, method, path, version="1.39", **kwargs):
        headers = {"openstack-api-version": f"placement {version}"}
        return self.client.request(method, path, headers=headers, **kwargs)

    def generation(self, rp: str) -> int:
        return self.call("GET", f"/resource_providers/{rp}").json()["generation"]

    def put(self, rp: str, what: str, payload: dict) -> None:
        payload["resource_provider_generation"] = self.generation(rp)
        answer = self.call("PUT", f"/resource_providers/{rp}/{what}", json=payload)
        assert answer.status_code in (200, 409), answer.text

    def new_root(self) -> None:
        rp = str(uuid.uuid4())
        answer = self.call("POST", "/resource_providers", json={"name": rp, "uuid": rp})
        assert answer.status_code == 200, answer.text
        self.roots.append(rp)
        self.put(rp, "inventories", {"inventories": self.inventory()})
        if self.rng.random() < 0.5:
            self.new_child(rp)

    def new_child(self, parent: str) -> None:
        rp = str(uuid.uuid4())
        body = {"name": rp, "uuid": rp, "parent_provider_uuid": parent}
        assert self.call("POST", "/resource_providers", json=body).status_code == 200
        self.children[rp] = parent
        self.put(rp, "inventories", {"inventories": {"VGPU": {"total": self.rng.randint(1, 4)}}})

    def inventory(self) -> dict:
        rng = self.rng
        return {
            "VCPU": {"total": rng.randint(1, 8), "allocation_ratio": rng.choice([1.0, 2.0])},
            "MEMORY_MB": {"total": rng.choice([256, 1024]), "reserved": rng.choice([0, 128])},
            "DISK_GB": {"total": rng.choice([20, 100]), "max_unit": rng.choice([10, 100])},
        }

    def step(self) -> None:
        """One random write."""
        rng = self.rng
        action = rng.choice(
            ["root", "root", "child", "inventory", "no-disk", "traits", "aggregates",
             "sharing", "claim", "claim", "unclaim", "move", "delete", "names", "names"]
        )  # fmt: skip
        if action == "root" or not self.roots:
            self.new_root()
        elif action == "child":
            self.new_child(rng.choice(self.roots))
        elif action == "inventory":
            self.put(rng.choice(self.roots), "inventories", {"inventories": self.inventory()})
        elif action == "no-disk":
            inventory = self.inventory()
            del inventory["DISK_GB"]
            self.put(rng.choice(self.roots), "inventories", {"inventories": inventory})
        elif action == "traits":
            traits = rng.sample(["COMPUTE_STATUS_DISABLED", "CUSTOM_GOLD"], rng.randint(0, 2))
            self.put(rng.choice(self.roots), "traits", {"traits": traits})
        elif action == "aggregates":
            chosen = rng.sample(AGGREGATES, rng.randint(0, 2))
            self.put(rng.choice(self.roots), "aggregates", {"aggregates": chosen})
        elif action == "sharing":
            rp = str(uuid.uuid4())
            body = {"name": rp, "uuid": rp}
            assert self.call("POST", "/resource_providers", json=body).status_code == 200
            self.put(rp, "inventories", {"inventories": {"DISK_GB": {"total": 500}}})
            self.put(rp, "traits", {"traits": ["MISC_SHARES_VIA_AGGREGATE"]})
            self.put(rp, "aggregates", {"aggregates": [rng.choice(AGGREGATES)]})
        elif action == "claim":
            consumer = str(uuid.uuid4())
            body = {
                "allocations": {
                    rng.choice(self.roots): {"resources": {"VCPU": 1, "MEMORY_MB": 128}}
                },
                "project_id": str(uuid.UUID(int=1)),
                "user_id": str(uuid.UUID(int=2)),
                "consumer_generation": None,
            }
            answer = self.call("PUT", f"/allocations/{consumer}", version="1.36", json=body)
            assert answer.status_code in (204, 409), answer.text
            if answer.status_code == 204:
                self.claims.append(consumer)
        elif action == "unclaim" and self.claims:
            consumer = self.claims.pop(rng.randrange(len(self.claims)))
            assert self.call("DELETE", f"/allocations/{consumer}").status_code == 204
        elif action == "move" and self.children:
            child = rng.choice(sorted(self.children))
            parent = rng.choice(self.roots)
            body = {"name": child, "parent_provider_uuid": parent}
            answer = self.call("PUT", f"/resource_providers/{child}", version="1.37", json=body)
            assert answer.status_code == 200, answer.text
            self.children[child] = parent
        elif action == "names":  # a trait and a class of that name, made or removed
            method = "DELETE" if self.fleeting else "PUT"
            for kind in ("traits", "resource_classes"):
                answer = self.call(method, f"/{kind}/CUSTOM_FLEETING")
                # 404: another writer's thread removed it first
                assert answer.status_code in (201, 204, 404), answer.text
            self.fleeting = not self.fleeting
        elif action == "delete" and self.children:
            child = rng.choice(sorted(self.children))
            answer = self.call("DELETE", f"/resource_providers/{child}")
            assert answer.status_code in (204, 409), answer.text
            if answer.status_code == 204:
                del self.children[child]


def path(version: str, query: str) -> str:
    where = "/allocation_candidates/capacity" if version == "1.44" else "/allocation_candidates"
    return f"{where}?{query}"


def _comparable(status: int, body: dict) -> tuple[int, dict | str]:
    """An answer as two processes give it alike: an error by its detail
    (its request id is the request's own)."""
    return (status, body) if status == 200 else (status, body["errors"][0]["detail"])


def served(base: str, version: str, query: str) -> tuple[int, dict | str]:
    request = urllib.request.Request(
        base + path(version, query),
        headers={"x-auth-token": "admin", "openstack-api-version": f"placement {version}"},
    )
    try:
        with urllib.request.urlopen(request, timeout=30) as response:
            return _comparable(response.status, json.loads(response.read()))
    except urllib.error.HTTPError as error:
        return _comparable(error.code, json.loads(error.read()))


def fresh(client, engine, version: str, query: str) -> tuple[int, dict | str]:
    world.of(engine).forget()
    answer = client.get(
        path(version, query), headers={"openstack-api-version": f"placement {version}"}
    )
    return _comparable(answer.status_code, answer.json())


@pytest.mark.slow
def test_a_serving_process_answers_as_a_fresh_read_while_another_writes(test_db, tmp_path):
    test_db.reset()
    engine = create_engine(test_db.url)
    client = fixtures.api_client(app.create_app(fixtures.make_conf(), Database(engine)))
    assert client.put("/traits/CUSTOM_GOLD").status_code == 201
    cloud = Cloud(client, random.Random(17))
    for _ in range(3):
        cloud.new_root()
    conf = tmp_path / "placement.conf"
    conf.write_text(
        f"[placement_database]\nconnection = {test_db.url}\n[api]\nauth_strategy = noauth2\n"
    )
    with serving(tmp_path, str(conf)) as (base, _log):
        non_empty = 0
        fleeting: set[int] = set()
        for step in range(40):
            cloud.step()
            for version, query in QUERIES:
                mine = served(base, version, query)
                assert mine == fresh(client, engine, version, query), (step, query)
                body = mine[1]
                if isinstance(body, dict):
                    non_empty += bool(body.get("allocation_requests") or body.get("total"))
                if "FLEETING" in query:
                    fleeting.add(mine[0])
        assert non_empty > 100  # the queries found candidates, most of the time
        assert fleeting == {200, 400}  # the names came and went

        # Writers in threads, each with its own connection pool, and the
        # server's readers at once.
        stop = threading.Event()
        failures: list[str] = []

        def write(seed: int) -> None:
            own = fixtures.api_client(app.create_app(fixtures.make_conf(), Database(engine)))
            writer = Cloud(own, random.Random(seed))
            writer.roots = list(cloud.roots)
            try:
                while not stop.is_set():
                    writer.step()
            except Exception as exc:  # noqa: BLE001 - reported below
                failures.append(repr(exc))

        threads = [threading.Thread(target=write, args=(seed,)) for seed in (1, 2)]
        for thread in threads:
            thread.start()
        try:
            for _ in range(15):
                for version, query in QUERIES:
                    assert served(base, version, query)[0] in (200, 400)
        finally:
            stop.set()
            for thread in threads:
                thread.join()
        assert failures == []
        for version, query in QUERIES:
            assert served(base, version, query) == fresh(client, engine, version, query)
    engine.dispose()
