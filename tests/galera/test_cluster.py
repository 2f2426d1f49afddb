"""Two API hosts over a 3-node MariaDB Galera cluster, under load, while a node restarts.

Issue 18: several API hosts, each on its own node of a replicated database.
Host 1 serves from node 1 (the bootstrap node), host 2 from node 2; each is a
real ``placement-svc serve --workers 2`` with ``[placement_database]
mysql_wsrep_sync_wait = 1``. Six providers of VCPU and MEMORY_MB are
claimed, moved and released by 16 client threads for about 40 seconds, each
thread with consumers of its own, its requests alternating between the two
hosts: PUT /allocations/{consumer} with the consumer generation read just
before (microversion 1.38), POST /allocations for several consumers at once,
DELETE /allocations/{consumer}; a 409 generation conflict is re-read and
retried. A client-side ledger keeps what each consumer holds after each 2xx.
Twelve seconds in, node 2 is stopped for eight seconds and started again
(it rejoins by IST); the clients keep going.

Then, the tests: no provider is ever overcommitted (sampled on node 3 during
the run, read from every node at the end, and as GET .../usages answers);
the three nodes hold the same allocations and they are the ledger's, and
every read saw the writes answered before it (no lost, phantom or stale
write); no 5xx but 503s from host 2 while its node is down (and a few
seconds around that); host 2 answers 2xx again within seconds of its node's
return, the same processes; node 2 came back by IST. The figures (claims/s,
409s, 503s, seconds to recover) are printed (pytest -s) and written to
figures.json in the module's tmp directory.
"""

from __future__ import annotations

import contextlib
import json
import random
import re
import threading
import time
import uuid
from collections import Counter
from collections.abc import Collection
from dataclasses import dataclass, field

import httpx
import pytest
import sqlalchemy as sa

from placement_svc import conf
from placement_svc.db import tables
from placement_svc.db.engine import create_engine
from tests.support.servers import get, run, serving, write_conf

pytestmark = pytest.mark.slow

VERSION = "placement 1.38"
HEADERS = {"x-auth-token": "admin", "openstack-api-version": VERSION}
PROJECT = "9a0f2a55-4b0e-4a43-9c8c-6e1f3b2d7a10"
USER = "4c1d8e77-0f6a-4c52-8b9e-2f7d5a3c1e20"
THREADS = 16
CONSUMERS_PER_THREAD = 4  # its own, and SHARED_PER_THREAD of the shared ones
SHARED_CONSUMERS = 8
SHARED_PER_THREAD = 2  # so each shared consumer has 4 clients: consumer generation conflicts
PROVIDERS = 6
# The timeline, in seconds from the start of the load.
STOP_AT = 12.0  # node 2 is stopped
DOWN_FOR = 8.0  # and started again this long after it stopped
AFTER_BACK = 12.0  # the load goes on at least this long after node 2 is Synced again
MIN_LOAD = 40.0
# 503s from host 2 are expected from this long before node 2 stops until this
# long after it is Synced again.
SETTLE = 5.0
RECOVERY_LIMIT = 10.0
RETRIES_AFTER_409 = 3

Held = dict[str, dict[str, int]]  # provider uuid -> resource class -> amount


def freeze(held: Held) -> tuple:
    return tuple(
        sorted((rp, rc, amount) for rp, res in held.items() for rc, amount in res.items() if amount)
    )


def inventory(n: int) -> dict:
    """Small providers, so that claims compete for the last of their room: half with VCPU
    at 1.0, half at 2.0; some with VCPU reserved; MEMORY_MB at 1.0, 512 reserved."""
    return {
        "VCPU": {
            "total": 12 + 2 * (n % 2),
            "reserved": 2 * (n % 2),
            "max_unit": 12,
            "allocation_ratio": 1.0 if n < PROVIDERS // 2 else 2.0,
        },
        "MEMORY_MB": {"total": 6144, "reserved": 512, "max_unit": 6144, "allocation_ratio": 1.0},
    }


