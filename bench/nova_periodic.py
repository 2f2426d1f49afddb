"""Replay a compute host's periodic update against a running placement-svc,
the way nova's report client does it and the way 1.45-1.47 allow, and print
requests, bytes and time per update. Standard library only.

    python bench/nova_periodic.py --url http://127.0.0.1:8778 [--children 8]
        [--consumers 40] [--rounds 5] [--token admin]

The host: a root with VCPU, MEMORY_MB and DISK_GB, and ``--children``
child providers (a VGPU each, a trait, an aggregate); ``--consumers``
instances allocating on the root, every other one a VGPU on a child too.

The old way (any microversion up to 1.39, upstream's API; what nova's
report client sends when its cache is stale, and since 2022 on every run
for the allocations): the tree, then per provider its inventories,
aggregates and traits, then per provider its allocations, then per
consumer its allocations. The new way (1.47): the tree with
include=inventories,traits,aggregates,usages, and the tree's allocations
in one bulk read (GET /allocations?in_tree=), each with the ETag of the
last answer in If-None-Match. Each is timed fresh (the client knows
nothing), unchanged (nothing was written since the last update) and
changed (one instance was added since).
"""

from __future__ import annotations

import argparse
import http.client
import json
import statistics
import time
import urllib.parse
import uuid


class Client:
    """One keep-alive connection; counts requests and bytes received."""

    def __init__(self, url: str, token: str):
        parsed = urllib.parse.urlsplit(url)
        self.conn = http.client.HTTPConnection(parsed.hostname, parsed.port or 80, timeout=60)
        self.prefix = parsed.path.rstrip("/")
        self.token = token
        self.requests = self.received = 0

    def call(self, method, path, body=None, version="1.47", headers=None):
        sent = {
            "x-auth-token": self.token,
            "openstack-api-version": f"placement {version}",
            "accept": "application/json",
            **(headers or {}),
        }
        payload = None
        if body is not None:
            payload = json.dumps(body)
            sent["content-type"] = "application/json"
        self.conn.request(method, self.prefix + path, payload, sent)
        response = self.conn.getresponse()
        data = response.read()
        self.requests += 1
        # what came over the wire: the status line, the headers and the body
        self.received += len(data) + sum(len(k) + len(v) + 4 for k, v in response.getheaders())
        self.received += len(f"HTTP/1.1 {response.status} {response.reason}\r\n")
        if response.status >= 400:
            raise RuntimeError(f"{method} {path} -> {response.status}: {data[:300]!r}")
        return response.status, response.getheader("etag"), json.loads(data) if data else None


def build(client: Client, children: int, consumers: int) -> tuple[str, list[str], list[str]]:
    """The host; its root's uuid, every provider's uuid, the consumers'."""
    aggregate = str(uuid.uuid4())
    root = str(uuid.uuid4())
    client.call("POST", "/resource_providers", {"name": f"host-{root[:8]}", "uuid": root})
    inventories = {
        "VCPU": {"total": 64},
        "MEMORY_MB": {"total": 262144},
        "DISK_GB": {"total": 4000},
    }
    client.call(
        "PUT",
        f"/resource_providers/{root}/inventories",
        {"resource_provider_generation": 0, "inventories": inventories},
    )
    providers = [root]
    for n in range(children):
        child = str(uuid.uuid4())
        client.call(
            "POST",
            "/resource_providers",
            {"name": f"host-{root[:8]}-gpu{n}", "uuid": child, "parent_provider_uuid": root},
        )
        generation = 0
        for path, body in (
            ("inventories", {"inventories": {"VGPU": {"total": 8}}}),
            ("traits", {"traits": ["HW_GPU_API_VULKAN"]}),
            ("aggregates", {"aggregates": [aggregate]}),
        ):
            body["resource_provider_generation"] = generation
            _s, _e, answer = client.call("PUT", f"/resource_providers/{child}/{path}", body)
            generation = answer["resource_provider_generation"]
        providers.append(child)
    instances = [add_instance(client, root, providers, n) for n in range(consumers)]
    return root, providers, instances


