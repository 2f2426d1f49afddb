"""How GET /allocation_candidates grows with the cloud: 1,000 to 10,000 hosts, in-process.

Loads each cloud straight into a fresh database with bulk INSERTs (the HTTP
API would take minutes at 10,000 hosts), then times whole requests through
the WSGI application in this process, one worker's worth: routing, policy,
the search, the walk, rendering and JSON, no network. Prints the median and
p95 per query and size, and with --profile the ten modules where a 10,000
host query spends its time.

    python bench/scale.py [--hosts 1000,4000,10000] [--repeat 10] [--profile]
        [--url postgresql+psycopg://postgres@127.0.0.1/bench_scale]

The flat cloud is bench/candidates.py's: 32 VCPU (ratio 4), 128 GiB and
2 TB per host, AVX2 on every host, a custom trait on half, one host in ten
disabled (COMPUTE_STATUS_DISABLED), each in one of ten aggregates, a third
of them with an instance on it (``candidates.py --load-into`` loads it with
this module's ``load``).
The nested cloud has, per tree, a root with VCPU, MEMORY_MB and DISK_GB and
four GPU children of 4 VGPU each (5 providers). --url names an EMPTY
database the bench may wipe (its tables are dropped and created again for
every size); by default a temporary SQLite file.
"""

from __future__ import annotations

import argparse
import collections
import cProfile
import os
import pstats
import statistics
import sys
import tempfile
import time
import uuid
import wsgiref.util

import sqlalchemy as sa

from placement_svc import app, conf
from placement_svc.cmd import runtime
from placement_svc.db import migration, tables
from placement_svc.db.engine import Database, create_engine

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from flat_cloud import AGGREGATES  # noqa: E402  (bench/flat_cloud.py: the flat cloud's)

VERSION = "1.36"
QUERIES = [
    (
        "flat",
        "nova's query, limit=1000",
        "resources=VCPU:2,MEMORY_MB:4096,DISK_GB:20&limit=1000&group_policy=none"
        "&root_required=!COMPUTE_STATUS_DISABLED",
    ),
    (
        "flat",
        "nova's query, no limit",
        "resources=VCPU:2,MEMORY_MB:4096,DISK_GB:20&group_policy=none"
        "&root_required=!COMPUTE_STATUS_DISABLED",
    ),
    (
        "nested",
        "VCPU + a VGPU group, limit=1000",
        "resources=VCPU:2,MEMORY_MB:4096,DISK_GB:20&resources1=VGPU:1&group_policy=none"
        "&limit=1000&root_required=!COMPUTE_STATUS_DISABLED",
    ),
]


def _ids(conn, table, names) -> dict[str, int]:
    rows = conn.execute(sa.select(table.c.name, table.c.id).where(table.c.name.in_(names)))
    return dict(rows.all())


def _next_id(conn, table) -> int:
    return (conn.execute(sa.select(sa.func.max(table.c.id))).scalar() or 0) + 1


def _named(conn, table, column: str, value: str) -> int:
    """The id of the row whose ``column`` is ``value``, made if missing (what
    the API does for a custom trait, a project, a user or a consumer type)."""
    found = conn.execute(sa.select(table.c.id).where(table.c[column] == value)).scalar()
    if found is None:
        found = conn.execute(table.insert().values({column: value})).inserted_primary_key[0]
    return found