@dataclass
class Consumer:
    """A consumer and its line of the ledger. Its lock is held for each request about it
    (not from a read to the write after it): the ledger then follows the order in which
    its writes commit, while clients sharing it still write on generations gone stale."""

    uuid: str
    held: Held = field(default_factory=dict)  # after the last 2xx write
    # After writes answered by neither a 2xx nor a 4xx: what each tried to write, and how
    # it was answered. The database holds ``held`` or one of these; the next read tells.
    doubt: list[tuple[Held, str]] | None = None
    lock: threading.Lock = field(default_factory=threading.Lock, repr=False, compare=False)


@dataclass
class Request:
    thread: int
    host: int
    method: str
    path: str
    start: float  # seconds from the start of the load
    end: float
    status: int | None  # None: no answer (a transport error)
    detail: str = ""


@dataclass
class Load:
    """What the clients did and saw."""

    requests: list[Request] = field(default_factory=list)
    consumers: dict[str, Consumer] = field(default_factory=dict)
    claims: int = 0  # consumers given resources by a 2xx write (a claim, move or resize)
    releases: int = 0
    retries: int = 0  # re-reads and writes again after a 409 generation conflict
    # Reads that disagreed with the ledger (a write answered 2xx not seen: stale or lost).
    mismatches: list[dict] = field(default_factory=list)
    # Writes answered 4xx that the database holds anyway.
    phantoms: list[dict] = field(default_factory=list)
    # Writes answered 5xx (or not at all) that turned out applied; and not applied.
    applied_after_error: list[dict] = field(default_factory=list)
    not_applied_after_error: int = 0
    overcommit_samples: int = 0
    overcommits: list[dict] = field(default_factory=list)
    max_usage_ratio: float = 0.0
    errors: list[str] = field(default_factory=list)  # exceptions in client threads
    lock: threading.Lock = field(default_factory=threading.Lock)


