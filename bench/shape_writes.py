"""Benchmark shape writes: many writers changing providers' inventories,
traits, aggregates and children at once, and how often the database's
sessions wait on a lock meanwhile.

What nova's resource tracker does on every compute host, from many hosts at
once: each of --writers threads owns one root provider (made before the
clock starts, with VCPU, MEMORY_MB and DISK_GB, two traits and an
aggregate) and, for --seconds, writes its shape over its own connection
(kept alive where the server allows it: gunicorn's sync workers close it),
in turn: PUT /resource_providers/{uuid}/inventories (one total changed),
PUT .../traits and PUT .../aggregates (alternating sets, the 1.19 body with
the generation), POST /resource_providers of a child
(parent_provider_uuid), then DELETE of that child. Each writer tracks its
provider's generation from the answers, so no writer conflicts with
another: a 409 is a finding (counted; the writer reads its generation again
and goes on), and so is a 5xx (its body is printed). It prints writes/s,
the count of each kind of write, the p50 and p95 latency of a write and
every error by status; then deletes what it made (children first) and the
run's traits, so the database can be reused. Standard library only, but
for --sample-db.

    python bench/shape_writes.py --url http://127.0.0.1:8778 [--writers 16]
        [--seconds 20] [--version 1.39] [--token admin] [--sample-db DB_URL]

--sample-db takes the SQLAlchemy URL of the database the server uses
(sqlalchemy and its driver from .venv): while the writers run, a sampler
counts the sessions of that database that wait on a lock, every 50 ms on
PostgreSQL (pg_stat_activity's wait_event_type 'Lock'), every 125 ms on
MariaDB/MySQL (information_schema.innodb_lock_waits, else innodb_trx's
'LOCK WAIT': InnoDB refreshes those only when unread for 0.1 s; else, every
50 ms, the processlist's lock-wait states), and prints the share of samples
with at least one waiter, the mean waiters and what they ran.

To compare with upstream, serve each on a fresh database with 16 workers,
one at a time (on a 2-core machine a second server's idle workers are not
free), and run the script against each. placement-svc (a config file with
[placement_database] connection and [api] auth_strategy = noauth2):

    createdb -h 127.0.0.1 -U postgres bench_shape_ours
    printf '[api]\\nauth_strategy = noauth2\\n[placement_database]\\nconnection = %s\\n' \\
        postgresql+psycopg://postgres@127.0.0.1/bench_shape_ours > ours.conf
    .venv/bin/placement-svc db sync --config-file ours.conf
    .venv/bin/placement-svc serve --config-file ours.conf --workers 16 \\
        --bind 127.0.0.1:8810 2> ours.log &
    .venv/bin/python bench/shape_writes.py --url http://127.0.0.1:8810 --writers 16 \\
        --sample-db postgresql+psycopg://postgres@127.0.0.1/bench_shape_ours

upstream OpenStack Placement 16.0.0 (bench/upstream.sh makes .upstream-venv,
writes its placement.conf, runs placement-manage db sync and serves it under
gunicorn, its request log on stdout; its pid is the gunicorn master's, in
.upstream-runs/serve-8811/gunicorn.pid):

    createdb -h 127.0.0.1 -U postgres bench_shape_up
    WORKERS=16 PORT=8811 bash bench/upstream.sh \\
        postgresql+psycopg2://postgres@127.0.0.1/bench_shape_up > up.log 2>&1 &
    .venv/bin/python bench/shape_writes.py --url http://127.0.0.1:8811 --writers 16 \\
        --sample-db postgresql+psycopg://postgres@127.0.0.1/bench_shape_up

On MariaDB the URLs are mysql+pymysql://root@127.0.0.1/DBNAME?charset=utf8mb4
(create the database with `mysql -h 127.0.0.1 -u root -e 'CREATE DATABASE
bench_shape_ours'`). Stop each server with TERM to its pid (placement-svc:
the serve process; upstream: the gunicorn master). It exits with status 1 if
the endpoint answered a 5xx or a 409.
"""

