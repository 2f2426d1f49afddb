"""The per-request floor: what a small read costs in-process, and where it goes.

Times GET /usages?project_id= (one grouped query, a one-row answer) and
GET /resource_providers/{uuid} (one indexed read) through the whole WSGI
application in this process, one worker's worth: every middleware (metrics,
health and OpenAPI mounts, request log, auth, microversion, policy,
conditional reads), the handler, the unit of work and JSON. No network, no
HTTP parsing (that is gunicorn's). Then profiles each and sums the time by
stage.

    python bench/floor.py [--repeat 2000] [--url postgresql+psycopg://...]

--url names an EMPTY database the bench may wipe; by default a temporary
SQLite file.
"""

from __future__ import annotations

import argparse
import collections
import cProfile
import logging
import os
import pstats
import statistics
import sys
import tempfile
import time
import wsgiref.util

from placement_svc import app, conf
from placement_svc.cmd import runtime
from placement_svc.db import migration, tables
from placement_svc.db.engine import Database, create_engine

PROVIDER = "4e8e5957-649f-477b-9e5b-f1f75b21c03c"
READS = [
    ("GET /usages?project_id=", "/usages", "project_id=bench"),
    ("GET /resource_providers/{uuid}", f"/resource_providers/{PROVIDER}", ""),
]
# Where a file's time is counted: the first of these its path contains.
STAGES = [
    ("the driver (Python part)", ("sqlite3", "psycopg", "pymysql")),
    ("SQLAlchemy", ("sqlalchemy",)),
    ("policy (oslo.policy)", ("oslo_policy", "placement_svc/policy", "placement_svc/policies")),
    ("request log", ("placement_svc/requestlog", "oslo_middleware", "logging")),
    (
        "context, auth, microversion",
        (
            "placement_svc/context",
            "placement_svc/auth",
            "placement_svc/middleware",
            "microversion_parse",
            "oslo_context",
        ),
    ),
    ("metrics", ("placement_svc/metrics", "prometheus_client")),
    ("falcon", ("falcon",)),
    ("JSON", ("orjson", "json")),
    ("handler and unit of work", ("placement_svc",)),
]


def call(application, path: str, query: str) -> bytes:
    environ: dict = {}
    wsgiref.util.setup_testing_defaults(environ)
    environ.update(
        PATH_INFO=path,
        QUERY_STRING=query,
        HTTP_X_AUTH_TOKEN="admin",
        HTTP_OPENSTACK_API_VERSION="placement 1.39",
    )
    answered = []
    body = b"".join(application(environ, lambda status, headers, exc=None: answered.append(status)))
    assert answered[0].startswith("200"), (answered, body[:300])
    return body


def stage_of(filename: str) -> str:
    path = filename.replace("\\", "/")
    for stage, marks in STAGES:
        if any(mark in path for mark in marks):
            return stage
    return "C calls (database library, sockets, builtins) and the rest"


def fresh_application(url: str):
    """An engine on ``url``, emptied (its tables dropped) and given the schema,
    and the whole application on it, as one serving worker has it: requests
    logged at INFO (to nowhere), the garbage collector tuned."""
    logging.getLogger("placement_svc.requests").setLevel(logging.INFO)  # as serve logs
    logging.basicConfig(stream=open(os.devnull, "w"), level=logging.INFO)  # noqa: SIM115
    engine = create_engine(url)
    if not url.startswith("sqlite"):
        with engine.begin() as conn:
            tables.metadata.drop_all(conn)
            conn.exec_driver_sql("DROP TABLE IF EXISTS alembic_version")
    migration.sync(engine)
    cfg = conf.make_conf(config_files=[], quickstart_if_unconfigured=False)
    cfg.set_override("auth_strategy", "noauth2", group="api")
    application = app.create_app(cfg, Database(engine))
    runtime.tune()
    return engine, application


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=2000)
    parser.add_argument("--url", help="an empty database to use (default: a SQLite file)")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="bench-floor-") as workdir:
        engine, application = fresh_application(args.url or f"sqlite:///{workdir}/floor.sqlite")
        with engine.begin() as conn:
            conn.execute(
                tables.resource_providers.insert(),
                [
                    {
                        "id": 1,
                        "uuid": PROVIDER,
                        "name": "floor",
                        "generation": 0,
                        "root_provider_id": 1,
                    }
                ],
            )
        print(
            f"# python {sys.version.split()[0]}, {os.cpu_count()} cores, "
            f"{engine.dialect.name}, {args.repeat} requests each"
        )
        for label, path, query in READS:
            for _ in range(200):
                call(application, path, query)
            times = []
            for _ in range(args.repeat):
                started = time.perf_counter()
                call(application, path, query)
                times.append(time.perf_counter() - started)
            times.sort()
            print(
                f"{label:32} median {statistics.median(times) * 1000:6.3f} ms  "
                f"p95 {times[int(len(times) * 0.95)] * 1000:6.3f} ms"
            )
            profile(application, path, query, min(args.repeat, 500))
        engine.dispose()
    return 0


def profile(application, path: str, query: str, repeat: int) -> None:
    profile_stages(lambda: call(application, path, query), repeat, "request")


def profile_stages(once, repeat: int, unit: str) -> None:
    """Run ``once()`` ``repeat`` times under cProfile; print the own time per
    ``unit`` (request, claim) summed by stage (STAGES)."""
    profiler = cProfile.Profile()
    profiler.enable()
    for _ in range(repeat):
        once()
    profiler.disable()
    by_stage: collections.Counter = collections.Counter()
    for (filename, _line, _name), (_cc, _nc, own, _cum, _callers) in pstats.Stats(
        profiler
    ).stats.items():
        by_stage[stage_of(filename)] += own / repeat
    total = sum(by_stage.values())
    print(f"    under cProfile {total * 1000:.3f} ms per {unit}, own time by stage:")
    for stage, seconds in by_stage.most_common():
        print(f"    {seconds * 1000:7.3f} ms {seconds / total:6.1%}  {stage}")


if __name__ == "__main__":
    sys.exit(main())