class Client:
    """One client thread: its consumers (most its own, a few shared with other clients),
    its requests alternating between the hosts."""

    def __init__(
        self,
        index: int,
        bases: dict[int, str],
        load: Load,
        began: float,
        shared: list[Consumer],
        own: int = CONSUMERS_PER_THREAD,
    ):
        self.index = index
        self.rng = random.Random(1800 + index)
        self.http = {host: httpx.Client(base_url=base, timeout=30) for host, base in bases.items()}
        self.load = load
        self.began = began
        self.turn = index
        self.requests: list[Request] = []
        self.mine = [Consumer(str(uuid.uuid4())) for _ in range(own)]
        self.mine += [shared[(index + 3 * k) % len(shared)] for k in range(SHARED_PER_THREAD)]
        with load.lock:
            load.consumers.update((c.uuid, c) for c in self.mine)
        self.providers: list[str] = []
        self.claims_made = self.releases_made = self.retries_made = 0
        # Writes answered 4xx, to be read back once (check_refused).
        self.refused: list[tuple[Consumer, Held, str]] = []

    def close(self) -> None:
        for client in self.http.values():
            client.close()

    def now(self) -> float:
        return time.monotonic() - self.began

    def call(self, method: str, path: str, body=None, host: int | None = None):
        """One request to the next host in turn: (host, status, parsed body or None)."""
        if host is None:
            host = 1 + self.turn % 2
            self.turn += 1
        start = self.now()
        try:
            response = self.http[host].request(method, path, json=body, headers=HEADERS)
        except httpx.HTTPError as exc:
            self.requests.append(
                Request(self.index, host, method, path, start, self.now(), None, repr(exc))
            )
            return host, None, None
        parsed = None
        if response.content:
            with contextlib.suppress(ValueError):
                parsed = response.json()
        detail = ""
        if response.status_code >= 400 and isinstance(parsed, dict):
            error = (parsed.get("errors") or [{}])[0]
            detail = f"{error.get('code', '')} {error.get('detail', '')}".strip()
        self.requests.append(
            Request(self.index, host, method, path, start, self.now(), response.status_code, detail)
        )
        if response.status_code >= 500:
            time.sleep(0.05)  # a host without its database: try the other one next
        return host, response.status_code, parsed

    # The ledger

    def read(self, consumer: Consumer, host: int | None = None):
        """GET the consumer's allocations, check them against the ledger: its generation
        (None: no consumer yet), or False when the read failed."""
        with consumer.lock:
            return self._read(consumer, host)

    def _read(self, consumer: Consumer, host: int | None):
        host, status, body = self.call("GET", f"/allocations/{consumer.uuid}", host=host)
        if status != 200:
            return False
        held: Held = {rp: dict(a["resources"]) for rp, a in body["allocations"].items()}
        seen = freeze(held)
        if consumer.doubt is not None:
            applied = [answer for tried, answer in consumer.doubt if freeze(tried) == seen]
            if seen == freeze(consumer.held):
                with self.load.lock:
                    self.load.not_applied_after_error += len(consumer.doubt)
                consumer.doubt = None
            elif applied:
                with self.load.lock:
                    self.load.applied_after_error.append(
                        {"consumer": consumer.uuid, "answer": applied[-1], "at": self.now()}
                    )
                consumer.held, consumer.doubt = held, None
            else:
                answers = "; ".join(answer for _tried, answer in consumer.doubt)
                self.mismatch(consumer, host, held, f"in doubt after {answers}")
        elif seen != freeze(consumer.held):
            self.mismatch(consumer, host, held, "after 2xx")
        return body.get("consumer_generation")

    def mismatch(self, consumer: Consumer, host: int, held: Held, why: str) -> None:
        # Which host disagrees: read again from the other one.
        other = 3 - host
        _h, status, body = self.call("GET", f"/allocations/{consumer.uuid}", host=other)
        again = None
        if status == 200:
            again = {rp: dict(a["resources"]) for rp, a in body["allocations"].items()}
        with self.load.lock:
            self.load.mismatches.append(
                {
                    "consumer": consumer.uuid,
                    "why": why,
                    "at": round(self.now(), 2),
                    "ledger": consumer.held,
                    f"host{host}": held,
                    f"host{other}": again,
                }
            )

    def answered(self, consumers, intents, status: int | None, answer: str) -> None:
        """Keep the ledger after a write of ``intents`` (one per consumer)."""
        if status is not None and 200 <= status < 300:
            for consumer, intent in zip(consumers, intents, strict=True):
                if intent:
                    self.claims_made += 1
                else:
                    self.releases_made += 1
                # The write replaced whatever the consumer had: nothing is in doubt now.
                consumer.held, consumer.doubt = intent, None
        elif status is not None and status < 500:
            # Not applied, as the answer says: check_refused reads it back (phantoms).
            for consumer, intent in zip(consumers, intents, strict=True):
                self.refused.append((consumer, intent, answer))
        else:
            for consumer, intent in zip(consumers, intents, strict=True):
                consumer.doubt = [*(consumer.doubt or []), (intent, answer)]

    # What a client wants

    def flavor(self) -> dict[str, int]:
        return {
            "VCPU": self.rng.choice((1, 2, 2, 4)),
            "MEMORY_MB": self.rng.choice((256, 512, 1024)),
        }

    def place(self, flavor: dict[str, int], avoid: Collection[str] = ()) -> Held:
        choices = [rp for rp in self.providers if rp not in avoid] or self.providers
        first = self.rng.choice(choices)
        if self.rng.random() < 0.25 and len(choices) > 1:
            second = self.rng.choice([rp for rp in choices if rp != first])
            return {first: {"VCPU": flavor["VCPU"]}, second: {"MEMORY_MB": flavor["MEMORY_MB"]}}
        return {first: dict(flavor)}

    def intent(self, consumer: Consumer) -> Held:
        if not consumer.held:
            return self.place(self.flavor())
        roll = self.rng.random()
        if roll < 0.35:  # move
            flavor = Counter()
            for res in consumer.held.values():
                flavor.update(res)
            return self.place(dict(flavor), avoid=set(consumer.held))
        if roll < 0.8:  # release
            return {}
        return self.place(self.flavor())  # resize (maybe elsewhere)

    # The steps

    def step(self) -> None:
        if self.rng.random() < 0.2:
            self.batch()
        else:
            self.single(self.rng.choice(self.mine))

    def single(self, consumer: Consumer) -> None:
        generation = self.read(consumer)
        if generation is False:
            return
        intent = self.intent(consumer)
        for attempt in range(RETRIES_AFTER_409 + 1):
            with consumer.lock:
                if not intent and self.rng.random() < 0.5:
                    host, status, _body = self.call("DELETE", f"/allocations/{consumer.uuid}")
                else:
                    host, status, _body = self.call(
                        "PUT", f"/allocations/{consumer.uuid}", self.put_body(intent, generation)
                    )
                detail = self.requests[-1].detail
                answer = f"host {host} {self.requests[-1].method} {status} {detail}".strip()
                self.answered([consumer], [intent], status, answer)
            if status != 409 or "exceed the capacity" in detail or attempt == RETRIES_AFTER_409:
                return
            # Someone else changed a provider or the consumer: read again, then retry.
            self.retries_made += 1
            generation = self.read(consumer)
            if generation is False:
                return

    def batch(self) -> None:
        chosen = self.rng.sample(self.mine, self.rng.choice((2, 3)))
        generations = []
        for consumer in chosen:
            generation = self.read(consumer)
            if generation is False:
                return
            generations.append(generation)
        intents = [self.intent(c) for c in chosen]
        body = {
            c.uuid: self.put_body(intent, generation)
            for c, intent, generation in zip(chosen, intents, generations, strict=True)
        }
        with contextlib.ExitStack() as locks:
            for consumer in sorted(chosen, key=lambda c: c.uuid):
                locks.enter_context(consumer.lock)
            host, status, _body = self.call("POST", "/allocations", body)
            detail = self.requests[-1].detail
            self.answered(chosen, intents, status, f"host {host} POST {status} {detail}".strip())

    @staticmethod
    def put_body(intent: Held, generation) -> dict:
        return {
            "allocations": {rp: {"resources": res} for rp, res in intent.items()},
            "project_id": PROJECT,
            "user_id": USER,
            "consumer_generation": generation,
            "consumer_type": "INSTANCE",
        }

    def check_refused(self) -> None:
        """A write answered 4xx must not be in the database: read each back once."""
        refused, self.refused = self.refused, []
        for consumer, intent, answer in refused:
            with consumer.lock:
                if consumer.doubt is not None or freeze(intent) == freeze(consumer.held):
                    continue
                _h, status, body = self.call("GET", f"/allocations/{consumer.uuid}")
                if status != 200:
                    continue
                held = {rp: dict(a["resources"]) for rp, a in body["allocations"].items()}
                if freeze(held) == freeze(intent):
                    with self.load.lock:
                        self.load.phantoms.append(
                            {"consumer": consumer.uuid, "answer": answer, "at": self.now()}
                        )
                    consumer.held = intent

    def run(self, stop: threading.Event) -> None:
        try:
            while not stop.is_set():
                self.step()
                if self.rng.random() < 0.1:
                    self.check_refused()
        except Exception as exc:  # noqa: BLE001 - reported by the test
            with self.load.lock:
                self.load.errors.append(f"client {self.index}: {exc!r}")
        finally:
            with self.load.lock:
                self.load.requests.extend(self.requests)
                self.load.claims += self.claims_made
                self.load.releases += self.releases_made
                self.load.retries += self.retries_made


