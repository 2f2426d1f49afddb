"""Benchmark claims: PUT /allocations/{consumer_uuid}, what nova's scheduler
does for each server it boots, from many clients at once.

Loads a flat cloud over the HTTP API (so it runs against upstream Placement
too), then for each client count runs that many threads for --seconds, each
with its own connection, each claiming as nova does at microversion 1.36: a
new consumer's allocation of one small flavor on a random host of the cloud
(with --candidates, on a random candidate of GET /allocation_candidates, as
nova picks one). A 409 placement.concurrent_update is retried as nova's
report client retries it (unless it names a consumer generation conflict;
four tries in all, sleeping a random 0..2*(try-1) s before each). It prints
claims/s, the latency of a claim (retries and sleeps included) and the count
of every status; then it checks, over GET /resource_providers/{uuid}/usages,
that every host's usage is what its successful claims add up to and within
its capacity. Standard library only.

    python bench/claims.py --url http://127.0.0.1:8778 [--compare URL]
        [--clients 4,16] [--seconds 20] [--rounds 3] [--hosts 200] [--room 2000]
        [--candidates] [--token admin]

With --compare the same cloud is loaded into a second endpoint, and at each
client count the two take --rounds turns each (--seconds split among them,
who goes first alternating, so that a machine busy with something else for
a while slows both alike); the ratio of claims/s (--url over --compare) is
printed. It prints figures and asserts nothing about timing; it exits with
status 1 if an endpoint answered a 5xx or failed the usage check. Run it
against fresh databases: the hosts are named bench-claims-<run>-<n>, and
with --candidates a candidate on a provider of an earlier run is skipped
(and counted), not claimed.
"""

from __future__ import annotations

import argparse
import http.client
import json
import random
import statistics
import sys
import threading
import time
import uuid
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from candidates import Client, make_provider  # noqa: E402  (bench/candidates.py)

VERSION = "1.36"
# One claim: nova's m1.tiny.
FLAVOR = {"VCPU": 1, "MEMORY_MB": 512, "DISK_GB": 1}
CANDIDATES_QUERY = "resources=" + ",".join(f"{rc}:{n}" for rc, n in FLAVOR.items()) + "&limit=1000"
TRIES = 4  # nova.scheduler.client.report.retries: range(0, 4)


