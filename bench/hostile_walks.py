"""Hostile walks: GET /allocation_candidates queries built to make the search blow up.

Each query is asked through the WSGI application in a process of its own
(in-process as bench/scale.py: routing, auth, policy, the search, the walk,
rendering; no network), on a SQLite file loaded with bulk INSERTs, at the
service's DEFAULT configuration: [placement]
allocation_candidates_search_budget and max_request_groups are whatever
placement_svc's options default to (printed first); only auth_strategy is
set (noauth2, token ``admin``). The cases:

1. pigeonhole: a root and 9 children of VCPU 10..18 (all distinct);
   N groups of VCPU:10, each in_tree=ROOT, group_policy=none, limit=1.
   Every child holds one group at most, so N=10 is an empty 200.
2. same_subtree: the same tree; N groups resources_G<i>=VCPU:1 with
   same_subtree=_G1,..,_GN, group_policy=none, with and without limit=1.
3. 30 groups of VCPU:1, group_policy=none, on 5 trees of a root and 9
   children of 16 VCPU; without limit and with limit=1.
4. 250 groups of VCPU:1, group_policy=none, limit=1, on 2,113 providers
   (211 trees of a root and 9 children of 16 VCPU, and 3 lone providers of
   16 VCPU); if max_request_groups refuses 250, again with as many groups as
   it allows.
5. case 1's N=10 against /allocation_candidates/explain and /capacity
   (placement-svc's own, microversion 1.44).

For each: the HTTP status, the number of candidates (len of
allocation_requests; for explain/capacity a short summary of the body) or
the error's detail (first 100 characters, after webob's generic first
sentence "The server could not comply ... incorrect."), the best wall seconds of
--repeat runs, and the peak RSS growth: ru_maxrss (getrusage, the process's
high-water mark) after the runs less ru_maxrss after the app was made and a
cheap warm-up query (VCPU:1, limit=1) loaded the world cache. Each case
runs in a child process with a --timeout per run (SIGALRM); a case whose
first run takes over a third of the timeout is not repeated (its "runs"
column says how many were made).

    python bench/hostile_walks.py [--repeat 3] [--timeout 60] [--only 1a,2c,...]
        [--profile CASE]

--profile CASE runs that one case once under cProfile in this process and
prints the top 25 functions by cumulative time, then the top 15 by own
time. Linux/Unix only (SIGALRM, getrusage).
"""

from __future__ import annotations

import argparse
import cProfile
import json
import os
import pstats
import resource
import signal
import subprocess
import sys
import tempfile
import time
import wsgiref.util

import sqlalchemy as sa

from placement_svc import app, conf
from placement_svc.cmd import runtime
from placement_svc.db import migration, tables
from placement_svc.db.engine import Database, create_engine

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import scale  # noqa: E402  (bench/scale.py: _provider, _inventory)

VERSION = "1.39"
EXPLAIN_VERSION = "1.44"  # mv.CANDIDATES_EXPLAIN


def uuid_of(pid: int) -> str:
    """The uuid scale._provider gives provider ``pid``."""
    return scale._provider(pid, pid, None, "")["uuid"]


# --- worlds ---------------------------------------------------------------


def load(url: str, trees: list[list[int]], lone: list[int]) -> None:
    """Per tree a root without inventory and one child per VCPU total in the
    list; then one lone provider per VCPU total in ``lone``. Provider ids
    count from 1, so the first tree's root is provider 1."""
    engine = create_engine(url)
    migration.sync(engine)
    with engine.begin() as conn:
        vcpu = conn.execute(
            sa.select(tables.resource_classes.c.id).where(tables.resource_classes.c.name == "VCPU")
        ).scalar_one()
        providers, inventories = [], []
        pid = 0
        for t, children in enumerate(trees):
            pid += 1
            root = pid
            providers.append(scale._provider(root, root, None, f"hostile-{t}"))
            for c, total in enumerate(children):
                pid += 1
                providers.append(scale._provider(pid, root, root, f"hostile-{t}-{c}"))
                inventories.append(scale._inventory(pid, vcpu, total, 1.0))
        for n, total in enumerate(lone):
            pid += 1
            providers.append(scale._provider(pid, pid, None, f"hostile-lone-{n}"))
            inventories.append(scale._inventory(pid, vcpu, total, 1.0))
        for table, rows in (
            (tables.resource_providers, providers),
            (tables.inventories, inventories),
        ):
            for start in range(0, len(rows), 5000):
                conn.execute(table.insert(), rows[start : start + 5000])
    engine.dispose()


WORLDS = {
    # name: (trees, lone providers, what)
    "pigeon": ([[10 + i for i in range(9)]], [], "1 root + 9 children, VCPU 10..18"),
    "five": ([[16] * 9 for _ in range(5)], [], "5 x (root + 9 children of 16 VCPU)"),
    "big": ([[16] * 9 for _ in range(211)], [16] * 3, "211 x (root + 9 x 16 VCPU) + 3 lone"),
}


def providers_in(world: str) -> int:
    trees, lone, _what = WORLDS[world]
    return sum(1 + len(t) for t in trees) + len(lone)


