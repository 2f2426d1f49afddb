"""Holds (1.51) taken, confirmed and lapsing concurrently through two API hosts over a
3-node MariaDB Galera cluster.

As test_allocation_deltas.py: host 1 is ``placement-svc serve --workers 2`` on node 1,
host 2 on node 2, each with ``[placement_database] mysql_wsrep_sync_wait = 1``. The
churn of tests/functional/test_holds_concurrency.py runs for ~6 s, its 16 client
threads choosing a host at random for each request (a hold is often taken through one
node and confirmed or deleted through the other): holds of ttl 1..3 s, VCPU 1 or 2 on 3
providers of VCPU 8, about half confirmed (some too late), the rest lapsing, a
confirmed consumer deleted after a lifetime unless the run ends first; a sampler reads
usages all along. The expiry of a hold is the clock of the node each statement runs
on: on one machine, the nodes' clocks are one.

Then, once every hold not confirmed has expired (max ttl + 1 s), as on one database:
every answer one the spec allows (no 5xx, no transport error), no usage ever above
capacity, each provider's usage through both hosts exactly the sum of the confirmed
consumers' allocations still there, each of those with ``"hold": null``, every other
consumer ``{"allocations": {}}``, no confirm decided against the clock; and the three
nodes' tables agree: the live allocations (not of an expired hold) of the run's
consumers are the same on every node, and they are the confirmed ones; no confirmed
consumer has a hold row left on any node. The figures are printed (pytest -s).
"""

from __future__ import annotations

import contextlib
import json
import time

import httpx
import pytest
import sqlalchemy as sa

from placement_svc.db import holds, tables
from tests.functional.test_holds_concurrency import HEADERS, check_churn, churn
from tests.support.servers import run, serving, write_conf

pytestmark = pytest.mark.slow


def node_state(url: str, consumers: list[str]) -> tuple[dict, set]:
    """One node's tables, read once it has applied every write the cluster committed
    before: (consumer -> provider -> class -> amount of its live allocations (those
    of a hold that expired left out, by this node's clock), the consumers among
    ``consumers`` with a hold row)."""
    a, rp, rc = tables.allocations, tables.resource_providers, tables.resource_classes
    engine = sa.create_engine(url)
    try:
        with engine.connect() as conn:
            conn.exec_driver_sql("SET SESSION wsrep_sync_wait = 1")
            held: dict[str, dict[str, dict[str, int]]] = {}
            for consumer, provider, name, used in conn.execute(
                sa.select(a.c.consumer_id, rp.c.uuid, rc.c.name, a.c.used)
                .join(rp, rp.c.id == a.c.resource_provider_id)
                .join(rc, rc.c.id == a.c.resource_class_id)
                .where(a.c.consumer_id.in_(consumers), holds.live(a))
            ):
                res = held.setdefault(consumer, {}).setdefault(provider, {})
                res[name] = res.get(name, 0) + used
            holding = set(
                conn.execute(
                    sa.select(tables.allocation_holds.c.consumer_id).where(
                        tables.allocation_holds.c.consumer_id.in_(consumers)
                    )
                ).scalars()
            )
    finally:
        engine.dispose()
    return held, holding


def test_holds_through_two_hosts_over_galera(galera, tmp_path):
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
        http = [
            stack.enter_context(httpx.Client(base_url=base, timeout=60, headers=HEADERS))
            for base, _log in served.values()
        ]
        result = churn(http, threads=16, seconds=6.0, seed=151)
        figures = result.figures()
        figures["test_seconds"] = round(time.monotonic() - began, 1)
        print("\nGalera hold churn:\n" + json.dumps(figures, indent=2, sort_keys=True))
        check_churn(result, http)
        logs = {host: log.read_text() for host, (_base, log) in served.items()}

    for host, text in logs.items():
        assert "Traceback" not in text, (host, text[-4000:])

    consumers = [h.uuid for h in result.held]
    expected = {h.uuid: {h.rp: {"VCPU": h.vcpu}} for h in result.held if h.kept}
    nodes = {node: node_state(url, consumers) for node, url in galera.urls.items()}
    for node, (held, holding) in nodes.items():
        assert held == expected, (node, "live allocations")
        assert not holding & set(expected), (node, "confirmed consumers with a hold row")
    assert nodes[1] == nodes[2] == nodes[3], "the nodes disagree"
    assert result.recorder.counts[("hold", "409 capacity")] > 0, figures
    assert result.recorder.counts[("confirm", "204")] > 0, figures
