"""A huge answer: GET /allocation_candidates on the wide cloud, without limit.

Builds bench/candidates.py's wide cloud (hosts of 8 identical one-unit
devices under a root with VCPU and memory) straight into a fresh SQLite file
with bulk INSERTs, starts ``placement-svc serve --workers 1`` on it in a
child process, asks the query of 4 granular groups of one device plus VCPU
under group_policy=isolate, without limit (50 hosts: 50 x 8*7*6*5 = 84,000
candidates), a few times, and prints the median seconds to the last byte
(and to the first), the bytes, the number of candidates and the worker's
peak RSS (VmHWM, which covers its whole life: start, loading and every
answer), with its RSS before the first query for comparison.

    python bench/huge.py [--hosts 50] [--repeat 5] [--version 1.36]
        [--groups 4] [--port 18790] [--keep DIR] [--save FILE]

The server is started with this interpreter (``python -m
placement_svc.cmd.cli``) and this process's environment, so
``PYTHONPATH=/elsewhere python bench/huge.py`` measures the placement_svc
found there (another checkout, say). Linux only (/proc).
"""

from __future__ import annotations

import argparse
import http.client
import json
import os
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time

import sqlalchemy as sa

from placement_svc.db import migration, tables
from placement_svc.db.engine import create_engine

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import scale  # noqa: E402  (bench/scale.py: the same rows as its clouds)

ACCEL = "CUSTOM_BENCH_ACCEL"
DEVICES = 8


def load(url: str, hosts: int) -> None:
    """``hosts`` trees: a root with 64 VCPU and 256 GiB, and 8 children of
    one CUSTOM_BENCH_ACCEL each, as bench/candidates.py's load_wide."""
    engine = create_engine(url)
    migration.sync(engine)
    with engine.begin() as conn:
        conn.execute(
            tables.resource_classes.insert(),
            [{"id": tables.MIN_CUSTOM_RESOURCE_CLASS_ID, "name": ACCEL}],
        )
        rc = dict(
            conn.execute(
                sa.select(tables.resource_classes.c.name, tables.resource_classes.c.id).where(
                    tables.resource_classes.c.name.in_(["VCPU", "MEMORY_MB", ACCEL])
                )
            ).all()
        )
        providers, inventories = [], []
        pid = 0
        for host in range(hosts):
            pid += 1
            root = pid
            providers.append(scale._provider(root, root, None, f"bench-wide-{host}"))
            inventories += [
                scale._inventory(root, rc["VCPU"], 64, 1.0),
                scale._inventory(root, rc["MEMORY_MB"], 262144, 1.0),
            ]
            for device in range(DEVICES):
                pid += 1
                providers.append(scale._provider(pid, root, root, f"bench-wide-{host}-dev{device}"))
                inventories.append(scale._inventory(pid, rc[ACCEL], 1, 1.0))
        conn.execute(tables.resource_providers.insert(), providers)
        conn.execute(tables.inventories.insert(), inventories)
    engine.dispose()


def query(groups: int) -> str:
    each = "&".join(f"resources{g}={ACCEL}:1" for g in range(1, groups + 1))
    return f"{each}&resources=VCPU:2&group_policy=isolate"


def serve(config: str, port: int, log, workdir: str) -> subprocess.Popen:
    """The server, run from ``workdir``: ``-m`` puts the current directory
    first on sys.path, and a source tree there would win over PYTHONPATH."""
    command = [sys.executable, "-m", "placement_svc.cmd.cli", "serve", "--config-file", config]
    command += ["--bind", f"127.0.0.1:{port}", "--workers", "1"]
    return subprocess.Popen(command, stdout=log, stderr=log, cwd=workdir)


def wait_ready(port: int, master: subprocess.Popen, seconds: float = 60) -> None:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if master.poll() is not None:
            raise SystemExit(f"the server exited ({master.returncode}); see its log")
        try:
            conn = http.client.HTTPConnection("127.0.0.1", port, timeout=5)
            conn.request("GET", "/")
            if conn.getresponse().status == 200:
                conn.close()
                return
        except OSError:
            time.sleep(0.2)
    raise SystemExit("the server did not answer in time")