# Reading the database directly


def usage_rows(engine: sa.Engine) -> list[tuple]:
    """(provider uuid, class, used, capacity) for every inventory with allocations."""
    a, i = tables.allocations, tables.inventories
    rp, rc = tables.resource_providers, tables.resource_classes
    used = (
        sa.select(
            a.c.resource_provider_id, a.c.resource_class_id, sa.func.sum(a.c.used).label("used")
        )
        .group_by(a.c.resource_provider_id, a.c.resource_class_id)
        .subquery()
    )
    query = (
        sa.select(rp.c.uuid, rc.c.name, used.c.used, i.c.total, i.c.reserved, i.c.allocation_ratio)
        .select_from(used)
        .join(rp, rp.c.id == used.c.resource_provider_id)
        .join(rc, rc.c.id == used.c.resource_class_id)
        .outerjoin(
            i,
            (i.c.resource_provider_id == used.c.resource_provider_id)
            & (i.c.resource_class_id == used.c.resource_class_id),
        )
    )
    with engine.connect() as conn:
        rows = conn.execute(query).all()
    return [
        (
            row.uuid,
            row.name,
            int(row.used),
            0 if row.total is None else (row.total - row.reserved) * row.allocation_ratio,
        )
        for row in rows
    ]


def allocations_by_consumer(engine: sa.Engine) -> dict[str, tuple]:
    a, rp, rc = tables.allocations, tables.resource_providers, tables.resource_classes
    query = (
        sa.select(a.c.consumer_id, rp.c.uuid, rc.c.name, a.c.used)
        .join(rp, rp.c.id == a.c.resource_provider_id)
        .join(rc, rc.c.id == a.c.resource_class_id)
    )
    found: dict[str, Held] = {}
    with engine.connect() as conn:
        for consumer, provider, name, used in conn.execute(query):
            res = found.setdefault(consumer, {}).setdefault(provider, {})
            res[name] = res.get(name, 0) + used
    return {consumer: freeze(held) for consumer, held in found.items()}