from __future__ import annotations

import argparse
import http.client
import json
import statistics
import sys
import threading
import time
import uuid
from collections import Counter
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from candidates import Client  # noqa: E402  (bench/candidates.py)

KINDS = ("inventories", "traits", "aggregates", "child-create", "child-delete")
SAMPLE_EVERY = 0.05  # seconds between lock samples
# InnoDB's information_schema lock tables are read from a cache that it
# refreshes only when nobody read it for 0.1 s: sampled every 50 ms, they
# would show the first sample's waiters for ever.
INNODB_SAMPLE_EVERY = 0.125


def inventories(vcpus: int) -> dict:
    return {
        "VCPU": {"total": vcpus, "allocation_ratio": 4.0},
        "MEMORY_MB": {"total": 131072},
        "DISK_GB": {"total": 2000},
    }


class Run:
    """The names of one run and what its writers saw."""

    def __init__(self, url: str, token: str, version: str, writers: int):
        self.tag = uuid.uuid4().hex[:8]
        self.client = Client(url, token, version)
        self.url, self.writers = url, writers
        traits = [f"CUSTOM_BENCH_SHAPE_{self.tag.upper()}_{n}" for n in "AB"]
        self.traits = traits
        # Sets written in turn: each differs from the one before it.
        self.trait_sets = [
            [traits[0], "HW_CPU_X86_AVX2"],
            [traits[1]],
            [traits[0], traits[1], "HW_CPU_X86_AVX2", "HW_CPU_X86_SSE42"],
        ]
        aggregates = [str(uuid.uuid4()) for _ in range(4)]
        self.aggregate_sets = [aggregates[:1], aggregates[1:3], [aggregates[0], aggregates[3]]]
        self.roots: list[str] = []
        self.leftovers: list[str] = []  # children whose DELETE did not answer 204
        self.latencies: list[float] = []
        self.kinds: Counter[str] = Counter()
        self.errors: Counter[str] = Counter()
        self.findings = 0  # answers 409 or 5xx
        self.bodies: list[str] = []  # of those, the first ones
        self.elapsed = 0.0
        self.lock = threading.Lock()

    def setup(self) -> None:
        client = self.client
        for trait in self.traits:
            client.ok("PUT", f"/traits/{trait}", expect=(201, 204))
        for i in range(self.writers):
            root = str(uuid.uuid4())
            client.ok(
                "POST", "/resource_providers", {"name": f"bench-shape-{self.tag}-{i}", "uuid": root}
            )
            body = {"resource_provider_generation": 0, "inventories": inventories(64)}
            data = client.ok("PUT", f"/resource_providers/{root}/inventories", body)
            body = {
                "resource_provider_generation": data["resource_provider_generation"],
                "traits": self.trait_sets[0],
            }
            data = client.ok("PUT", f"/resource_providers/{root}/traits", body)
            body = {
                "resource_provider_generation": data["resource_provider_generation"],
                "aggregates": self.aggregate_sets[0],
            }
            client.ok("PUT", f"/resource_providers/{root}/aggregates", body)
            self.roots.append(root)

    def cleanup(self) -> None:
        client, failed = self.client, []
        for rp in self.leftovers + self.roots:
            status, raw = client.raw("DELETE", f"/resource_providers/{rp}")
            if status not in (204, 404):
                failed.append(f"DELETE /resource_providers/{rp} {status}: {raw[:300]!r}")
        for trait in self.traits:
            status, raw = client.raw("DELETE", f"/traits/{trait}")
            if status not in (204, 404):
                failed.append(f"DELETE /traits/{trait} {status}: {raw[:300]!r}")
        print(
            f"# cleanup: deleted {len(self.roots)} roots, {len(self.leftovers)} children "
            f"the writers left and {len(self.traits)} traits; {len(failed)} failed",
            flush=True,
        )
        for line in failed[:5]:
            print(f"!!!   {line}", flush=True)