def inventory(room: int) -> dict:
    """A host that takes ``room`` claims of FLAVOR, with nova's kind of
    allocation ratios (VCPU overcommitted 4 to 1)."""
    return {
        "VCPU": {"total": -(-room * FLAVOR["VCPU"] // 4), "allocation_ratio": 4.0},
        "MEMORY_MB": {"total": room * FLAVOR["MEMORY_MB"], "allocation_ratio": 1.0},
        "DISK_GB": {"total": room * FLAVOR["DISK_GB"], "allocation_ratio": 1.0},
    }


def load(client: Client, run: str, hosts: int, room: int, threads: int) -> list[str]:
    def one(i):
        return make_provider(client, f"bench-claims-{run}-{i}", inventory=inventory(room))

    with ThreadPoolExecutor(threads) as pool:
        return list(pool.map(one, range(hosts)))


class Endpoint:
    """One Placement endpoint: its cloud, and the book of what was claimed."""

    def __init__(self, url: str, token: str, hosts: list[str] | None = None):
        self.url, self.token = url, token
        self.client = Client(url, token, VERSION)
        self.hosts: list[str] = hosts or []
        self.known: set[str] = set(self.hosts)
        self.claimed: Counter[str] = Counter()  # host -> successful claims
        # Claims whose outcome is unknown (a 5xx, a broken connection): the
        # check looks them up, as they may have been written all the same.
        self.unknown: list[str] = []
        self.lock = threading.Lock()
        self.failed = False


class Phase:
    """What the threads of one client count saw."""

    def __init__(self):
        self.latencies: list[float] = []
        self.statuses: Counter[str] = Counter()
        self.retries = 0
        self.successes = 0
        self.server_errors: list[str] = []
        self.elapsed = 0.0
        self.lock = threading.Lock()


def claim_once(endpoint: Endpoint, phase: Phase, rng: random.Random, ask_candidates: bool):
    """One claim as nova makes it; returns whether it was written."""
    client = endpoint.client
    if ask_candidates:
        status, raw = client.raw("GET", "/allocation_candidates?" + CANDIDATES_QUERY)
        note(phase, "GET", status, raw)
        if status != 200:
            return False
        requests = [
            request["allocations"]
            for request in json.loads(raw)["allocation_requests"]
            if set(request["allocations"]) <= endpoint.known
        ]
        if not requests:
            with phase.lock:
                phase.statuses["GET 200 with no candidate (of this run)"] += 1
            return False
        allocations = rng.choice(requests)
    else:
        allocations = {rng.choice(endpoint.hosts): {"resources": dict(FLAVOR)}}
    consumer = str(uuid.uuid4())
    body = {
        "allocations": allocations,
        "project_id": "bench-project",
        "user_id": "bench-user",
        "consumer_generation": None,
    }
    for attempt in range(TRIES):
        if attempt:
            time.sleep(rng.uniform(0, attempt * 2))  # nova's backoff
            with phase.lock:
                phase.retries += 1
        try:
            status, raw = client.raw("PUT", f"/allocations/{consumer}", body)
        except (OSError, http.client.HTTPException) as exc:  # counted, not raised
            with phase.lock:
                phase.statuses[f"PUT error {type(exc).__name__}"] += 1
            with endpoint.lock:
                endpoint.unknown.append(consumer)
            client.local.conn = None
            return False
        code, detail = note(phase, "PUT", status, raw)
        if status == 204:
            with endpoint.lock:
                for host in allocations:
                    endpoint.claimed[host] += 1
            return True
        if status >= 500:
            with endpoint.lock:
                endpoint.unknown.append(consumer)
            return False
        # nova's claim_resources retries a concurrent update unless the
        # detail names a consumer generation conflict.
        if not (status == 409 and code == "placement.concurrent_update"):
            return False
        if "consumer generation conflict" in detail:
            return False
    return False


def note(phase: Phase, method: str, status: int, raw: bytes) -> tuple[str | None, str]:
    """Count the status (an error by its code) and keep every 5xx's body;
    returns the error's code and detail."""
    code, detail = None, ""
    if status >= 400:
        try:
            error = json.loads(raw)["errors"][0]
            code, detail = error.get("code"), error.get("detail") or ""
        except (ValueError, KeyError, IndexError, TypeError):
            pass
    key = f"{method} {status}" + (f" {code}" if code else "")
    with phase.lock:
        phase.statuses[key] += 1
        if status >= 500:
            phase.server_errors.append(f"{method} {status}: {raw[:2000]!r}")
    return code, detail


def run_phase(
    endpoint: Endpoint, clients: int, seconds: float, ask_candidates: bool, phase: Phase
) -> None:
    """``clients`` threads claiming for ``seconds``; what they saw is added to ``phase``."""
    start_line = threading.Barrier(clients + 1)

    def worker(seed: int):
        rng = random.Random(seed)
        start_line.wait()
        while time.perf_counter() < deadline:
            began = time.perf_counter()
            written = claim_once(endpoint, phase, rng, ask_candidates)
            took = time.perf_counter() - began
            with phase.lock:
                phase.latencies.append(took)
                phase.successes += written

    threads = [
        threading.Thread(target=worker, args=(random.getrandbits(64),)) for _ in range(clients)
    ]
    for thread in threads:
        thread.start()
    deadline = time.perf_counter() + seconds  # from when every thread is ready (read
    # by the workers only once they pass the start line)
    began = time.perf_counter()
    start_line.wait()
    for thread in threads:
        thread.join()
    phase.elapsed += time.perf_counter() - began  # until the last claim under way ended


def summary(phase: Phase) -> dict:
    latencies = sorted(phase.latencies)
    p95 = latencies[min(len(latencies) - 1, int(round(0.95 * (len(latencies) - 1))))]
    return {
        "rate": phase.successes / phase.elapsed,
        "successes": phase.successes,
        "attempts": len(latencies),
        "median": statistics.median(latencies),
        "p95": p95,
        "statuses": phase.statuses,
        "retries": phase.retries,
        "server_errors": phase.server_errors,
        "elapsed": phase.elapsed,
    }


def report(endpoint: Endpoint, clients: int, result: dict, label: str = "") -> None:
    statuses = ", ".join(f"{key}: {n}" for key, n in sorted(result["statuses"].items()))
    print(
        f"{label}{endpoint.url} {clients:3d} clients: {result['rate']:7.1f} claims/s "
        f"({result['successes']} of {result['attempts']} in {result['elapsed']:.1f} s)  "
        f"median {result['median'] * 1000:6.1f} ms  p95 {result['p95'] * 1000:6.1f} ms  "
        f"retries {result['retries']}  [{statuses}]",
        flush=True,
    )
    if result["server_errors"]:
        endpoint.failed = True
        print(
            f"!!! {len(result['server_errors'])} SERVER ERRORS (5xx) from {endpoint.url} "
            f"at {clients} clients; the first ones:",
            flush=True,
        )
        for line in result["server_errors"][:3]:
            print(f"!!!   {line[:700]}", flush=True)


def check(endpoint: Endpoint, room: int) -> None:
    """Every host's usage is what its successful claims add up to, within
    its capacity; claims of unknown outcome are looked up first."""
    client = endpoint.client
    extra: Counter[str] = Counter()
    for consumer in endpoint.unknown:
        data = client.ok("GET", f"/allocations/{consumer}")
        for host in data["allocations"]:
            extra[host] += 1
    if extra:
        print(
            f"{endpoint.url}: {sum(extra.values())} of {len(endpoint.unknown)} claims answered "
            "with a 5xx or a broken connection were written all the same",
            flush=True,
        )
    capacity = {
        rc: int((spec["total"] - spec.get("reserved", 0)) * spec["allocation_ratio"])
        for rc, spec in inventory(room).items()
    }
    wrong = over = 0
    totals: Counter[str] = Counter()
    for host in endpoint.hosts:
        usages = client.ok("GET", f"/resource_providers/{host}/usages")["usages"]
        totals.update(usages)
        claims = endpoint.claimed[host] + extra[host]
        expected = {rc: claims * n for rc, n in FLAVOR.items()}
        if {rc: usages.get(rc, 0) for rc in FLAVOR} != expected:
            wrong += 1
            if wrong <= 5:
                print(f"!!! {host}: usages {usages}, its {claims} claims make {expected}")
        if any(usages.get(rc, 0) > capacity[rc] for rc in capacity):
            over += 1
            if over <= 5:
                print(f"!!! {host}: usages {usages} exceed its capacity {capacity}")
    claims = sum(endpoint.claimed.values()) + sum(extra.values())
    expected = {rc: claims * n for rc, n in FLAVOR.items()}
    line = (
        f"{endpoint.url}: {claims} claims written, allocated {dict(totals)} (expected {expected})"
    )
    if wrong or over:
        endpoint.failed = True
        print(
            f"!!! USAGE CHECK FAILED: {line}; {wrong} hosts' usage differs from their "
            f"claims, {over} hosts over capacity",
            flush=True,
        )
    else:
        print(f"{line}: every host's usage matches its claims, none over capacity", flush=True)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--url", default="http://127.0.0.1:8778")
    parser.add_argument("--compare", metavar="URL", help="a second endpoint, taking turns")
    parser.add_argument("--token", default="admin")
    parser.add_argument("--clients", default="4,16", help="client counts, comma-separated")
    parser.add_argument("--seconds", type=float, default=20.0, help="per client count")
    parser.add_argument("--hosts", type=int, default=200)
    parser.add_argument(
        "--room",
        type=int,
        default=2000,
        help="claims each host has room for (default 2000: the run never fills a host; "
        "a small room fills hosts, so 409s and the capacity check bite)",
    )
    parser.add_argument(
        "--candidates",
        action="store_true",
        help="ask GET /allocation_candidates before each claim and claim a random one of "
        "its allocation requests, as nova does",
    )
    parser.add_argument(
        "--load-threads",
        type=int,
        default=1,
        help="clients loading the cloud (default 1: upstream on SQLite with several workers "
        "answers concurrent provider writes with 500 'database is locked')",
    )
    parser.add_argument(
        "--rounds",
        type=int,
        default=3,
        help="turns each endpoint takes at each client count, --seconds split among them",
    )
    parser.add_argument(
        "--warmup", type=float, default=2.0, help="seconds of claims before timing (at 4 clients)"
    )
    args = parser.parse_args(argv)
    counts = [int(n) for n in args.clients.split(",")]
    run = uuid.uuid4().hex[:8]
    endpoints = [Endpoint(args.url, args.token)]
    if args.compare:
        endpoints.append(Endpoint(args.compare, args.token))
    for endpoint in endpoints:
        began = time.perf_counter()
        endpoint.hosts = load(endpoint.client, run, args.hosts, args.room, args.load_threads)
        endpoint.known = set(endpoint.hosts)
        print(
            f"# loaded {args.hosts} hosts (room for {args.room} claims of {FLAVOR} each) "
            f"into {endpoint.url} in {time.perf_counter() - began:.1f} s",
            flush=True,
        )
        if args.warmup > 0:
            warmup = Phase()
            run_phase(endpoint, 4, args.warmup, args.candidates, warmup)
            report(endpoint, 4, summary(warmup), "# warm-up: ")
    shape = "GET /allocation_candidates, then PUT" if args.candidates else "PUT"
    print(
        f"# claims at {VERSION}: {shape} /allocations/{{new uuid}}, {args.seconds:g} s per "
        f"client count and endpoint, in {args.rounds} turns",
        flush=True,
    )
    rates: dict[int, list[float]] = {}
    for clients in counts:
        phases = [Phase() for _ in endpoints]
        for round_ in range(args.rounds):
            # Turns, who goes first alternating, so that a machine busy with
            # something else for a while slows both endpoints alike.
            order = list(range(len(endpoints)))
            if round_ % 2:
                order.reverse()
            for index in order:
                run_phase(
                    endpoints[index],
                    clients,
                    args.seconds / args.rounds,
                    args.candidates,
                    phases[index],
                )
        rates[clients] = []
        for endpoint, phase in zip(endpoints, phases):
            result = summary(phase)
            report(endpoint, clients, result)
            rates[clients].append(result["rate"])
    if len(endpoints) == 2:
        for clients, (ours, theirs) in rates.items():
            ratio = ours / theirs if theirs else float("inf")
            print(
                f"# {clients} clients: {ours:.1f} vs {theirs:.1f} claims/s, ratio "
                f"{ratio:.2f} ({args.url} / {args.compare})",
                flush=True,
            )
    for endpoint in endpoints:
        check(endpoint, args.room)
    return 1 if any(endpoint.failed for endpoint in endpoints) else 0


if __name__ == "__main__":
    sys.exit(main())