def monitor(engine: sa.Engine, load: Load, stop: threading.Event) -> None:
    """Overcommit, sampled twice a second on node 3 (never stopped) while the load runs."""
    while not stop.wait(0.5):
        try:
            rows = usage_rows(engine)
        except sa.exc.DBAPIError as exc:
            with load.lock:
                load.errors.append(f"monitor: {exc!r}")
            continue
        with load.lock:
            load.overcommit_samples += 1
            for provider, name, used, capacity in rows:
                if capacity:
                    load.max_usage_ratio = max(load.max_usage_ratio, used / capacity)
                if used > capacity:
                    load.overcommits.append(
                        {"provider": provider, "class": name, "used": used, "capacity": capacity}
                    )


ERROR_LINE = re.compile(r"^\S+Error: .*$|\(\d{4}, ['\"].*?['\"]\)", re.MULTILINE)


def server_errors(log_text: str) -> dict[str, int]:
    """The exceptions a serve log reports, counted (MySQL errors by their number and text)."""
    found = Counter()
    for match in ERROR_LINE.finditer(log_text):
        found[match.group(0)[:200]] += 1
    return dict(found.most_common(20))


# The run


@dataclass
class Outcome:
    load: Load
    duration: float
    timeline: dict[str, float]
    nodes: dict[int, dict[str, tuple]]  # node -> consumer -> allocations, at the end
    usages: dict[int, list[tuple]]  # node -> usage rows, at the end
    api_usages: dict[int, dict[str, dict[str, int]]]  # host -> provider -> usages
    providers: list[str]
    worker_boots: dict[int, int]  # "Booting worker" lines in each host's log
    server_errors: dict[int, dict[str, int]]
    node2_log: str
    confs: dict[int, str] = field(default_factory=dict)  # host -> its placement.conf
    figures: dict = field(default_factory=dict)


def in_window(request: Request, timeline: dict[str, float]) -> bool:
    return timeline["stop_begin"] - SETTLE <= request.start <= timeline["node_back"] + SETTLE