class Writer:
    """One thread's provider and its turn in the mix."""

    def __init__(self, run: Run, index: int):
        self.run, self.index = run, index
        self.root = run.roots[index]
        self.generation: int | None = None
        self.step = index  # writers start at different kinds
        self.child: str | None = None

    def refresh(self) -> None:
        data = self.run.client.ok("GET", f"/resource_providers/{self.root}")
        self.generation = data["generation"]

    def request(self, kind: str, method: str, path: str, body=None) -> tuple[int, dict | None]:
        run = self.run
        began = time.perf_counter()
        try:
            status, raw = run.client.raw(method, path, body)
        except (OSError, http.client.HTTPException) as exc:  # counted, not raised
            run.client.local.conn = None
            with run.lock:
                run.errors[f"{method} {kind} {type(exc).__name__}"] += 1
            return 0, None
        took = time.perf_counter() - began
        with run.lock:
            if 200 <= status < 300:
                run.kinds[kind] += 1
                run.latencies.append(took)
            else:
                code = ""
                try:
                    code = " " + json.loads(raw)["errors"][0]["code"]
                except (ValueError, KeyError, IndexError, TypeError):
                    pass
                run.errors[f"{method} {kind} {status}{code}"] += 1
                if status >= 500 or status == 409:
                    run.findings += 1
                    if len(run.bodies) < 5:
                        run.bodies.append(f"{method} {path} {status}: {raw[:1500]!r}")
        if 200 <= status < 300:
            return status, json.loads(raw) if raw else None
        return status, None

    def one(self) -> None:
        """The next write of the mix."""
        run, root = self.run, self.root
        if self.generation is None:
            try:
                self.refresh()
            except (OSError, http.client.HTTPException, RuntimeError) as exc:
                run.client.local.conn = None
                with run.lock:
                    run.errors[f"GET generation {type(exc).__name__}"] += 1
                return
        kind = KINDS[self.step % len(KINDS)]
        turn = self.step // len(KINDS)
        self.step += 1
        base = f"/resource_providers/{root}"
        if kind == "inventories":
            body = {
                "resource_provider_generation": self.generation,
                "inventories": inventories(64 + turn % 2),
            }
            status, data = self.request(kind, "PUT", f"{base}/inventories", body)
        elif kind == "traits":
            body = {
                "resource_provider_generation": self.generation,
                "traits": run.trait_sets[1 + turn % 2],
            }
            status, data = self.request(kind, "PUT", f"{base}/traits", body)
        elif kind == "aggregates":
            body = {
                "resource_provider_generation": self.generation,
                "aggregates": run.aggregate_sets[1 + turn % 2],
            }
            status, data = self.request(kind, "PUT", f"{base}/aggregates", body)
        elif kind == "child-create":
            child = str(uuid.uuid4())
            body = {
                "name": f"bench-shape-{run.tag}-{self.index}-child-{turn}",
                "uuid": child,
                "parent_provider_uuid": root,
            }
            status, data = self.request(kind, "POST", "/resource_providers", body)
            if 200 <= status < 300:
                self.child = child
            return
        else:
            if self.child is None:  # its creation failed
                return
            child, self.child = self.child, None
            status, data = self.request(kind, "DELETE", f"/resource_providers/{child}")
            if status not in (204, 404):
                with run.lock:
                    run.leftovers.append(child)
            return
        if data is not None:
            self.generation = data["resource_provider_generation"]
        else:  # a 409 or worse: read the generation again
            self.generation = None

    def finish(self) -> None:
        if self.child is not None:
            with self.run.lock:
                self.run.leftovers.append(self.child)


