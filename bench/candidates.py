"""Benchmark GET /allocation_candidates against any Placement endpoint.

Loads a synthetic cloud over the HTTP API (so it works against upstream
Placement too), then times each query and prints its median and p95 latency
and the number of candidates. Standard library only, but for --load-into.

    python bench/candidates.py --url http://127.0.0.1:8778 [--scenario flat|nested|wide|all]
        [--hosts 1000] [--repeat 20] [--token admin] [--workers 8] [--no-load]
        [--compare URL] [--load-into DATABASE_URL] [--compare-load-into DATABASE_URL]

With --compare, the last line is the geometric mean of every query's
ratio of medians (the issue's measure of a whole run). Where the endpoint
compared against gives no answer (upstream's worker killed at gunicorn's
timeout on a wide query: a 500), that query's ratio is a bound, our median
over the time it took to fail, marked "<=", and so is the mean.

The target database should be empty of the bench's names (run it against a
fresh database): providers are named bench-<scenario>-<n>.

Over HTTP a flat cloud of 10,000 hosts takes many minutes (upstream wrote
1,000 hosts in about 84 s). --load-into and --compare-load-into name the
database behind --url and --compare: the flat cloud is then written
straight into it with bulk INSERTs (bench/scale.py's ``load``, the same
cloud row for row but the uuids; this needs placement-svc's packages, so
run with its virtualenv). Each endpoint must be serving that database
already: its start writes the standard classes and traits the load refers
to. placement-svc sees the load through the triggers its ``db sync`` puts
on the shape's tables (an upstream-made database is adopted by that sync
before placement-svc serves it); upstream has no cache of providers, and
looks up a trait its cache lacks (CUSTOM_BENCH_GOLD) in the database.
"""

from __future__ import annotations

import argparse
import http.client
import json
import math
import re
import statistics
import threading
import time
import urllib.parse
import uuid
from concurrent.futures import ThreadPoolExecutor

# Fixed names, so that --no-load queries find the aggregates an earlier run
# made (bench/flat_cloud.py: bench/scale.py writes the same).
from flat_cloud import AGGREGATES


class Client:
    """One keep-alive connection per thread."""

    def __init__(self, url: str, token: str, version: str = "1.39"):
        parsed = urllib.parse.urlsplit(url)
        self.url = url
        self.host, self.port = parsed.hostname, parsed.port or 80
        self.prefix = parsed.path.rstrip("/")
        self.headers = {
            "x-auth-token": token,
            "openstack-api-version": f"placement {version}",
            "accept": "application/json",
            "content-type": "application/json",
        }
        self.local = threading.local()
        self.database: str | None = None  # what the endpoint serves, for --load-into

    def _conn(self):
        if getattr(self.local, "conn", None) is None:
            self.local.conn = http.client.HTTPConnection(self.host, self.port, timeout=600)
        return self.local.conn

    def call(self, method: str, path: str, body=None):
        status, data = self.raw(method, path, body)
        return status, (json.loads(data) if data else None)

    def raw(self, method: str, path: str, body=None):
        """Status and body bytes, read in full (not parsed)."""
        payload = json.dumps(body) if body is not None else None
        for attempt in range(2):
            conn = self._conn()
            try:
                conn.request(method, self.prefix + path, payload, self.headers)
                response = conn.getresponse()
                return response.status, response.read()
            except (http.client.HTTPException, ConnectionError):
                self.local.conn = None
                if attempt:
                    raise
        raise AssertionError("unreachable")

    def resolve(self, query: str) -> str:
        """The path of a bench query: an allocation candidates query string,
        or a whole path whose "{uuid of NAME}" become this endpoint's uuids."""
        if not query.startswith("/"):
            return "/allocation_candidates?" + query
        for name in re.findall(r"\{uuid of ([^}]+)\}", query):
            found = self.ok("GET", f"/resource_providers?name={name}")["resource_providers"]
            query = query.replace(f"{{uuid of {name}}}", found[0]["uuid"])
        return query

    def ok(self, method, path, body=None, expect=(200, 201, 204)):
        status, data = self.call(method, path, body)
        if status not in expect:
            raise RuntimeError(f"{method} {path} -> {status}: {data}")
        return data