@pytest.fixture(scope="module")
def outcome(galera, tmp_path_factory) -> Outcome:
    work = tmp_path_factory.mktemp("galera-hosts")
    confs = {}
    for host in (1, 2):
        directory = work / f"host{host}"
        directory.mkdir()
        confs[host] = (
            directory,
            write_conf(
                directory,
                galera.urls[host],
                "[placement_database]\nmysql_wsrep_sync_wait = 1\n",
            ),
        )
    # The schema, by the project's own migration, through node 1.
    run("db", "sync", "--config-file", confs[1][1], cwd=confs[1][0], check=True)
    engines = {node: sa.create_engine(url) for node, url in galera.urls.items()}
    try:
        with contextlib.ExitStack() as stack:
            served = {
                host: stack.enter_context(serving(directory, conf, "--workers", "2"))
                for host, (directory, conf) in confs.items()
            }
            bases = {host: base for host, (base, _log) in served.items()}
            result = drive(galera, bases, engines, work)
            result.confs = {host: path for host, (_directory, path) in confs.items()}
            logs = {host: log.read_text() for host, (_base, log) in served.items()}
            result.server_errors = {host: server_errors(text) for host, text in logs.items()}
            result.worker_boots = {
                host: text.count("Booting worker") for host, text in logs.items()
            }
        result.figures = figures(result, galera)
        path = work / "figures.json"
        path.write_text(json.dumps(result.figures, indent=2, sort_keys=True))
        galera.figures_path = path
        print("\nGalera figures:\n" + json.dumps(result.figures, indent=2, sort_keys=True))
        print(f"figures written to {path}")
        return result
    finally:
        for engine in engines.values():
            engine.dispose()


def drive(galera, bases: dict[int, str], engines: dict[int, sa.Engine], work) -> Outcome:
    # Six providers, through host 1; host 2 must see them at once (wsrep_sync_wait).
    providers = []
    with httpx.Client(base_url=bases[1], timeout=30, headers=HEADERS) as http:
        for n in range(PROVIDERS):
            rp = str(uuid.uuid4())
            created = http.post("/resource_providers", json={"uuid": rp, "name": f"galera-{n}"})
            assert created.status_code == 200, created.text
            put = http.put(
                f"/resource_providers/{rp}/inventories",
                json={"resource_provider_generation": 0, "inventories": inventory(n)},
            )
            assert put.status_code == 200, put.text
            providers.append(rp)
    status, body = get(bases[2] + "/resource_providers", HEADERS)
    assert status == 200 and len(body["resource_providers"]) == PROVIDERS, body

    load = Load()
    began = time.monotonic()
    shared = [Consumer(str(uuid.uuid4())) for _ in range(SHARED_CONSUMERS)]
    clients = [Client(i, bases, load, began, shared) for i in range(THREADS)]
    for client in clients:
        client.providers = providers
    stop = threading.Event()
    threads = [threading.Thread(target=c.run, args=(stop,), daemon=True) for c in clients]
    threads.append(threading.Thread(target=monitor, args=(engines[3], load, stop), daemon=True))
    for thread in threads:
        thread.start()
    timeline: dict[str, float] = {}
    try:
        time.sleep(STOP_AT)
        timeline["stop_begin"] = time.monotonic() - began
        galera.stop_node(2)
        timeline["stop_done"] = time.monotonic() - began
        time.sleep(DOWN_FOR)
        timeline["start_begin"] = time.monotonic() - began
        galera.start_node(2)
        timeline["node_back"] = time.monotonic() - began
        time.sleep(max(AFTER_BACK, MIN_LOAD - (time.monotonic() - began)))
    finally:
        stop.set()
        for thread in threads:
            thread.join(timeout=60)
        for client in clients:
            client.close()
    duration = time.monotonic() - began

    # Settle what is still in doubt (through host 1), then read every node.
    settler = Client(THREADS, bases, load, began, shared, own=0)
    for consumer in load.consumers.values():
        if consumer.doubt is not None:
            settler.read(consumer, host=1)
    load.requests.extend(settler.requests)
    settler.close()
    nodes = {node: allocations_by_consumer(engine) for node, engine in engines.items()}
    usages = {node: sorted(usage_rows(engine)) for node, engine in engines.items()}
    api_usages = {}
    for host, base in bases.items():
        api_usages[host] = {}
        for rp in providers:
            status, body = get(f"{base}/resource_providers/{rp}/usages", HEADERS)
            assert status == 200, body
            api_usages[host][rp] = {rc: n for rc, n in body["usages"].items() if n}
    node2_log = galera.log(2).read_text(errors="replace")
    return Outcome(
        load=load,
        duration=duration,
        timeline=timeline,
        nodes=nodes,
        usages=usages,
        api_usages=api_usages,
        providers=providers,
        worker_boots={},
        server_errors={},
        node2_log=node2_log,
    )


