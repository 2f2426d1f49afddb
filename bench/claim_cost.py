"""What one claim costs in-process: statements, time, and where the time goes.

Runs PUT /allocations/{consumer} as nova's scheduler sends it (1.36, a new
consumer, one small flavor on one of --hosts hosts) through the whole WSGI
application in this process, as bench/floor.py does for reads: no network,
no HTTP parsing, one worker's worth. Prints the statements one claim runs
(counted on the engine), the median time of a claim, then the own time per
stage under cProfile (bench/floor.py's stages).

    python bench/claim_cost.py [--repeat 2000] [--hosts 50] [--url postgresql+psycopg://...]

--url names an EMPTY database the bench may wipe; by default a temporary
SQLite file.
"""

from __future__ import annotations

import argparse
import io
import json
import os
import statistics
import sys
import tempfile
import time
import uuid
import wsgiref.util
from pathlib import Path

import sqlalchemy as sa

sys.path.insert(0, str(Path(__file__).resolve().parent))

from floor import fresh_application, profile_stages  # noqa: E402  (bench/floor.py)

VERSION = "placement 1.36"
FLAVOR = {"VCPU": 1, "MEMORY_MB": 512, "DISK_GB": 1}


def call(application, method: str, path: str, body: dict | None = None) -> tuple[str, bytes]:
    environ: dict = {}
    wsgiref.util.setup_testing_defaults(environ)
    raw = json.dumps(body).encode() if body is not None else b""
    environ.update(
        REQUEST_METHOD=method,
        PATH_INFO=path,
        HTTP_X_AUTH_TOKEN="admin",
        HTTP_OPENSTACK_API_VERSION=VERSION,
        CONTENT_TYPE="application/json",
        CONTENT_LENGTH=str(len(raw)),
    )
    environ["wsgi.input"] = io.BytesIO(raw)
    answered = []
    out = b"".join(application(environ, lambda status, headers, exc=None: answered.append(status)))
    return answered[0], out


def load(application, hosts: int) -> list[str]:
    uuids = []
    for n in range(hosts):
        rp = str(uuid.uuid4())
        status, body = call(
            application, "POST", "/resource_providers", {"name": f"claim-{n}", "uuid": rp}
        )
        assert status.startswith("200"), (status, body)
        inventories = {
            rc: {"total": 10**6, "max_unit": 10**6, "allocation_ratio": 1.0} for rc in FLAVOR
        }
        status, body = call(
            application,
            "PUT",
            f"/resource_providers/{rp}/inventories",
            {"resource_provider_generation": 0, "inventories": inventories},
        )
        assert status.startswith("200"), (status, body)
        uuids.append(rp)
    return uuids


def claim(application, host: str) -> None:
    body = {
        "allocations": {host: {"resources": FLAVOR}},
        "project_id": "bench-project",
        "user_id": "bench-user",
        "consumer_generation": None,
    }
    status, out = call(application, "PUT", f"/allocations/{uuid.uuid4()}", body)
    assert status.startswith("204"), (status, out)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=2000)
    parser.add_argument("--hosts", type=int, default=50)
    parser.add_argument("--url", help="an empty database to use (default: a SQLite file)")
    parser.add_argument("--statements", action="store_true", help="print one claim's SQL")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="bench-claim-") as workdir:
        engine, application = fresh_application(args.url or f"sqlite:///{workdir}/claims.sqlite")
        hosts = load(application, args.hosts)
        for n in range(200):
            claim(application, hosts[n % len(hosts)])

        statements: list[str] = []

        @sa.event.listens_for(engine, "before_cursor_execute")
        def count(_conn, _cursor, statement, *_rest):
            if not statement.startswith("BEGIN"):  # SQLite's BEGIN IMMEDIATE, ours
                statements.append(statement)

        claim(application, hosts[0])
        sa.event.remove(engine, "before_cursor_execute", count)
        print(
            f"# python {sys.version.split()[0]}, {os.cpu_count()} cores, "
            f"{engine.dialect.name}, {args.hosts} hosts, {args.repeat} claims"
        )
        print(f"statements per claim: {len(statements)} (BEGIN and COMMIT not counted)")
        if args.statements:
            for statement in statements:
                print("   ", " ".join(statement.split())[:160])
        times = []
        for n in range(args.repeat):
            started = time.perf_counter()
            claim(application, hosts[n % len(hosts)])
            times.append(time.perf_counter() - started)
        times.sort()
        print(
            f"PUT /allocations/{{c}}  median {statistics.median(times) * 1000:6.3f} ms  "
            f"p95 {times[int(len(times) * 0.95)] * 1000:6.3f} ms"
        )
        profile(application, hosts, min(args.repeat, 1000))
        engine.dispose()
    return 0


def profile(application, hosts: list[str], repeat: int) -> None:
    turn = iter(range(repeat))
    profile_stages(lambda: claim(application, hosts[next(turn) % len(hosts)]), repeat, "claim")


if __name__ == "__main__":
    sys.exit(main())