# --- queries --------------------------------------------------------------

ROOT = uuid_of(1)


def pigeonhole(n: int) -> str:
    groups = "&".join(f"resources{i}=VCPU:10&in_tree{i}={ROOT}" for i in range(1, n + 1))
    return f"{groups}&group_policy=none&limit=1"


def same_subtree(n: int, limit: bool) -> str:
    groups = "&".join(f"resources_G{i}=VCPU:1" for i in range(1, n + 1))
    together = ",".join(f"_G{i}" for i in range(1, n + 1))
    return f"{groups}&same_subtree={together}&group_policy=none" + ("&limit=1" if limit else "")


def ones(n: int, limit: bool) -> str:
    groups = "&".join(f"resources{i}=VCPU:1" for i in range(1, n + 1))
    return f"{groups}&group_policy=none" + ("&limit=1" if limit else "")


def defaults():
    """The [placement] options at their defaults (no file), noauth2 set."""
    cfg = conf.make_conf(config_files=[], quickstart_if_unconfigured=False)
    cfg.set_override("auth_strategy", "noauth2", group="api")
    return cfg


MAX_GROUPS = defaults().placement.max_request_groups
AC = "/allocation_candidates"

# id: (world, path, query, version, label)
CASES = {
    "1a": ("pigeon", AC, pigeonhole(9), VERSION, "pigeonhole N=9, limit=1"),
    "1b": ("pigeon", AC, pigeonhole(10), VERSION, "pigeonhole N=10, limit=1"),
    "2a": ("pigeon", AC, same_subtree(9, False), VERSION, "same_subtree N=9"),
    "2b": ("pigeon", AC, same_subtree(9, True), VERSION, "same_subtree N=9, limit=1"),
    "2c": ("pigeon", AC, same_subtree(10, False), VERSION, "same_subtree N=10"),
    "2d": ("pigeon", AC, same_subtree(10, True), VERSION, "same_subtree N=10, limit=1"),
    "2e": ("pigeon", AC, same_subtree(11, False), VERSION, "same_subtree N=11"),
    "2f": ("pigeon", AC, same_subtree(11, True), VERSION, "same_subtree N=11, limit=1"),
    "3a": ("five", AC, ones(30, False), VERSION, "30 x VCPU:1, 5 trees"),
    "3b": ("five", AC, ones(30, True), VERSION, "30 x VCPU:1, 5 trees, limit=1"),
    "4a": ("big", AC, ones(250, True), VERSION, "250 x VCPU:1, limit=1"),
    "4b": ("big", AC, ones(MAX_GROUPS, True), VERSION, f"{MAX_GROUPS} x VCPU:1, limit=1"),
    "5a": ("pigeon", AC + "/explain", pigeonhole(10), EXPLAIN_VERSION, "explain, pigeonhole N=10"),
    "5b": (
        "pigeon",
        AC + "/capacity",
        pigeonhole(10),
        EXPLAIN_VERSION,
        "capacity, pigeonhole N=10",
    ),
}


# --- one case (the child process) -----------------------------------------


def ask(application, path: str, query: str, version: str) -> tuple[int, bytes]:
    environ: dict = {}
    wsgiref.util.setup_testing_defaults(environ)
    environ.update(
        PATH_INFO=path,
        QUERY_STRING=query,
        HTTP_X_AUTH_TOKEN="admin",
        HTTP_OPENSTACK_API_VERSION=f"placement {version}",
        HTTP_ACCEPT="application/json",
    )
    answered = []
    body = b"".join(application(environ, lambda status, headers, exc=None: answered.append(status)))
    return int(answered[0].split()[0]), body


def outcome(path: str, status: int, body: bytes) -> str:
    """Candidates, a summary of an explain/capacity body, or the error."""
    try:
        data = json.loads(body)
    except ValueError:
        return body[:100].decode(errors="replace")
    if status != 200:
        errors = data.get("errors") or [{}]
        detail = str(errors[0].get("detail", data))
        # webob's generic first sentence, the same for every 400, then the reason
        _generic, _gap, reason = detail.partition("\n\n")
        return " ".join((reason or detail).split())[:100]
    if path.endswith("/capacity"):
        return f"total={data.get('total')} trees_with_room={data.get('trees_with_room')}"
    if path.endswith("/explain"):
        rules = ", ".join(
            f"{r['rule']} {r['before']}->{r['after']}" for r in data.get("merge_rules", [])
        )
        return f"candidates={data.get('candidates')}; merge rules: {rules or 'none'}"[:100]
    return f"{len(data['allocation_requests'])} candidates"


class Timeout(BaseException):
    pass


def _alarm(_signum, _frame):
    raise Timeout


def application_for(database: str):
    engine = create_engine(f"sqlite:///{database}")
    application = app.create_app(defaults(), Database(engine))
    runtime.tune()  # as every serving process does
    status, body = ask(application, AC, "resources=VCPU:1&limit=1", VERSION)  # warm the world
    assert status == 200, body[:300]
    return application