def make_provider(client, name, parent=None, inventory=None, traits=(), aggregates=()):
    rp_uuid = str(uuid.uuid4())
    body = {"name": name, "uuid": rp_uuid}
    if parent:
        body["parent_provider_uuid"] = parent
    client.ok("POST", "/resource_providers", body)
    generation = 0
    if inventory:
        inventories = {
            rc: dict(spec) if isinstance(spec, dict) else {"total": spec}
            for rc, spec in inventory.items()
        }
        data = client.ok(
            "PUT",
            f"/resource_providers/{rp_uuid}/inventories",
            {"resource_provider_generation": generation, "inventories": inventories},
        )
        generation = data["resource_provider_generation"]
    if traits:
        data = client.ok(
            "PUT",
            f"/resource_providers/{rp_uuid}/traits",
            {"resource_provider_generation": generation, "traits": list(traits)},
        )
        generation = data["resource_provider_generation"]
    if aggregates:
        client.ok(
            "PUT",
            f"/resource_providers/{rp_uuid}/aggregates",
            {"resource_provider_generation": generation, "aggregates": list(aggregates)},
        )
    return rp_uuid


def allocate(client, rp_uuid, resources) -> bool:
    """Best effort: the allocations API may be missing on a partial server."""
    consumer = str(uuid.uuid4())
    status, _ = client.call(
        "PUT",
        f"/allocations/{consumer}",
        {
            "allocations": {rp_uuid: {"resources": resources}},
            "project_id": "bench",
            "user_id": "bench",
            "consumer_generation": None,
            "consumer_type": "INSTANCE",
        },
    )
    return status == 204


def load_flat(client, hosts, workers):
    client.ok("PUT", "/traits/CUSTOM_BENCH_GOLD")

    def one(i):
        traits = ["HW_CPU_X86_AVX2"] if i % 2 else ["HW_CPU_X86_AVX2", "CUSTOM_BENCH_GOLD"]
        if i % 10 == 0:
            traits.append("COMPUTE_STATUS_DISABLED")
        rp = make_provider(
            client,
            f"bench-flat-{i}",
            inventory={
                "VCPU": {"total": 32, "allocation_ratio": 4.0},
                "MEMORY_MB": 131072,
                "DISK_GB": 2000,
            },
            traits=traits,
            aggregates=[AGGREGATES[i % len(AGGREGATES)]],
        )
        return allocate(client, rp, {"VCPU": 8, "MEMORY_MB": 16384}) if i % 3 == 0 else True

    with ThreadPoolExecutor(workers) as pool:
        allocated = list(pool.map(one, range(hosts)))
    return all(allocated)


def load_nested(client, hosts, workers):
    storage = make_provider(
        client,
        "bench-nested-storage",
        inventory={"DISK_GB": 100000},
        traits=["MISC_SHARES_VIA_AGGREGATE"],
        aggregates=[AGGREGATES[0]],
    )

    def one(i):
        root = make_provider(
            client, f"bench-nested-{i}", inventory={"MEMORY_MB": 65536}, aggregates=[AGGREGATES[0]]
        )
        for n in range(2):
            numa = make_provider(
                client,
                f"bench-nested-{i}-numa{n}",
                parent=root,
                inventory={"VCPU": 16, "MEMORY_MB": 32768},
            )
            for g in range(2):
                make_provider(
                    client,
                    f"bench-nested-{i}-numa{n}-gpu{g}",
                    parent=numa,
                    inventory={"VGPU": 4},
                    traits=["HW_GPU_API_VULKAN"] if g else [],
                )

    with ThreadPoolExecutor(workers) as pool:
        list(pool.map(one, range(hosts)))
    return storage


def load_wide(client, hosts, workers):
    def one(i):
        root = make_provider(client, f"bench-wide-{i}", inventory={"VCPU": 64, "MEMORY_MB": 262144})
        for d in range(8):
            make_provider(
                client, f"bench-wide-{i}-dev{d}", parent=root, inventory={"CUSTOM_BENCH_ACCEL": 1}
            )

    client.ok("PUT", "/resource_classes/CUSTOM_BENCH_ACCEL")
    with ThreadPoolExecutor(workers) as pool:
        list(pool.map(one, range(hosts)))


# GET /resource_providers in the forms operators and nova's periodic ask
# (a query starting with "/" is a whole path). "{uuid of NAME}" is the uuid
# the endpoint gave the provider named NAME: each endpoint has its own.
PROVIDER_LISTS = {
    "flat": [
        ("providers: all", "1.39", "/resource_providers"),
        ("providers: resources=", "1.39", "/resource_providers?resources=VCPU:2,MEMORY_MB:4096"),
        ("providers: required=", "1.39", "/resource_providers?required=CUSTOM_BENCH_GOLD"),
        (
            "providers: member_of=in:",
            "1.39",
            "/resource_providers?member_of=in:" + ",".join(AGGREGATES[:5]),
        ),
        ("providers: in_tree=", "1.39", "/resource_providers?in_tree={uuid of bench-flat-7}"),
    ],
    "nested": [
        ("providers: resources=VGPU:1 (nested)", "1.39", "/resource_providers?resources=VGPU:1"),
        (
            "providers: in_tree= (nested)",
            "1.39",
            "/resource_providers?in_tree={uuid of bench-nested-7}",
        ),
    ],
}