def add_instance(client: Client, root: str, providers: list[str], n: int) -> str:
    consumer = str(uuid.uuid4())
    allocations = {root: {"resources": {"VCPU": 1, "MEMORY_MB": 1024, "DISK_GB": 10}}}
    if n % 2 and len(providers) > 1:
        allocations[providers[1 + n % (len(providers) - 1)]] = {"resources": {"VGPU": 1}}
    client.call(
        "PUT",
        f"/allocations/{consumer}",
        {
            "allocations": allocations,
            "project_id": "bench",
            "user_id": "bench",
            "consumer_generation": None,
            "consumer_type": "INSTANCE",
        },
    )
    return consumer


def old_way(client: Client, root: str, state: dict) -> None:
    """nova's report client, refreshing a stale cache, at 1.39."""
    _s, _e, tree = client.call("GET", f"/resource_providers?in_tree={root}", version="1.39")
    providers = [p["uuid"] for p in tree["resource_providers"]]
    for rp in providers:
        for part in ("inventories", "aggregates", "traits"):
            client.call("GET", f"/resource_providers/{rp}/{part}", version="1.39")
    consumers: set[str] = set()
    for rp in providers:
        _s, _e, held = client.call("GET", f"/resource_providers/{rp}/allocations", version="1.39")
        consumers |= set(held["allocations"])
    for consumer in sorted(consumers):
        client.call("GET", f"/allocations/{consumer}", version="1.39")


def new_way(client: Client, root: str, state: dict) -> None:
    """Two conditional reads: the tree with everything in it, its allocations."""
    include = "include=inventories,traits,aggregates,usages"
    for key, path in (
        ("tree", f"/resource_providers?in_tree={root}&{include}"),
        ("allocations", f"/allocations?in_tree={root}"),
    ):
        headers = {"if-none-match": state[key]} if key in state else None
        status, tag, _body = client.call("GET", path, headers=headers)
        if status == 200:
            state[key] = tag


def measure(client: Client, update, root: str, state: dict, rounds: int, before=None):
    requests, received, times = [], [], []
    for _ in range(rounds):
        if before is not None:
            before()
        client.requests = client.received = 0
        start = time.perf_counter()
        update(client, root, state)
        times.append(time.perf_counter() - start)
        requests.append(client.requests)
        received.append(client.received)
    return requests[-1], int(statistics.median(received)), statistics.median(times)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--url", default="http://127.0.0.1:8778")
    parser.add_argument("--token", default="admin")
    parser.add_argument("--children", type=int, default=8)
    parser.add_argument("--consumers", type=int, default=40)
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args(argv)
    client = Client(args.url, args.token)
    root, providers, _instances = build(client, args.children, args.consumers)
    print(
        f"# one host: 1 root + {args.children} children, {args.consumers} consumers; "
        f"medians of {args.rounds} updates"
    )
    print(f"{'':44s} {'requests':>8s} {'bytes':>9s} {'time':>9s}")
    added = iter(range(args.consumers, args.consumers + 10 * args.rounds))

    def one_more():
        add_instance(client, root, providers, next(added))

    for name, update in (("old way (1.39)", old_way), ("new way (1.47)", new_way)):
        rows = [
            ("fresh", None, True),
            ("unchanged", None, False),
            ("changed (one more instance)", one_more, False),
        ]
        state: dict = {}
        for label, before, fresh in rows:
            if fresh:  # a client that knows nothing: no ETag to send, each round
                before = state.clear
            else:
                update(client, root, state)  # the client is up to date
            count, size, took = measure(client, update, root, state, args.rounds, before)
            print(f"{name + ', ' + label:44s} {count:8d} {size:9d} {took * 1000:7.1f} ms")


if __name__ == "__main__":
    main()