def load(engine, hosts: int, shape: str) -> None:
    """``hosts`` trees of ``shape`` (flat: one provider; nested: a root and
    four GPU children), with inventories, traits, aggregates and some
    allocations, straight into the database.

    The flat cloud is the one bench/candidates.py's ``load_flat`` makes over
    the HTTP API, row for row: the same names (bench-flat-N), inventories
    (the API's defaults for what it leaves out, such as ``max_unit``),
    traits, aggregates (flat_cloud.AGGREGATES), allocations (a consumer of
    type INSTANCE in project and user ``bench``) and generations; only the
    uuids differ (fixed here: ``uuid.UUID(int=2**64 + id)``).

    The database must hold the standard resource classes and traits: those
    a serving process writes as it starts (placement-svc's ``db sync``,
    upstream's first request-serving worker); any rows already there stay.
    A serving placement-svc sees the load through its shape triggers, and
    upstream looks up a class or trait it has not cached in the database."""
    with engine.begin() as conn:
        rc = _ids(conn, tables.resource_classes, ["VCPU", "MEMORY_MB", "DISK_GB", "VGPU"])
        trait = _ids(conn, tables.traits, ["HW_CPU_X86_AVX2", "COMPUTE_STATUS_DISABLED"])
        missing = {"VCPU", "MEMORY_MB", "DISK_GB", "VGPU"} - set(rc)
        missing |= {"HW_CPU_X86_AVX2", "COMPUTE_STATUS_DISABLED"} - set(trait)
        if missing:
            raise RuntimeError(
                f"the database lacks the standard {', '.join(sorted(missing))}: start the "
                "service on it first (or run its db sync), then load"
            )
        trait["CUSTOM_BENCH_GOLD"] = _named(conn, tables.traits, "name", "CUSTOM_BENCH_GOLD")
        project = _named(conn, tables.projects, "external_id", "bench")
        user = _named(conn, tables.users, "external_id", "bench")
        instance = _named(conn, tables.consumer_types, "name", "INSTANCE")
        aggregate = {}
        for agg in AGGREGATES:
            aggregate[agg] = _named(conn, tables.placement_aggregates, "uuid", agg)
        providers, inventories, links, members, consumers, allocations = [], [], [], [], [], []
        first = next_id = _next_id(conn, tables.resource_providers)
        next_consumer = _next_id(conn, tables.consumers)
        for host in range(hosts):
            root = next_id
            # The API's writes, one generation each: inventories, traits,
            # aggregates, and the claim on a third of the hosts.
            generation = 3 if host % 3 else 4
            providers.append(_provider(root, root, None, f"bench-{shape}-{host}", generation))
            inventories += [
                _inventory(root, rc["VCPU"], 32, 4.0),
                _inventory(root, rc["MEMORY_MB"], 131072, 1.0),
                _inventory(root, rc["DISK_GB"], 2000, 1.0),
            ]
            names = ["HW_CPU_X86_AVX2"] + ([] if host % 2 else ["CUSTOM_BENCH_GOLD"])
            if host % 10 == 0:
                names.append("COMPUTE_STATUS_DISABLED")
            links += [{"resource_provider_id": root, "trait_id": trait[n]} for n in names]
            members.append(
                {
                    "resource_provider_id": root,
                    "aggregate_id": aggregate[AGGREGATES[host % len(AGGREGATES)]],
                }
            )
            if host % 3 == 0:
                consumer = str(uuid.UUID(int=next_consumer))
                consumers.append(
                    {
                        "id": next_consumer,
                        "uuid": consumer,
                        "project_id": project,
                        "user_id": user,
                        "generation": 1,
                        "consumer_type_id": instance,
                    }
                )
                next_consumer += 1
                allocations += [
                    _allocation(root, consumer, rc["VCPU"], 8),
                    _allocation(root, consumer, rc["MEMORY_MB"], 16384),
                ]
            next_id += 1
            if shape == "nested":
                for gpu in range(4):
                    name = f"bench-gpu-{host}-{gpu}"
                    providers.append(_provider(next_id, root, root, name, 1))
                    inventories.append(_inventory(next_id, rc["VGPU"], 4, 1.0))
                    next_id += 1
        for table, rows in (
            (tables.resource_providers, providers),
            (tables.inventories, inventories),
            (tables.resource_provider_traits, links),
            (tables.resource_provider_aggregates, members),
            (tables.consumers, consumers),
            (tables.allocations, allocations),
        ):
            # RETURNING makes SQLAlchemy send INSERTs of many rows each
            # (its "insertmanyvalues"), not one statement a row: placement-
            # svc's shape triggers on PostgreSQL run once a statement, and
            # took a minute for 10,000 hosts a row at a time.
            key = next(iter(table.primary_key.columns))
            for start in range(0, len(rows), 5000):
                conn.execute(table.insert().returning(key), rows[start : start + 5000])
        if conn.dialect.name == "postgresql" and next_id > first:
            # Ids given in an INSERT leave a serial column's sequence behind:
            # move it past them, or the service's next provider or consumer
            # would take an id that is already used.
            for table in (tables.resource_providers, tables.consumers):
                conn.execute(
                    sa.text(
                        f"SELECT setval(pg_get_serial_sequence('{table.name}', 'id'), "
                        f"(SELECT max(id) FROM {table.name}))"
                    )
                )


def _provider(pid, root, parent, name, generation):
    return {
        "id": pid,
        "uuid": str(uuid.UUID(int=(1 << 64) + pid)),
        "name": name,
        "generation": generation,
        "root_provider_id": root,
        "parent_provider_id": parent,
    }


def _inventory(pid, rc, total, ratio):
    # What the API stores for an inventory that gives only total (and
    # allocation_ratio): no reserve, units of 1 up to the largest amount.
    return {
        "resource_provider_id": pid,
        "resource_class_id": rc,
        "total": total,
        "reserved": 0,
        "min_unit": 1,
        "max_unit": tables.MAX_INT,
        "step_size": 1,
        "allocation_ratio": ratio,
    }