def recovery_seconds(result: Outcome, since: str = "node_back") -> float | None:
    """From node 2 Synced again (cluster.sh start-node returned; or ``since``, another
    moment of the timeline) to the end of host 2's first 2xx asked after the node stopped.
    0: host 2 answered before the script saw the node Synced."""
    back = result.timeline[since]
    ends = [
        r.end
        for r in result.load.requests
        if r.host == 2
        and r.status is not None
        and 200 <= r.status < 300
        and r.start >= result.timeline["stop_done"]
    ]
    return round(max(0.0, min(ends) - back), 2) if ends else None


def figures(result: Outcome, galera) -> dict:
    requests = result.load.requests
    by_status = Counter(f"host{r.host} {r.status}" for r in requests)
    conflicts = Counter()
    for r in requests:
        if r.status == 409:
            kind = (
                "capacity"
                if "exceed the capacity" in r.detail
                else "consumer generation"
                if "consumer generation" in r.detail
                else "concurrent update"
                if "concurrent" in r.detail.lower()
                else r.detail[:80]
            )
            conflicts[kind] += 1
    down_503 = sum(
        1 for r in requests if r.host == 2 and r.status == 503 and in_window(r, result.timeline)
    )
    t = result.timeline
    return {
        "threads": THREADS,
        "consumers": len(result.load.consumers),
        "providers": PROVIDERS,
        "load_seconds": round(result.duration, 1),
        "requests": len(requests),
        "requests_by_host_and_status": dict(sorted(by_status.items())),
        "claims": result.load.claims,
        "claims_per_second": round(result.load.claims / result.duration, 1),
        "writes_2xx_per_second": round(
            sum(1 for r in requests if r.method != "GET" and 200 <= (r.status or 0) < 300)
            / result.duration,
            1,
        ),
        "releases": result.load.releases,
        "conflicts_409": sum(conflicts.values()),
        "conflicts_409_by_kind": dict(conflicts),
        "retries_after_409": result.load.retries,
        "host2_503_while_node2_down": down_503,
        "unexpected_5xx": len(unexpected_5xx(result)),
        "transport_errors": sum(1 for r in requests if r.status is None),
        "node2_stop_seconds": round(t["stop_done"] - t["stop_begin"], 1),
        "node2_down_seconds": round(t["start_begin"] - t["stop_done"], 1),
        "node2_rejoin_seconds": round(t["node_back"] - t["start_begin"], 1),
        "host2_recovery_seconds": recovery_seconds(result),
        "host2_seconds_from_node2_start_to_2xx": recovery_seconds(result, "start_begin"),
        "timeline": {k: round(v, 2) for k, v in t.items()},
        "mismatched_reads": len(result.load.mismatches),
        "phantom_writes": len(result.load.phantoms),
        "applied_after_5xx_or_no_answer": len(result.load.applied_after_error),
        "not_applied_after_5xx_or_no_answer": result.load.not_applied_after_error,
        "overcommit_samples": result.load.overcommit_samples,
        "max_usage_ratio": round(result.load.max_usage_ratio, 3),
        "server_errors": result.server_errors,
        "worker_boots": result.worker_boots,
        "galera_dir": str(galera.directory),
    }


def unexpected_5xx(result: Outcome) -> list[Request]:
    """5xx or no answer at all, but host 2's 503s while its node was away."""
    return [
        r
        for r in result.load.requests
        if (r.status is None or r.status >= 500)
        and not (r.host == 2 and r.status == 503 and in_window(r, result.timeline))
    ]


def describe(requests: list[Request], limit: int = 15) -> str:
    return "\n".join(
        f"  t={r.start:.2f}-{r.end:.2f} host{r.host} {r.method} {r.path} -> {r.status} {r.detail}"
        for r in requests[:limit]
    ) + (f"\n  ... {len(requests) - limit} more" if len(requests) > limit else "")