def write(run: Run, seconds: float) -> None:
    writers = [Writer(run, i) for i in range(run.writers)]
    start_line = threading.Barrier(len(writers) + 1)
    clock: dict[str, float] = {}

    def loop(writer: Writer) -> None:
        writer.refresh()  # opens this thread's connection before the clock starts
        start_line.wait()
        while time.perf_counter() < clock["deadline"]:
            writer.one()
        writer.finish()

    threads = [threading.Thread(target=loop, args=(writer,)) for writer in writers]
    for thread in threads:
        thread.start()
    began = time.perf_counter()
    clock["deadline"] = began + seconds
    start_line.wait()
    for thread in threads:
        thread.join()
    run.elapsed = time.perf_counter() - began


class LockSampler:
    """Counts, every SAMPLE_EVERY seconds (INNODB_SAMPLE_EVERY from InnoDB's
    tables), the database's sessions waiting on a lock, and what they run."""

    def __init__(self, url: str):
        import sqlalchemy  # only here: the rest of the script is standard library

        self.sqlalchemy = sqlalchemy
        self.engine = sqlalchemy.create_engine(url, poolclass=sqlalchemy.pool.NullPool)
        self.conn = self.engine.connect().execution_options(isolation_level="AUTOCOMMIT")
        self.dialect = self.engine.dialect.name
        self.query, self.source = self._choose()
        self.every = INNODB_SAMPLE_EVERY if "innodb" in self.source else SAMPLE_EVERY
        self.samples: list[int] = []
        self.what: Counter[str] = Counter()
        self.failures: Counter[str] = Counter()
        self.stopping = threading.Event()
        self.thread = threading.Thread(target=self._loop, daemon=True)

    def _choose(self):
        text = self.sqlalchemy.text
        if self.dialect == "postgresql":
            return (
                text(
                    "SELECT wait_event, left(regexp_replace(query, '\\s+', ' ', 'g'), 60) "
                    "FROM pg_stat_activity WHERE datname = current_database() "
                    "AND wait_event_type = 'Lock'"
                ),
                "pg_stat_activity wait_event_type = 'Lock'",
            )
        if self.dialect not in ("mysql", "mariadb"):
            raise SystemExit(f"--sample-db: no lock sampler for {self.dialect}")
        # The waiting transactions of this database's sessions.
        candidates = [
            (
                "SELECT DISTINCT w.requesting_trx_id, 'row lock', left(t.trx_query, 60) "
                "FROM information_schema.innodb_lock_waits w "
                "JOIN information_schema.innodb_trx t ON t.trx_id = w.requesting_trx_id "
                "JOIN information_schema.processlist p ON p.id = t.trx_mysql_thread_id "
                "WHERE p.db = DATABASE()",
                "information_schema.innodb_lock_waits",
            ),
            (
                "SELECT t.trx_id, 'row lock', left(t.trx_query, 60) "
                "FROM information_schema.innodb_trx t "
                "JOIN information_schema.processlist p ON p.id = t.trx_mysql_thread_id "
                "WHERE p.db = DATABASE() AND t.trx_state = 'LOCK WAIT'",
                "information_schema.innodb_trx trx_state = 'LOCK WAIT'",
            ),
            (
                "SELECT id, state, left(info, 60) FROM information_schema.processlist "
                "WHERE db = DATABASE() AND (state LIKE 'Waiting for%lock%' "
                "OR state LIKE '%lock wait%')",
                "information_schema.processlist lock-wait states",
            ),
        ]
        for sql, source in candidates:
            try:
                self.conn.execute(text(sql)).fetchall()
            except self.sqlalchemy.exc.DBAPIError:
                continue
            return text(sql), source
        raise SystemExit("--sample-db: no lock-wait table could be read")

    def _loop(self) -> None:
        tick = time.perf_counter()
        while not self.stopping.is_set():
            try:
                rows = self.conn.execute(self.query).fetchall()
            except self.sqlalchemy.exc.DBAPIError as exc:
                self.failures[type(exc.orig).__name__] += 1
            else:
                self.samples.append(len(rows))
                for row in rows:
                    self.what[f"{row[-2]}: {' '.join(str(row[-1] or '').split())}"] += 1
            tick += self.every
            self.stopping.wait(max(0.0, tick - time.perf_counter()))

    def start(self) -> None:
        self.thread.start()

    def stop(self) -> None:
        self.stopping.set()
        self.thread.join()
        self.conn.close()
        self.engine.dispose()

    def report(self) -> None:
        samples = self.samples
        if not samples:
            print(f"# lock waits: no samples ({dict(self.failures)})", flush=True)
            return
        waiting = sum(1 for n in samples if n)
        print(
            f"# lock waits ({self.dialect}, {self.source}, every {self.every * 1000:g} ms): "
            f"{100 * waiting / len(samples):.1f} % of {len(samples)} samples had a waiter; "
            f"mean {statistics.fmean(samples):.2f}, max {max(samples)} waiting"
            + (f"; {sum(self.failures.values())} samples failed" if self.failures else ""),
            flush=True,
        )
        for what, n in self.what.most_common(5):
            print(f"#   {n:6d} x {what}", flush=True)


