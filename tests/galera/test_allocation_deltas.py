"""100 concurrent PATCH /allocations/{consumer_uuid} (1.50) on one consumer, two API
hosts over a 3-node MariaDB Galera cluster.

As test_cluster.py: host 1 is ``placement-svc serve --workers 2`` on node 1, host 2 on
node 2, each with ``[placement_database] mysql_wsrep_sync_wait = 1``. One consumer is
given VCPU and MEMORY_MB on two of three providers by a PUT; then eight client threads
send 100 PATCHes (no consumer generation), adds and removes of VCPU and MEMORY_MB on
the three providers, each thread alternating between the hosts. Writes to one consumer
through two nodes at once meet as Galera certification failures (a deadlock at COMMIT):
the service must run those again itself, since without consumer_generation the spec
says every PATCH applies and none is ever a 409. The removes are fewer than what the
PUT gave: no interleaving takes a class below zero.

Then: every answer is a 200 (no 409, no 5xx, no transport error; the client never
retries); the answers' consumer generations are exactly the 100 after the PUT's; both
hosts show the consumer holding exactly the PUT plus the sum of the deltas, and
provider usages to match; the three nodes' tables hold the same allocations and
consumer generation, and they are those. The figures (seconds, the service's own
retries counted from its logs) are printed (pytest -s).
"""

from __future__ import annotations

import collections
import contextlib
import json
import re
import threading
import time
import uuid

import httpx
import pytest
import sqlalchemy as sa

from placement_svc.db import tables
from tests.support.deltas import INITIAL, PATCHES, expected_holdings, named, patch_bodies
from tests.support.servers import run, serving, write_conf

pytestmark = pytest.mark.slow

HEADERS = {"x-auth-token": "admin", "openstack-api-version": "placement 1.50"}
PROJECT = "5d3c2b1a-0f9e-4d8c-b7a6-958473625140"
USER = "e1d2c3b4-a5f6-4789-8a0b-1c2d3e4f5061"
THREADS = 8
# The service's INFO line each time it runs a transaction again (db/engine.py): its cause.
RETRIED = re.compile(r"retrying transaction \(attempt \d+\) after: (.{0,60})")


def node_holdings(url: str, consumer: str) -> tuple[dict, int | None]:
    """(provider -> class -> amount, the consumer's generation) as one node's tables hold
    them, read once the node has applied every write the cluster committed before."""
    a, rp, rc = tables.allocations, tables.resource_providers, tables.resource_classes
    engine = sa.create_engine(url)
    try:
        with engine.connect() as conn:
            conn.exec_driver_sql("SET SESSION wsrep_sync_wait = 1")
            held: dict[str, dict[str, int]] = {}
            for provider, name, used in conn.execute(
                sa.select(rp.c.uuid, rc.c.name, a.c.used)
                .join(rp, rp.c.id == a.c.resource_provider_id)
                .join(rc, rc.c.id == a.c.resource_class_id)
                .where(a.c.consumer_id == consumer)
            ):
                res = held.setdefault(provider, {})
                res[name] = res.get(name, 0) + used
            generation = conn.execute(
                sa.select(tables.consumers.c.generation).where(tables.consumers.c.uuid == consumer)
            ).scalar()
    finally:
        engine.dispose()
    return held, generation