class TestTwoHostsOverGalera:
    def test_the_clients_ran_without_errors(self, outcome):
        assert not outcome.load.errors, outcome.load.errors
        assert outcome.load.claims > 100, outcome.figures

    def test_no_provider_is_ever_overcommitted(self, outcome):
        assert outcome.load.overcommit_samples > 10
        assert not outcome.load.overcommits, outcome.load.overcommits[:10]
        for node, rows in outcome.usages.items():
            over = [row for row in rows if row[2] > row[3]]
            assert not over, f"node {node}: {over}"
        from_db = {}
        for provider, name, used, _capacity in outcome.usages[1]:
            from_db.setdefault(provider, {})[name] = used
        for host, usages in outcome.api_usages.items():
            assert usages == {rp: from_db.get(rp, {}) for rp in outcome.providers}, host

    def test_every_node_holds_the_ledger_exactly(self, outcome):
        ledger = {uuid_: freeze(c.held) for uuid_, c in outcome.load.consumers.items() if c.held}
        in_doubt = [c.uuid for c in outcome.load.consumers.values() if c.doubt is not None]
        assert not in_doubt
        assert outcome.nodes[1] == outcome.nodes[2] == outcome.nodes[3]
        lost = {c: held for c, held in ledger.items() if outcome.nodes[1].get(c) != held}
        phantom = {c: held for c, held in outcome.nodes[1].items() if c not in ledger}
        assert not lost, f"lost writes (ledger vs node 1): {lost}"
        assert not phantom, f"allocations no 2xx made: {phantom}"

    def test_every_read_saw_the_writes_answered_before_it(self, outcome):
        assert not outcome.load.mismatches, outcome.load.mismatches[:5]

    def test_no_write_refused_with_4xx_was_applied(self, outcome):
        assert not outcome.load.phantoms, outcome.load.phantoms[:5]

    def test_no_write_answered_5xx_was_applied(self, outcome):
        assert not outcome.load.applied_after_error, outcome.load.applied_after_error[:5]

    def test_no_5xx_but_503_from_host2_while_its_node_is_down(self, outcome):
        unexpected = unexpected_5xx(outcome)
        assert not unexpected, (
            f"{len(unexpected)} unexpected 5xx (timeline {outcome.timeline}):\n"
            f"{describe(unexpected)}\nserver errors: {outcome.server_errors}"
        )
        host1_5xx = [r for r in outcome.load.requests if r.host == 1 and (r.status or 500) >= 500]
        assert not host1_5xx, describe(host1_5xx)

    def test_host2_answers_2xx_within_seconds_of_its_node_returning(self, outcome):
        recovery = recovery_seconds(outcome)
        assert recovery is not None and recovery <= RECOVERY_LIMIT, recovery
        late = [
            r
            for r in outcome.load.requests
            if r.host == 2
            and r.start > outcome.timeline["node_back"] + SETTLE
            and (r.status is None or r.status >= 500)
        ]
        assert not late, describe(late)

        # The same processes: no worker was restarted (a crash, a timeout) meanwhile.
        assert outcome.worker_boots == {1: 2, 2: 2}

    def test_each_hosts_connections_wait_for_the_clusters_writes(self, outcome):
        # What made every read above see the writes before it: the session's wsrep_sync_wait,
        # set by the engine the service builds from its placement.conf.
        for host, path in outcome.confs.items():
            cfg = conf.make_conf(config_files=[path])
            engine = create_engine(cfg.placement_database.connection, cfg.placement_database)
            try:
                with engine.connect() as connection:
                    row = connection.exec_driver_sql(
                        "SELECT @@session.wsrep_sync_wait, @@wsrep_on, @@port"
                    ).one()
            finally:
                engine.dispose()
            assert tuple(row[:2]) == (1, 1), (host, row)
            assert f":{row[2]}/" in cfg.placement_database.connection

    def test_node2_rejoined_by_ist(self, outcome):
        # Its log since it started again: the state came by IST, no full transfer.
        rejoin = outcome.node2_log.rsplit("[Note] Starting MariaDB", 1)[-1]
        assert "Receiving IST:" in rejoin, rejoin[-3000:]
        assert "rsync IST completed on joiner" in rejoin
        assert "rsync SST completed on joiner" not in rejoin