def queries(scenario, wide_hosts=20):
    aggs = ",".join(AGGREGATES[:5])
    if scenario == "flat":
        return [
            (
                "flat: VCPU,MEMORY_MB,DISK_GB, no limit",
                "1.29",
                "resources=VCPU:1,MEMORY_MB:1024,DISK_GB:10",
            ),
            (
                "flat: nova shape, limit=1000",
                "1.36",
                "resources=VCPU:2,MEMORY_MB:4096,DISK_GB:20&limit=1000&group_policy=none"
                f"&root_required=!COMPUTE_STATUS_DISABLED&member_of=in:{aggs}",
            ),
            (
                "flat: required traits, limit=1000",
                "1.39",
                "resources=VCPU:2,MEMORY_MB:4096&required=in:CUSTOM_BENCH_GOLD,HW_CPU_X86_AVX512F"
                "&limit=1000",
            ),
            (
                # No host has 500 VCPU: an empty answer, whose reason the
                # service works out (and logs) before it answers.
                "flat: more VCPU than any host has (empty)",
                "1.36",
                "resources=VCPU:500,MEMORY_MB:4096,DISK_GB:20&limit=1000",
            ),
            (
                "flat: one required trait, limit=1000",
                "1.39",
                "resources=VCPU:2,MEMORY_MB:4096&required=CUSTOM_BENCH_GOLD&limit=1000",
            ),
        ] + PROVIDER_LISTS["flat"]
    if scenario == "nested":
        return [
            (
                "nested: VCPU+VGPU granular, sharing disk, limit=1000",
                "1.36",
                "resources=MEMORY_MB:1024,DISK_GB:10&resources1=VCPU:2&resources2=VGPU:1"
                "&group_policy=none&limit=1000",
            ),
            (
                "nested: nova shape with VGPU group, limit=1000",
                "1.36",
                "resources=VCPU:1,MEMORY_MB:1024,DISK_GB:10&resources1=VGPU:1&limit=1000"
                "&group_policy=none&root_required=!COMPUTE_STATUS_DISABLED",
            ),
            (
                "nested: nova shape, VGPU group and member_of",
                "1.36",
                "resources=VCPU:1,MEMORY_MB:1024,DISK_GB:10&resources1=VGPU:1&limit=1000"
                f"&group_policy=none&root_required=!COMPUTE_STATUS_DISABLED&member_of=in:{aggs}",
            ),
        ] + PROVIDER_LISTS["nested"]
    eight = "&".join(f"resources{g}=CUSTOM_BENCH_ACCEL:1" for g in range(1, 9))
    wide = [
        (
            "wide: 9 groups of 1 device (one too many), isolate",
            "1.36",
            eight + "&resources9=CUSTOM_BENCH_ACCEL:1&group_policy=isolate",
        ),
    ]
    if wide_hosts == 1:  # every valid candidate: 8! of them
        wide.append(
            (
                "wide: 8 groups of 1 device, isolate, no limit",
                "1.36",
                eight + "&group_policy=isolate",
            )
        )
    return [
        (
            "wide: 8 groups of 1 device, isolate, limit=1000",
            "1.36",
            "&".join(f"resources{g}=CUSTOM_BENCH_ACCEL:1" for g in range(1, 9))
            + "&group_policy=isolate&limit=1000",
        ),
        (
            "wide: 4 groups of 1 device, isolate, limit=1000",
            "1.36",
            "&".join(f"resources{g}=CUSTOM_BENCH_ACCEL:1" for g in range(1, 5))
            + "&resources=VCPU:2&group_policy=isolate&limit=1000",
        ),
    ] + wide


