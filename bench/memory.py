"""A serving worker's memory at cloud scale, and whether it grows.

Loads a flat cloud of 10,000 hosts (bench/scale.py's) into a fresh SQLite
file, starts ``placement-svc serve --workers 1`` on it, and sends requests
one after another over one keep-alive connection: nova's allocation
candidates query with ``limit=1000`` (one in five), claims and their
removal, usages, provider reads and now and then an inventory change (which
makes the worker read the shape of the cloud again). Prints the worker's
RSS every ``--every`` requests and its peak (VmHWM) at the end.

    python bench/memory.py [--hosts 10000] [--requests 10000] [--every 1000] [--port N]
"""

from __future__ import annotations

import argparse
import http.client
import json
import os
import random
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import scale  # noqa: E402  (bench/scale.py)

from placement_svc.db import migration  # noqa: E402
from placement_svc.db.engine import create_engine  # noqa: E402

NOVA = (
    "/allocation_candidates?resources=VCPU:2,MEMORY_MB:4096,DISK_GB:20&limit=1000"
    "&group_policy=none&root_required=!COMPUTE_STATUS_DISABLED"
)
HEADERS = {"x-auth-token": "admin", "openstack-api-version": "placement 1.36"}


def status_of(pid: int) -> dict[str, int]:
    """VmRSS and VmHWM of a process, in kB."""
    found = {}
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        key, _colon, value = line.partition(":")
        if key in ("VmRSS", "VmHWM"):
            found[key] = int(value.split()[0])
    return found


def worker_of(master: int) -> int:
    """The gunicorn worker: the master's child."""
    for _ in range(100):
        for entry in os.listdir("/proc"):
            if entry.isdigit():
                try:
                    fields = Path(f"/proc/{entry}/stat").read_text().rsplit(")", 1)[1].split()
                except OSError:
                    continue
                if int(fields[1]) == master:
                    return int(entry)
        time.sleep(0.1)
    raise RuntimeError("no worker found")


class Client:
    def __init__(self, port: int):
        self.conn = http.client.HTTPConnection("127.0.0.1", port, timeout=60)

    def call(self, method: str, path: str, body=None) -> tuple[int, bytes]:
        headers = dict(HEADERS)
        if body is not None:
            headers["content-type"] = "application/json"
            body = json.dumps(body)
        self.conn.request(method, path, body=body, headers=headers)
        response = self.conn.getresponse()
        return response.status, response.read()


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--hosts", type=int, default=10000)
    parser.add_argument("--requests", type=int, default=10000)
    parser.add_argument("--every", type=int, default=1000)
    parser.add_argument(
        "--port", type=int, help="the port to serve on (default: 18000 + this pid modulo 1000)"
    )
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="bench-memory-") as workdir:
        url = f"sqlite:///{workdir}/cloud.sqlite"
        engine = create_engine(url)
        migration.sync(engine)
        scale.load(engine, args.hosts, "flat")
        engine.dispose()
        conf = Path(workdir, "placement.conf")
        conf.write_text(
            f"[placement_database]\nconnection = {url}\n[api]\nauth_strategy = noauth2\n"
        )
        port = args.port or 18000 + os.getpid() % 1000
        server = subprocess.Popen(
            [sys.executable, "-m", "placement_svc.cmd.cli", "serve", "--config-file", str(conf),
             "--bind", f"127.0.0.1:{port}", "--workers", "1"],
            stdout=subprocess.DEVNULL, stderr=open(Path(workdir, "serve.log"), "w"),
        )  # fmt: skip
        try:
            return run(args, port, server)
        finally:
            server.terminate()
            server.wait(timeout=30)


def run(args, port: int, server: subprocess.Popen) -> int:
    for _ in range(100):
        try:
            client = Client(port)
            if client.call("GET", "/")[0] == 200:
                break
        except OSError:
            time.sleep(0.2)
    worker = worker_of(server.pid)
    rng = random.Random(3)
    hosts = [str(uuid.UUID(int=(1 << 64) + pid)) for pid in range(1, args.hosts + 1)]
    project, user = str(uuid.uuid4()), str(uuid.uuid4())
    claims: list[str] = []
    print(f"# {args.hosts} hosts; worker pid {worker}; RSS in MB")
    print(f"# {'requests':>8}  {'RSS':>6}  {'seconds':>7}")
    statuses: dict[int, int] = {}
    started = time.perf_counter()
    first_rss = None
    for n in range(1, args.requests + 1):
        kind = n % 10
        if kind in (0, 5):
            status, _body = client.call("GET", NOVA)
        elif kind in (1, 6):
            consumer = str(uuid.uuid4())
            body = {
                "allocations": {rng.choice(hosts): {"resources": {"VCPU": 1, "MEMORY_MB": 512}}},
                "project_id": project,
                "user_id": user,
                "consumer_generation": None,
            }
            status, _body = client.call("PUT", f"/allocations/{consumer}", body)
            if status == 204:
                claims.append(consumer)
        elif kind == 2 and claims:
            status, _body = client.call("DELETE", f"/allocations/{claims.pop(0)}")
        elif kind == 3:
            status, _body = client.call("GET", f"/usages?project_id={project}")
        elif kind == 4 and n % 500 == 4:
            host = rng.choice(hosts)
            _status, raw = client.call("GET", f"/resource_providers/{host}")
            generation = json.loads(raw)["generation"]
            inventories = {
                "VCPU": {"total": 32, "allocation_ratio": 4.0},
                "MEMORY_MB": {"total": 131072},
                "DISK_GB": {"total": rng.choice([2000, 1900])},
            }
            body = {"resource_provider_generation": generation, "inventories": inventories}
            status, _body = client.call("PUT", f"/resource_providers/{host}/inventories", body)
        else:
            status, _body = client.call("GET", f"/resource_providers/{rng.choice(hosts)}")
        statuses[status] = statuses.get(status, 0) + 1
        if n % args.every == 0:
            rss = status_of(worker)["VmRSS"] / 1024
            first_rss = first_rss or rss
            print(f"  {n:>8}  {rss:6.1f}  {time.perf_counter() - started:7.1f}", flush=True)
    peak = status_of(worker)["VmHWM"] / 1024
    print(
        f"# peak RSS {peak:.1f} MB; RSS grew {rss - first_rss:+.1f} MB after the first {args.every}"
    )
    print(f"# statuses: {dict(sorted(statuses.items()))}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