def worker_of(master: int) -> int:
    """The gunicorn worker: the master's one child."""
    children = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as stat:
                fields = stat.read().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(fields[1]) == master:
            children.append(int(entry))
    if len(children) != 1:
        raise SystemExit(f"expected one worker under {master}, found {children}")
    return children[0]


def memory(pid: int) -> dict[str, int]:
    """VmRSS and VmHWM in MB."""
    found = {}
    with open(f"/proc/{pid}/status") as status:
        for line in status:
            key, _colon, value = line.partition(":")
            if key in ("VmRSS", "VmHWM"):
                found[key] = int(value.split()[0]) // 1024
    return found


def ask(port: int, path: str, version: str) -> tuple[float, float, bytes, dict]:
    """Seconds to the first and the last byte of the body, the body, the headers."""
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=600)
    headers = {"x-auth-token": "admin", "openstack-api-version": f"placement {version}"}
    started = time.perf_counter()
    conn.request("GET", path, headers=headers)
    response = conn.getresponse()
    first = response.read(1)
    to_first = time.perf_counter() - started
    body = first + response.read()
    to_last = time.perf_counter() - started
    conn.close()
    if response.status != 200:
        raise SystemExit(f"{response.status}: {body[:500]!r}")
    return to_first, to_last, body, {k.lower(): v for k, v in response.getheaders()}


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--hosts", type=int, default=50)
    parser.add_argument("--groups", type=int, default=4, help="granular groups of one device")
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--version", default="1.36", help="the microversion asked for")
    parser.add_argument("--port", type=int, default=0, help="default: a free one")
    parser.add_argument("--keep", metavar="DIR", help="build in DIR and leave it there")
    parser.add_argument("--save", metavar="FILE", help="write the last answer's body to FILE")
    args = parser.parse_args(argv)
    port = args.port or free_port()
    with tempfile.TemporaryDirectory(prefix="bench-huge-") as scratch:
        workdir = args.keep or scratch
        os.makedirs(workdir, exist_ok=True)
        database = os.path.join(workdir, "huge.sqlite")
        if os.path.exists(database):
            os.remove(database)
        url = f"sqlite:///{database}"
        started = time.perf_counter()
        load(url, args.hosts)
        print(
            f"# {args.hosts} hosts x {DEVICES} devices loaded in "
            f"{time.perf_counter() - started:.1f} s; python {sys.version.split()[0]}, "
            f"{os.cpu_count()} cores",
            flush=True,
        )
        config = os.path.join(workdir, "placement.conf")
        with open(config, "w") as out:
            out.write(f"[api]\nauth_strategy = noauth2\n[placement_database]\nconnection = {url}\n")
        with open(os.path.join(workdir, "serve.log"), "w") as log:
            master = serve(config, port, log, workdir)
            try:
                wait_ready(port, master)
                worker = worker_of(master.pid)
                before = memory(worker)
                path = "/allocation_candidates?" + query(args.groups)
                firsts, lasts = [], []
                body, headers = b"", {}
                for _ in range(args.repeat):
                    to_first, to_last, body, headers = ask(port, path, args.version)
                    firsts.append(to_first)
                    lasts.append(to_last)
                after = memory(worker)
            finally:
                master.send_signal(signal.SIGTERM)
                master.wait(30)
        if args.save:
            with open(args.save, "wb") as out:
                out.write(body)
        answer = json.loads(body)
        framing = (
            "chunked"
            if headers.get("transfer-encoding") == "chunked"
            else f"Content-Length {headers.get('content-length')}"
        )
        print(
            f"{args.groups} groups, isolate, no limit, {args.version}: "
            f"median {statistics.median(lasts):.3f} s to the last byte "
            f"({statistics.median(firsts):.3f} s to the first; runs "
            + ", ".join(f"{t:.3f}" for t in lasts)
            + f"), {len(body):,} bytes ({framing}), "
            f"{len(answer['allocation_requests']):,} candidates, "
            f"{len(answer['provider_summaries'])} summaries; "
            f"worker RSS {before['VmRSS']} MB before, {after['VmRSS']} MB after, "
            f"peak (VmHWM) {after['VmHWM']} MB",
            flush=True,
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