def own_queries(scenario, wide_hosts=20):
    """placement-svc's own parameters (1.40+), each beside the same query
    without it, so the cost of the parameter reads off two adjacent lines.
    Upstream answers these with 400: ask them of placement-svc only."""
    aggs = ",".join(AGGREGATES[:5])
    nova = (
        "resources=VCPU:2,MEMORY_MB:4096,DISK_GB:20&limit=1000&group_policy=none"
        "&root_required=!COMPUTE_STATUS_DISABLED"
    )
    if scenario == "flat":
        nova50 = nova.replace("limit=1000", "limit=50") + f"&member_of=in:{aggs}"
        return [
            ("flat: nova shape, limit=1000, no aggregate filter", "1.36", nova),
            (
                "flat: nova shape + root_member_of=in:, limit=1000",
                "1.40",
                nova + f"&root_member_of=in:{aggs}",
            ),
            # Ranked (1.48): the best 50 of the whole cloud, against the first 50.
            ("flat: nova shape, limit=50", "1.36", nova50),
            ("flat: nova shape + sort=spread:VCPU, limit=50", "1.48", nova50 + "&sort=spread:VCPU"),
            ("flat: nova shape + sort=pack:VCPU, limit=50", "1.48", nova50 + "&sort=pack:VCPU"),
            (
                "flat: nova shape + prefer=CUSTOM_BENCH_GOLD:10, spread, limit=50",
                "1.48",
                nova50 + "&prefer=CUSTOM_BENCH_GOLD:10&sort=spread:VCPU",
            ),
            ("flat: nova shape, no limit", "1.36", nova50.replace("&limit=50", "")),
            (
                "flat: nova shape + sort=spread:VCPU, no limit",
                "1.48",
                nova50.replace("&limit=50", "") + "&sort=spread:VCPU",
            ),
        ]
    if scenario != "wide":
        return []
    found = []
    for groups in (4, 8):
        each = "&".join(f"resources{g}=CUSTOM_BENCH_ACCEL:1" for g in range(1, groups + 1))
        half = ",".join(str(g) for g in range(1, groups // 2 + 1))
        limits = ["&limit=1000"] + ([""] if groups == 4 or wide_hosts == 1 else [])
        for limit in limits:
            said = "limit=1000" if limit else "no limit"
            found += [
                (
                    f"wide: {groups} groups, none, {said}",
                    "1.36",
                    each + "&group_policy=none" + limit,
                ),
                (
                    f"wide: {groups} groups, isolate={half}, {said}",
                    "1.42",
                    each + f"&isolate={half}" + limit,
                ),
                (
                    f"wide: {groups} groups, same_subtree=1,!2, {said}",
                    "1.43",
                    each + "&same_subtree=1,!2" + limit,
                ),
                (
                    f"wide: {groups} groups, isolate, per_root=1, {said}",
                    "1.48",
                    each + "&group_policy=isolate&per_root=1" + limit,
                ),
            ]
    return found


def measure(clients, label, version, query, repeat, streak=1):
    """Time the query ``repeat`` times on each endpoint, taking turns (and
    swapping who goes first each round) so that both see the same machine:
    ``streak`` requests in a row each turn (1: every other request).

    The endpoint compared against (the second) may give no answer: upstream
    answers some wide queries with a 500 when its worker is killed at
    gunicorn's timeout. It is then asked that query no more, the line says
    how long it took to fail, and the ratio is a bound (our median over that
    time: upstream would have taken at least as long), marked ``<=``.
    The first endpoint, the one measured, must answer every time."""
    timings: list[list[float]] = [[] for _ in clients]
    counts: list[int | None] = [None for _ in clients]
    failed: dict[int, str] = {}
    for client in clients:
        client.headers["openstack-api-version"] = f"placement {version}"
    for round_ in range(-(-repeat // streak)):
        order = list(range(len(clients)))
        if round_ % 2:
            order.reverse()
        for index in [i for i in order for _ in range(min(streak, repeat - round_ * streak))]:
            if index in failed:
                continue
            # Timed: the request until the last byte of the answer is read;
            # the client's own JSON parsing is not the server's latency.
            path = clients[index].resolve(query)
            start = time.perf_counter()
            try:
                status, raw = clients[index].raw("GET", path)
            except (http.client.HTTPException, ConnectionError, TimeoutError) as exc:
                if not index:
                    raise
                status, raw = None, repr(exc).encode()
            elapsed = time.perf_counter() - start
            if status != 200:
                if not index or (status is not None and status < 500):
                    raise RuntimeError(f"{label}: {status} {raw[:500]!r}")
                timings[index] = [elapsed]
                failed[index] = f"no answer ({status or 'connection lost'}) after {elapsed:.1f} s"
                continue
            timings[index].append(elapsed)
            body = json.loads(raw)
            counts[index] = len(body.get("allocation_requests", body.get("resource_providers", [])))
    for client in clients:
        client.headers["openstack-api-version"] = "placement 1.39"
    columns = []
    for index, (series, count) in enumerate(zip(timings, counts)):
        if index in failed:
            columns.append(f"{failed[index]:48s}")
            continue
        series.sort()
        p95 = series[min(len(series) - 1, int(round(0.95 * (len(series) - 1))))]
        columns.append(
            f"median {statistics.median(series) * 1000:7.1f} ms  p95 {p95 * 1000:7.1f} ms"
            f"  candidates {count}"
        )
    line = f"{label:52s} " + "  |  ".join(columns)
    if len(clients) == 2:
        ratio = statistics.median(timings[0]) / statistics.median(timings[1])
        line += f"  |  ratio {'<=' if failed else ''}{ratio:.2f}"
        RATIOS.append(ratio)
        if failed:
            BOUNDS.append(label)
    print(line, flush=True)


# Every ratio of medians measure() printed, for the run's geometric mean.
RATIOS: list[float] = []
# The labels of those that are bounds (the endpoint compared against gave
# no answer): with any, the geometric mean is a bound too.
BOUNDS: list[str] = []


def geometric_mean(ratios: list[float]) -> float:
    return math.exp(sum(math.log(r) for r in ratios) / len(ratios))


EXPLAINED = "/allocation_candidates"
EXPLAINERS = ("/allocation_candidates/explain", "/allocation_candidates/capacity")


def measure_explain(client, label, query, repeat):
    """Time one query's GET /allocation_candidates, /explain and /capacity
    (placement-svc's own, 1.44), taking turns, and print each median and its
    ratio to the candidates query's. placement-svc only."""
    client.headers["openstack-api-version"] = "placement 1.44"
    paths = (EXPLAINED, *EXPLAINERS)
    timings: dict[str, list[float]] = {path: [] for path in paths}
    shown: dict[str, str] = {}
    for round_ in range(repeat):
        for path in paths if round_ % 2 else reversed(paths):
            start = time.perf_counter()
            status, raw = client.raw("GET", f"{path}?{query}")
            timings[path].append(time.perf_counter() - start)
            if status != 200:
                raise RuntimeError(f"{label} {path}: {status} {raw[:500]!r}")
            body = json.loads(raw)
            if path == EXPLAINED:
                shown[path] = f"candidates {len(body['allocation_requests'])}"
            elif "near_misses" in body:
                shown[path] = f"candidates {body['candidates']}"
            else:
                shown[path] = f"copies {body['total']}"
    client.headers["openstack-api-version"] = "placement 1.39"
    base = statistics.median(timings[EXPLAINED])
    columns = []
    for path in paths:
        median = statistics.median(timings[path])
        name = path.rsplit("/", 1)[-1]
        columns.append(f"{name} {median * 1000:6.1f} ms ({median / base:.2f}x, {shown[path]})")
    print(f"{label:52s} " + "  |  ".join(columns), flush=True)


def load_flat_into(client, database, hosts, analyze=True) -> None:
    """The flat cloud, written straight into ``database``, the database
    ``client``'s endpoint serves (bench/scale.py's ``load``); then checked
    over HTTP: the endpoint must see the last host.

    On PostgreSQL the tables are analyzed after the load (unless not
    ``analyze``), as autovacuum would do within a minute or so of that many
    rows changing: without statistics, the planner takes tables of 10,000
    rows for small ones, and a plan fit for a small table can take seconds
    (where autovacuum is off, as on the machine this was written on, nothing
    would ever analyze them)."""
    import os
    import sys

    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    import scale  # bench/scale.py: placement-svc's tables and SQLAlchemy

    client.ok("GET", "/")  # serving: the standard classes and traits are written
    engine = scale.create_engine(database)
    try:
        scale.load(engine, hosts, "flat")
        if analyze and engine.dialect.name == "postgresql":
            with engine.begin() as conn:
                conn.exec_driver_sql("ANALYZE")
    finally:
        engine.dispose()
    last = f"bench-flat-{hosts - 1}"
    found = client.ok("GET", f"/resource_providers?name={last}")["resource_providers"]
    if len(found) != 1:
        raise RuntimeError(f"{client.url} does not see {last} after loading {database}")


def load(client, scenario, args) -> str:
    """Load one scenario's cloud; returns what was loaded, for the log."""
    if scenario == "flat" and client.database:
        load_flat_into(client, client.database, args.hosts, not args.no_analyze)
        return f"{args.hosts} hosts (straight into {client.database})"
    if scenario == "flat":
        allocated = load_flat(client, args.hosts, args.workers)
        note = "" if allocated else " (allocations API unavailable: none allocated)"
        return f"{args.hosts} hosts{note}"
    if scenario == "nested":
        load_nested(client, args.nested_hosts, args.workers)
        return f"{args.nested_hosts} hosts x 2 NUMA x 2 VGPU + sharing storage"
    load_wide(client, args.wide_hosts, args.workers)
    return f"{args.wide_hosts} hosts x 8 devices"


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--url", default="http://127.0.0.1:8778")
    parser.add_argument("--token", default="admin")
    parser.add_argument("--scenario", choices=["flat", "nested", "wide", "all"], default="all")
    parser.add_argument("--hosts", type=int, default=1000, help="hosts in the flat cloud")
    parser.add_argument("--nested-hosts", type=int, default=100)
    parser.add_argument("--wide-hosts", type=int, default=20)
    parser.add_argument("--repeat", type=int, default=10)
    parser.add_argument("--workers", type=int, default=8)
    parser.add_argument(
        "--compare",
        metavar="URL",
        help="a second endpoint (upstream Placement, say): it gets the same cloud and the "
        "same queries, taking turns with --url, and the ratio of medians is printed",
    )
    parser.add_argument(
        "--streak",
        type=int,
        default=1,
        help="with --compare, how many requests each endpoint answers in a row before the "
        "other takes its turn (default 1: every other request, so that each request comes "
        "after the other endpoint's; more shows each as it answers a steady stream)",
    )
    parser.add_argument(
        "--load-into",
        metavar="DATABASE_URL",
        help="the database --url serves (an SQLAlchemy URL): write the flat cloud straight "
        "into it with bulk INSERTs instead of over HTTP (the same cloud; other scenarios still "
        "go over HTTP); the endpoint must already be serving it",
    )
    parser.add_argument(
        "--compare-load-into",
        metavar="DATABASE_URL",
        help="the same for the database --compare serves (upstream's, say)",
    )
    parser.add_argument(
        "--no-analyze",
        action="store_true",
        help="after --load-into or --compare-load-into on PostgreSQL, leave the tables "
        "without statistics (by default they are analyzed, as autovacuum would)",
    )
    parser.add_argument(
        "--own",
        action="store_true",
        help="also ask the queries of placement-svc's own parameters (1.40 and later), "
        "each beside the same query without it; not for upstream",
    )
    parser.add_argument(
        "--explain",
        action="store_true",
        help="instead of comparing endpoints, time each query's /explain and /capacity "
        "(placement-svc's own, 1.44) beside the query itself; not for upstream",
    )
    parser.add_argument(
        "--no-load",
        action="store_true",
        help="only run the queries: the cloud is already loaded by an earlier run",
    )
    args = parser.parse_args(argv)
    if args.compare_load_into and not args.compare:
        parser.error("--compare-load-into needs --compare")
    if args.streak < 1:
        parser.error("--streak must be 1 or more")
    clients = [Client(args.url, args.token)]
    clients[0].database = args.load_into
    if args.compare:
        clients.append(Client(args.compare, args.token))
        clients[1].database = args.compare_load_into
    scenarios = ["flat", "nested", "wide"] if args.scenario == "all" else [args.scenario]
    for scenario in scenarios:
        for client in clients:
            if args.no_load:
                continue
            start = time.perf_counter()
            size = load(client, scenario, args)
            print(
                f"# {scenario}: loaded {size} into {client.url} in "
                f"{time.perf_counter() - start:.1f} s",
                flush=True,
            )
        if len(clients) == 2:
            print(f"# {scenario}: {args.url}  |  {args.compare}  |  ratio of medians", flush=True)
        asked = queries(scenario, args.wide_hosts)
        if args.own:
            asked += own_queries(scenario, args.wide_hosts)
        for label, version, query in asked:
            if args.explain:
                measure_explain(clients[0], label, query, args.repeat)
            else:
                measure(clients, label, version, query, args.repeat, args.streak)
    if RATIOS:
        bound = (
            f" (at most: {len(BOUNDS)} of the ratios are bounds, where {args.compare} "
            "gave no answer)"
            if BOUNDS
            else ""
        )
        print(
            f"# geometric mean of the {len(RATIOS)} ratios of medians: "
            f"{geometric_mean(RATIOS):.2f}{bound}",
            flush=True,
        )


if __name__ == "__main__":
    main()