def child(case: str, database: str, repeat: int, timeout: int) -> None:
    """Runs one case, printing a JSON line per run (the parent reads them)."""
    _world, path, query, version, _label = CASES[case]
    application = application_for(database)
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    signal.signal(signal.SIGALRM, _alarm)
    for _run in range(repeat):
        signal.alarm(timeout)
        started = time.perf_counter()
        try:
            status, body = ask(application, path, query, version)
        except Timeout:
            print(json.dumps({"timeout": True}), flush=True)
            return
        finally:
            signal.alarm(0)
        seconds = time.perf_counter() - started
        grown = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before
        print(
            json.dumps(
                {
                    "status": status,
                    "outcome": outcome(path, status, body),
                    "seconds": seconds,
                    "rss_kb": grown,
                }
            ),
            flush=True,
        )
        del body
        if seconds > timeout / 3:
            return


# --- the parent -----------------------------------------------------------


def run_case(case: str, database: str, repeat: int, timeout: int) -> dict:
    command = [sys.executable, os.path.abspath(__file__), "--child", case, database]
    command += ["--repeat", str(repeat), "--timeout", str(timeout)]
    started = time.perf_counter()
    try:
        done = subprocess.run(
            command, capture_output=True, text=True, timeout=timeout * repeat + 30
        )
        out, err, code = done.stdout, done.stderr, done.returncode
    except subprocess.TimeoutExpired as exc:  # the child is killed by run()
        out = exc.stdout.decode() if isinstance(exc.stdout, bytes) else exc.stdout or ""
        err, code = "", None
    runs = [json.loads(line) for line in out.splitlines() if line.startswith("{")]
    wall = time.perf_counter() - started
    if any(r.get("timeout") for r in runs) or code is None:
        return {"status": "-", "outcome": f"stopped: over {timeout} s", "runs": 0, "wall": wall}
    if not runs:
        tail = (err.strip().splitlines() or ["?"])[-1]
        return {
            "status": "-",
            "outcome": f"child failed ({code}): {tail}"[:100],
            "runs": 0,
            "wall": wall,
        }
    return {
        "status": runs[-1]["status"],
        "outcome": runs[-1]["outcome"],
        "best": min(r["seconds"] for r in runs),
        "rss_kb": max(r["rss_kb"] for r in runs),
        "runs": len(runs),
        "wall": wall,
    }


def profile(case: str, database: str) -> None:
    _world, path, query, version, label = CASES[case]
    application = application_for(database)
    profiler = cProfile.Profile()
    profiler.enable()
    status, body = ask(application, path, query, version)
    profiler.disable()
    print(f"# profile of {case} ({label}): {status} {outcome(path, status, body)}")
    stats = pstats.Stats(profiler)
    stats.sort_stats("cumulative").print_stats(25)
    stats.sort_stats("tottime").print_stats(15)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--timeout", type=int, default=60, help="seconds per run")
    parser.add_argument("--only", help="comma-separated case ids (default: all)")
    parser.add_argument("--profile", metavar="CASE", help="profile one case in this process")
    parser.add_argument("--child", nargs=2, metavar=("CASE", "DB"), help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child:
        child(args.child[0], args.child[1], args.repeat, args.timeout)
        return 0
    cases = args.only.split(",") if args.only else list(CASES)
    if args.profile:
        cases = [args.profile]
    placement = defaults().placement
    print(
        f"# python {sys.version.split()[0]}, {os.cpu_count()} cores, SQLite; defaults: "
        f"allocation_candidates_search_budget={placement.allocation_candidates_search_budget}, "
        f"max_request_groups={placement.max_request_groups}"
    )
    print(
        "# seconds: best of the runs; RSS: peak growth, getrusage ru_maxrss after the runs "
        "less after app + warm-up"
    )
    with tempfile.TemporaryDirectory(prefix="bench-hostile-") as workdir:
        databases = {}
        for world in sorted({CASES[c][0] for c in cases}):
            trees, lone, what = WORLDS[world]
            databases[world] = os.path.join(workdir, f"{world}.sqlite")
            started = time.perf_counter()
            load(f"sqlite:///{databases[world]}", trees, lone)
            print(
                f"# world {world}: {providers_in(world)} providers ({what}), "
                f"loaded in {time.perf_counter() - started:.1f} s"
            )
        if args.profile:
            profile(args.profile, databases[CASES[args.profile][0]])
            return 0
        print(
            f"{'case':4}  {'query':32} {'status':>6}  {'candidates / detail':100}  "
            f"{'seconds':>8} {'runs':>4}  {'RSS +MB':>7}"
        )
        for case in cases:
            world, _path, _query, _version, label = CASES[case]
            got = run_case(case, databases[world], args.repeat, args.timeout)
            seconds = f"{got['best']:8.3f}" if "best" in got else f"{'>' + str(args.timeout):>8}"
            rss = f"{got['rss_kb'] / 1024:7.1f}" if "rss_kb" in got else f"{'-':>7}"
            print(
                f"{case:4}  {label:32} {got['status']:>6}  {got['outcome']:100}  "
                f"{seconds} {got['runs']:>4}  {rss}",
                flush=True,
            )
    return 0


if __name__ == "__main__":
    sys.exit(main())