def percentile(values: list[float], share: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(round(share * (len(ordered) - 1))))]


def report(run: Run) -> bool:
    """Prints the figures; returns whether the endpoint answered a 5xx or 409."""
    total = sum(run.kinds.values())
    kinds = " ".join(f"{kind} {run.kinds[kind]}" for kind in KINDS)
    if run.latencies:
        latency = (
            f"p50 {statistics.median(run.latencies) * 1000:.1f} ms  "
            f"p95 {percentile(run.latencies, 0.95) * 1000:.1f} ms"
        )
    else:
        latency = "no write succeeded"
    errors = ", ".join(f"{key}: {n}" for key, n in sorted(run.errors.items())) or "none"
    print(
        f"{run.url} {run.writers} writers: {total / run.elapsed:.1f} writes/s "
        f"({total} in {run.elapsed:.1f} s; {kinds})  {latency}  errors: {errors}",
        flush=True,
    )
    if run.bodies:
        print(f"!!! {run.findings} answers 409 or 5xx from {run.url}; the first ones:")
        for line in run.bodies[:5]:
            print(f"!!!   {line[:700]}", flush=True)
    return bool(run.findings)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--url", default="http://127.0.0.1:8778")
    parser.add_argument("--token", default="admin")
    parser.add_argument("--writers", type=int, default=16, help="threads, one provider each")
    parser.add_argument("--seconds", type=float, default=20.0)
    parser.add_argument(
        "--version", default="1.39", help="microversion of every request (1.20 or later)"
    )
    parser.add_argument(
        "--sample-db",
        metavar="DB_URL",
        help="SQLAlchemy URL of the server's database: sample its sessions' lock waits",
    )
    args = parser.parse_args(argv)
    if tuple(int(n) for n in args.version.split(".")) < (1, 20):
        parser.error("--version: 1.20 or later (aggregates with generations, child providers)")
    run = Run(args.url, args.token, args.version, args.writers)
    status, raw = run.client.raw("GET", "/")
    try:
        served = json.loads(raw)["versions"][0]["max_version"]
    except (ValueError, KeyError, IndexError, TypeError):
        served = f"? ({status})"
    sampler = LockSampler(args.sample_db) if args.sample_db else None
    began = time.perf_counter()
    run.setup()
    print(
        f"# shape writes at {args.version} against {args.url} (max version {served}): "
        f"{args.writers} writers, {args.seconds:g} s, each on its own provider "
        f"(made in {time.perf_counter() - began:.1f} s), run {run.tag}; mix: "
        f"{', '.join(KINDS)}",
        flush=True,
    )
    try:
        if sampler:
            sampler.start()
        try:
            write(run, args.seconds)
        finally:
            if sampler:
                sampler.stop()
        failed = report(run)
        if sampler:
            sampler.report()
    finally:
        run.cleanup()
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