def _allocation(pid, consumer, rc, used):
    return {
        "resource_provider_id": pid,
        "consumer_id": consumer,
        "resource_class_id": rc,
        "used": used,
    }


def fresh_engine(url: str | None, workdir: str, label: str):
    if url is None:
        return create_engine(f"sqlite:///{os.path.join(workdir, label)}.sqlite")
    engine = create_engine(url)
    with engine.begin() as conn:
        tables.metadata.drop_all(conn)
        # world_generation, revision 0002's, is not in the metadata: left
        # behind, the next size's migration from scratch would fail on it.
        for table in ("world_generation", "alembic_version"):
            conn.exec_driver_sql(f"DROP TABLE IF EXISTS {table}")
    return engine


def request(application, query: str) -> tuple[float, int]:
    """One GET /allocation_candidates through the whole application: seconds
    and the answer's size in bytes."""
    environ: dict = {}
    wsgiref.util.setup_testing_defaults(environ)
    environ.update(
        PATH_INFO="/allocation_candidates",
        QUERY_STRING=query,
        HTTP_X_AUTH_TOKEN="admin",
        HTTP_OPENSTACK_API_VERSION=f"placement {VERSION}",
    )
    answered = []
    started = time.perf_counter()
    body = b"".join(application(environ, lambda status, headers, exc=None: answered.append(status)))
    elapsed = time.perf_counter() - started
    assert answered[0].startswith("200"), (answered, body[:300])
    return elapsed, len(body)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--hosts", default="1000,4000,10000", help="comma-separated sizes")
    parser.add_argument("--repeat", type=int, default=10)
    parser.add_argument("--url", help="an empty database to use (default: SQLite files)")
    parser.add_argument("--profile", action="store_true", help="profile the largest size's queries")
    args = parser.parse_args(argv)
    sizes = [int(n) for n in args.hosts.split(",")]
    cfg = conf.make_conf(config_files=[], quickstart_if_unconfigured=False)
    cfg.set_override("auth_strategy", "noauth2", group="api")
    cfg.set_override("enabled", False, group="metrics")
    print(f"# python {sys.version.split()[0]}, {os.cpu_count()} cores, {args.url or 'SQLite'}")
    with tempfile.TemporaryDirectory(prefix="bench-scale-") as workdir:
        for shape in ("flat", "nested"):
            for hosts in sizes:
                trees = hosts if shape == "flat" else hosts // 4
                engine = fresh_engine(args.url, workdir, f"{shape}-{hosts}")
                migration.sync(engine)
                started = time.perf_counter()
                load(engine, trees, shape)
                loaded = time.perf_counter() - started
                providers = trees * (1 if shape == "flat" else 5)
                print(f"# {shape}: {trees} trees, {providers} providers, loaded in {loaded:.1f} s")
                application = app.create_app(cfg, Database(engine))
                runtime.tune()  # as every serving process does (gunicorn's workers)
                for query_shape, label, query in QUERIES:
                    if query_shape != shape:
                        continue
                    request(application, query)  # warm: caches, first connection
                    times, size = [], 0
                    for _ in range(args.repeat):
                        elapsed, size = request(application, query)
                        times.append(elapsed)
                    times.sort()
                    p95 = times[min(len(times) - 1, int(len(times) * 0.95))]
                    print(
                        f"{shape:6} {providers:6} providers  {label:34} "
                        f"median {statistics.median(times) * 1000:8.1f} ms  "
                        f"p95 {p95 * 1000:8.1f} ms  {size:>10,} bytes"
                    )
                    if args.profile and hosts == sizes[-1]:
                        profile(application, query)
                engine.dispose()
    return 0


def profile(application, query: str) -> None:
    """Where one request's time goes, by module: own time summed per file."""
    profiler = cProfile.Profile()
    profiler.enable()
    for _ in range(3):
        request(application, query)
    profiler.disable()
    by_module: collections.Counter = collections.Counter()
    total = 0.0
    for (filename, _line, _name), (_cc, _nc, own, _cum, _callers) in pstats.Stats(
        profiler
    ).stats.items():
        parts = filename.replace("\\", "/").split("/")
        if "placement_svc" in parts:
            where = "/".join(parts[parts.index("placement_svc") :])
        elif "site-packages" in parts:
            where = parts[parts.index("site-packages") + 1]
        else:
            where = parts[-1]
        by_module[where] += own / 3
        total += own / 3
    print(f"    profile: {total * 1000:.1f} ms per request under cProfile, by module (own time):")
    for where, seconds in by_module.most_common(10):
        print(f"    {seconds * 1000:8.1f} ms  {seconds / total:5.1%}  {where}")


if __name__ == "__main__":
    sys.exit(main())