def test_concurrent_patches_through_two_hosts_over_galera(galera, tmp_path):
    began = time.monotonic()
    confs = {}
    for host in (1, 2):
        directory = tmp_path / f"host{host}"
        directory.mkdir()
        confs[host] = (
            directory,
            write_conf(
                directory, galera.urls[host], "[placement_database]\nmysql_wsrep_sync_wait = 1\n"
            ),
        )
    run("db", "sync", "--config-file", confs[1][1], cwd=confs[1][0], check=True)

    with contextlib.ExitStack() as stack:
        served = {
            host: stack.enter_context(serving(directory, conf, "--workers", "2"))
            for host, (directory, conf) in confs.items()
        }
        http = {
            host: stack.enter_context(httpx.Client(base_url=base, timeout=60, headers=HEADERS))
            for host, (base, _log) in served.items()
        }

        providers = []
        for n in range(3):
            rp = str(uuid.uuid4())
            created = http[1].post("/resource_providers", json={"uuid": rp, "name": f"delta-{n}"})
            assert created.status_code == 200, created.text
            put = http[1].put(
                f"/resource_providers/{rp}/inventories",
                json={
                    "resource_provider_generation": 0,
                    "inventories": {"VCPU": {"total": 1000}, "MEMORY_MB": {"total": 100000}},
                },
            )
            assert put.status_code == 200, put.text
            providers.append(rp)
        consumer = str(uuid.uuid4())
        put = http[2].put(
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
        start = http[1].get(f"/allocations/{consumer}")
        assert start.status_code == 200, start.text
        first_generation = start.json()["consumer_generation"]

        bodies = patch_bodies(providers, seed=150)
        answers: list[tuple[int, int, dict | str] | None] = [None] * len(bodies)
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
                host = 1 + turn % 2
                turn += 1
                try:
                    response = http[host].patch(f"/allocations/{consumer}", json=bodies[index])
                except Exception as exc:  # noqa: BLE001 - reported by the test
                    errors.append(f"PATCH {index} to host {host}: {exc!r}")
                    continue
                try:
                    parsed = response.json()
                except ValueError:
                    parsed = response.text[:500]
                answers[index] = (host, response.status_code, parsed)

        patching = time.monotonic()
        threads = [threading.Thread(target=client, args=(t,)) for t in range(THREADS)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(timeout=300)
        patch_seconds = time.monotonic() - patching
        assert not any(thread.is_alive() for thread in threads), "a client thread did not end"

        expected = expected_holdings(providers)
        shown = {host: client_.get(f"/allocations/{consumer}") for host, client_ in http.items()}
        usages = {
            host: {
                rp: client_.get(f"/resource_providers/{rp}/usages").json()["usages"]
                for rp in providers
            }
            for host, client_ in http.items()
        }
        logs = {host: log.read_text() for host, (_base, log) in served.items()}
    nodes = {node: node_holdings(url, consumer) for node, url in galera.urls.items()}

    statuses = collections.Counter(
        (f"host{a[0]}", a[1]) if a is not None else "no answer" for a in answers
    )
    figures = {
        "patches": PATCHES,
        "threads": THREADS,
        "patch_seconds": round(patch_seconds, 2),
        "test_seconds": round(time.monotonic() - began, 1),
        "answers": {
            f"{k[0]} {k[1]}" if isinstance(k, tuple) else k: n for k, n in statuses.items()
        },
        "service_retries_logged": {
            host: dict(collections.Counter(RETRIED.findall(text))) for host, text in logs.items()
        },
        "service_gave_up_logged": {
            host: text.count("gave up on the") for host, text in logs.items()
        },
    }
    print("\nGalera PATCH figures:\n" + json.dumps(figures, indent=2, sort_keys=True))

    assert not errors, errors
    refused = [a for a in answers if a is None or a[1] != 200]
    assert not refused, (figures, refused[:10])

    # Each PATCH moved the consumer generation by exactly one, whichever host took it.
    seen = sorted(a[2]["consumer_generation"] for a in answers)
    assert seen == list(range(first_generation + 1, first_generation + PATCHES + 1)), seen

    for host, response in shown.items():
        assert response.status_code == 200, response.text
        body = response.json()
        held = {rp: a["resources"] for rp, a in body["allocations"].items()}
        assert held == expected, host
        assert body["consumer_generation"] == first_generation + PATCHES, host
        for rp in providers:
            used = {rc: n for rc, n in usages[host][rp].items() if n}
            assert used == expected.get(rp, {}), (host, rp)

    assert nodes[1] == nodes[2] == nodes[3], nodes
    assert nodes[1] == (expected, first_generation + PATCHES), nodes[1]
