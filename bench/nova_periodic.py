"""Replay a compute host's periodic update against a running placement-svc,
the way nova's report client does it and the way 1.45-1.49 allow, and print
requests, bytes and time per update. Standard library only.

    python bench/nova_periodic.py [--url http://127.0.0.1:8778] [--table all]
        [--children 8] [--consumers 40] [--rounds 5] [--token admin]
        [--no-sharing] [--verbose]

Without ``--url`` it starts ``placement-svc serve`` (this interpreter's, one
worker) on a SQLite database in a temporary directory, and stops it at the
end. Two tables (``--table allocations`` or ``--table trees`` for one):

``allocations`` (issue 31, the README's "A compute host's periodic
update"): a root with VCPU, MEMORY_MB and DISK_GB, and ``--children``
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
changed (one instance was added since). Bytes are those received.

``trees`` (issue 32): the provider tree alone, of a nova-shaped host: a
root compute node (VCPU, MEMORY_MB; COMPUTE_* traits and a CUSTOM_ one; in
an aggregate), two NUMA nodes (VCPU, PCPU, MEMORY_MB, a CUSTOM_ class on
one), two physical NICs (bandwidth, CUSTOM_PHYSNET_ traits), four vGPUs
under the NUMA nodes (VGPU, CUSTOM_VGPU_TYPE_ traits), and a sharing
provider of DISK_GB in the aggregate, a tree of its own (left out with
``--no-sharing``). Per recipe: the registration (the host, and the sharing
provider as an operator writes it), a periodic where nothing changed, and
a periodic where one vGPU child changed (its VGPU total and its type trait,
between two types the host has). The recipes:

- single requests (nova's, up to 1.39): what nova's report client sends
  (nova/scheduler/client/report.py). Registration: per provider, top-down,
  GET /resource_providers?in_tree= (nothing) and POST /resource_providers
  (1.14, 1.20); then per provider, bottom-up, PUT /resource_classes/CUSTOM_*
  for its custom classes (1.7) and PUT its inventories (1.26), PUT its
  aggregates (1.19), GET /traits?name=in: and PUT /traits/CUSTOM_* for the
  missing ones and PUT its traits (1.6). The operator's sharing provider:
  POST, then PUT its inventories, traits and aggregates. A periodic is the
  refresh of a stale cache (every [compute]
  resource_provider_association_refresh, 300 s by default, and after any
  conflict; with a fresh cache nova sends nothing for an unchanged tree
  and cannot see another writer's change): GET /resource_providers?in_tree=
  (1.14), per provider GET its inventories, aggregates (1.19) and traits
  (1.6), and for a provider in aggregates the sharing providers in them
  (GET /resource_providers?member_of=in:...&required=MISC_SHARES_VIA_AGGREGATE,
  1.18) and their inventories, aggregates and traits; then the writes of
  what changed (PUT inventories; GET /traits?name=in: and PUT traits).
- 1.47 conditional reads: the same registration; a periodic reads the tree
  with include=inventories,traits,aggregates and the sharing providers the
  same way, each with the ETag of its last answer in If-None-Match (304
  while unchanged), then writes what changed as nova does. Its own writes
  change the tree's ETag, so the periodic after a change reads the tree
  whole again.
- 1.49 tree writes: the host and the sharing provider with one PUT
  /resource_provider_trees/{root} each; a periodic reads the tree with GET
  /resource_provider_trees/{root} and If-None-Match (one 304 while
  unchanged) and the sharing providers as 1.47 does; a periodic with a
  change sends one PUT of the tree, with the generations of the last answer
  (a stale one is a 409: then the client reads the tree and tries again),
  and reads the sharing providers (the PUT answers with the tree's new
  ETag, so the next periodic's read is a 304).

Each recipe writes a host of its own (its own uuids, names, custom traits
and custom class: each registers as on a placement that has none). Requests
are counted and bytes measured on the connection's socket: everything sent
(request lines, headers, bodies) and received (status lines, headers,
bodies). The periodics are medians of ``--rounds`` in a row, the client up
to date before the first (the last answers' ETags and generations);
``--verbose`` prints every request of the last round of each.
"""

from __future__ import annotations

import argparse
import contextlib
import http.client
import io
import json
import os
import socket
import statistics
import subprocess
import sys
import tempfile
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


def allocations_table(url: str, args) -> None:
    """The README's table: the tree and its allocations, 1.39 and 1.47."""
    client = Client(url, args.token)
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


# -- issue 32: the provider tree of a nova-shaped host, three recipes ----------------


class _CountingRaw(io.RawIOBase):
    """A socket's raw reader that counts the bytes it reads."""

    def __init__(self, raw, wire: Wire):
        super().__init__()
        self.raw, self.wire = raw, wire

    def readable(self) -> bool:
        return True

    def readinto(self, buffer) -> int | None:
        count = self.raw.readinto(buffer)
        self.wire.received += count or 0
        return count

    def close(self) -> None:
        self.raw.close()
        super().close()


class _CountingSocket:
    """The connection's socket: bytes sent counted in sendall, bytes
    received in the reader http.client makes of it."""

    def __init__(self, sock: socket.socket, wire: Wire):
        self._sock, self._wire = sock, wire

    def sendall(self, data) -> None:
        self._wire.sent += len(data)
        self._sock.sendall(data)

    def makefile(self, mode="r", *args, **kwargs):
        assert mode == "rb", mode
        return io.BufferedReader(_CountingRaw(self._sock.makefile("rb", buffering=0), self._wire))

    def __getattr__(self, name):
        return getattr(self._sock, name)


class _Connection(http.client.HTTPConnection):
    def __init__(self, wire: Wire, host: str, port: int):
        super().__init__(host, port, timeout=60)
        self.wire = wire

    def connect(self) -> None:
        super().connect()
        self.sock = _CountingSocket(self.sock, self.wire)


class Wire:
    """One keep-alive connection; counts requests and the bytes sent and
    received on its socket. ``log``: each request of the current count."""

    def __init__(self, url: str, token: str):
        parsed = urllib.parse.urlsplit(url)
        self.conn = _Connection(self, parsed.hostname or "127.0.0.1", parsed.port or 80)
        self.prefix = parsed.path.rstrip("/")
        self.token = token
        self.reset()

    def reset(self) -> None:
        self.requests = self.sent = self.received = 0
        self.log: list[str] = []

    def call(self, method, path, version, body=None, headers=None, expect=(200,)):
        """(status, ETag, the body read as JSON or None)."""
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
        before = self.sent + self.received
        self.conn.request(method, self.prefix + path, payload, sent)
        response = self.conn.getresponse()
        data = response.read()
        self.requests += 1
        size = self.sent + self.received - before
        self.log.append(f"{method} {path} ({version}) -> {response.status}, {size} bytes")
        if response.status not in expect:
            raise RuntimeError(f"{method} {path} -> {response.status}: {data[:300]!r}")
        return response.status, response.getheader("etag"), json.loads(data) if data else None


SHARES = "MISC_SHARES_VIA_AGGREGATE"


def inventory(total, reserved=0, max_unit=None, ratio=1.0) -> dict:
    """A whole inventory record, as nova's drivers report them."""
    return {
        "total": total,
        "reserved": reserved,
        "min_unit": 1,
        "max_unit": total if max_unit is None else max_unit,
        "step_size": 1,
        "allocation_ratio": ratio,
    }


def nova_host(tag: str, sharing: bool) -> list[dict]:
    """The providers of a nova-shaped host (parents first; the first is the
    root) and of its sharing provider (a root, last), each with its uuid,
    name, parent uuid, inventories, traits and aggregates."""
    aggregate = str(uuid.uuid5(uuid.NAMESPACE_URL, f"nova-periodic/{tag}/aggregate"))
    # custom names of the host's own, so that each recipe creates its own
    custom = "".join(c if c.isalnum() else "_" for c in tag.upper())

    def provider(name, parent, inventories, traits, aggregates=()):
        return {
            "uuid": str(uuid.uuid5(uuid.NAMESPACE_URL, f"nova-periodic/{tag}/{name}")),
            "name": f"{tag}-{name}",
            "parent": parent,
            "inventories": inventories,
            "traits": sorted(traits),
            "aggregates": sorted(aggregates),
        }

    def numa(extra):
        return {
            "VCPU": inventory(8, ratio=4.0),
            "PCPU": inventory(8),
            "MEMORY_MB": inventory(65536),
            **extra,
        }

    bandwidth = {
        "NET_BW_EGR_KILOBIT_PER_SEC": inventory(10_000_000),
        "NET_BW_IGR_KILOBIT_PER_SEC": inventory(10_000_000),
    }
    root = provider(
        "cn",
        None,
        {"VCPU": inventory(16, ratio=4.0), "MEMORY_MB": inventory(32768, reserved=512)},
        [
            "COMPUTE_VOLUME_MULTI_ATTACH",
            "COMPUTE_NET_ATTACH_INTERFACE",
            "COMPUTE_IMAGE_TYPE_QCOW2",
            "HW_CPU_X86_AVX2",
            f"CUSTOM_HOST_GOLD_{custom}",
        ],
        [aggregate] if sharing else [],
    )
    numa0 = provider("numa0", root["uuid"], numa({}), ["HW_NUMA_ROOT"])
    numa1 = provider(
        "numa1", root["uuid"], numa({f"CUSTOM_PMEM_4GB_{custom}": inventory(2)}), ["HW_NUMA_ROOT"]
    )
    host = [root, numa0, numa1]
    for n in range(2):
        physnet = f"CUSTOM_PHYSNET{n}_{custom}"
        host.append(
            provider(f"nic{n}", root["uuid"], bandwidth, [physnet, f"CUSTOM_VNIC_{custom}"])
        )
    for n in range(4):
        parent = (numa0, numa1)[n // 2]["uuid"]
        vgpu = {"VGPU": inventory(4)}
        vgpu_type = f"CUSTOM_VGPU_TYPE_{'B' if n == 3 else 'A'}_{custom}"
        host.append(provider(f"vgpu{n}", parent, vgpu, [vgpu_type]))
    if sharing:
        disk = {"DISK_GB": inventory(10000, reserved=100, max_unit=2000)}
        host.append(provider("disk", None, disk, [SHARES, "STORAGE_DISK_SSD"], [aggregate]))
    return host


def change_one_child(providers: list[dict], round_: int) -> None:
    """The first vGPU's VGPU total and type (A, as vgpu1's), one way on even
    rounds and back on odd ones (both types exist: vgpu3 has B)."""
    named = {p["name"].rpartition("-")[2]: p for p in providers}
    child = named["vgpu0"]
    vgpu_a, vgpu_b = named["vgpu1"]["traits"][0], named["vgpu3"]["traits"][0]
    child["inventories"] = {"VGPU": inventory(2 if round_ % 2 == 0 else 4)}
    child["traits"] = [vgpu_b if round_ % 2 == 0 else vgpu_a]


class NovaClient:
    """nova's report client, single requests, as report.py sends them: what
    it knows of placement (generations and what it last read or wrote of
    each provider) and the requests each step sends."""

    def __init__(self, wire: Wire, providers: list[dict]):
        self.wire = wire
        self.providers = providers
        self.host = [p for p in providers if SHARES not in p["traits"]]
        self.sharing = [p for p in providers if SHARES in p["traits"]]
        self.generations: dict[str, int] = {}
        self.known: dict[str, dict] = {}  # uuid -> {"inventories", "traits", "aggregates"}

    # registration
    def register(self) -> None:
        for p in self.host:  # _ensure_resource_provider, top-down
            self.wire.call("GET", f"/resource_providers?in_tree={p['uuid']}", "1.14")
            body = {"uuid": p["uuid"], "name": p["name"]}
            if p["parent"]:
                body["parent_provider_uuid"] = p["parent"]
            _s, _e, made = self.wire.call("POST", "/resource_providers", "1.20", body)
            self.generations[p["uuid"]] = made["generation"]
            self.known[p["uuid"]] = {"inventories": {}, "traits": [], "aggregates": []}
        for p in reversed(self.host):  # update_from_provider_tree, bottom-up
            self.flush(p)
        for p in self.sharing:  # the operator, one request at a time
            body = {"uuid": p["uuid"], "name": p["name"]}
            _s, _e, made = self.wire.call("POST", "/resource_providers", "1.39", body)
            generation = made["generation"]
            for part in ("inventories", "traits", "aggregates"):
                body = {part: p[part], "resource_provider_generation": generation}
                path = f"/resource_providers/{p['uuid']}/{part}"
                _s, _e, answer = self.wire.call("PUT", path, "1.39", body)
                generation = answer["resource_provider_generation"]

    def flush(self, p: dict) -> None:
        """set_inventory_for_provider, set_aggregates_for_provider and
        set_traits_for_provider: each only when it differs from the cache."""
        rp, known = p["uuid"], self.known[p["uuid"]]
        path = f"/resource_providers/{rp}"
        if p["inventories"] != known["inventories"]:
            for rc in sorted(p["inventories"]):
                if rc.startswith("CUSTOM_"):
                    self.wire.call("PUT", f"/resource_classes/{rc}", "1.7", expect=(201, 204))
            body = {
                "inventories": p["inventories"],
                "resource_provider_generation": self.generations[rp],
            }
            _s, _e, answer = self.wire.call("PUT", f"{path}/inventories", "1.26", body)
            self.generations[rp] = answer["resource_provider_generation"]
            known["inventories"] = p["inventories"]
        if sorted(p["aggregates"]) != sorted(known["aggregates"]):
            body = {
                "aggregates": p["aggregates"],
                "resource_provider_generation": self.generations[rp],
            }
            _s, _e, answer = self.wire.call("PUT", f"{path}/aggregates", "1.19", body)
            self.generations[rp] = answer["resource_provider_generation"]
            known["aggregates"] = p["aggregates"]
        if sorted(p["traits"]) != sorted(known["traits"]):
            names = ",".join(p["traits"])
            _s, _e, there = self.wire.call("GET", f"/traits?name=in:{names}", "1.6")
            for trait in sorted(set(p["traits"]) - set(there["traits"])):
                self.wire.call("PUT", f"/traits/{trait}", "1.6", expect=(201, 204))
            body = {"traits": p["traits"], "resource_provider_generation": self.generations[rp]}
            _s, _e, answer = self.wire.call("PUT", f"{path}/traits", "1.6", body)
            self.generations[rp] = answer["resource_provider_generation"]
            known["traits"] = p["traits"]

    # a periodic
    def refresh(self) -> None:
        """_ensure_resource_provider with a stale cache: the tree, then
        _refresh_associations of each provider, with the sharing providers
        of its aggregates."""
        root = self.host[0]["uuid"]
        _s, _e, tree = self.wire.call("GET", f"/resource_providers?in_tree={root}", "1.14")
        for listed in tree["resource_providers"]:
            self._associations(listed["uuid"], refresh_sharing=True)

    def _associations(self, rp: str, refresh_sharing: bool) -> None:
        path = f"/resource_providers/{rp}"
        _s, _e, inventories = self.wire.call("GET", f"{path}/inventories", "1.0")
        _s, _e, aggregates = self.wire.call("GET", f"{path}/aggregates", "1.19")
        _s, _e, traits = self.wire.call("GET", f"{path}/traits", "1.6")
        self.generations[rp] = traits["resource_provider_generation"]
        if rp in self.known:
            self.known[rp] = {
                "inventories": inventories["inventories"],
                "traits": sorted(traits["traits"]),
                "aggregates": sorted(aggregates["aggregates"]),
            }
        if refresh_sharing and aggregates["aggregates"]:
            query = f"member_of=in:{','.join(aggregates['aggregates'])}&required={SHARES}"
            _s, _e, found = self.wire.call("GET", f"/resource_providers?{query}", "1.18")
            for sharing in found["resource_providers"]:
                self._associations(sharing["uuid"], refresh_sharing=False)

    def prime(self) -> None:
        """Up to date before the periodics: nothing to do for a client that
        refreshes everything each time."""

    def periodic(self) -> None:
        self.refresh()
        for p in reversed(self.host):
            self.flush(p)


class ConditionalClient(NovaClient):
    """1.47: the tree and the sharing providers in two conditional reads;
    the writes as nova sends them."""

    INCLUDE = "include=inventories,traits,aggregates"

    def __init__(self, wire: Wire, providers: list[dict]):
        super().__init__(wire, providers)
        self.tags: dict[str, str] = {}

    def read(self, key: str, path: str, version: str = "1.47") -> dict | None:
        headers = {"if-none-match": self.tags[key]} if key in self.tags else None
        status, tag, body = self.wire.call("GET", path, version, headers=headers, expect=(200, 304))
        if status == 200:
            self.tags[key] = tag
            return body
        return None

    def prime(self) -> None:
        self.refresh()  # the ETags of the registered host

    def refresh(self) -> None:
        root = self.host[0]["uuid"]
        tree = self.read("tree", f"/resource_providers?in_tree={root}&{self.INCLUDE}")
        if tree is not None:
            for listed in tree["resource_providers"]:
                self.generations[listed["uuid"]] = listed["generation"]
                self.known[listed["uuid"]] = {
                    "inventories": listed["inventories"]["inventories"],
                    "traits": sorted(listed["traits"]["traits"]),
                    "aggregates": sorted(listed["aggregates"]["aggregates"]),
                }
        aggregates = sorted({a for p in self.host for a in self.known[p["uuid"]]["aggregates"]})
        if aggregates:
            query = f"member_of=in:{','.join(aggregates)}&required={SHARES}&{self.INCLUDE}"
            self.read("sharing", f"/resource_providers?{query}")


class TreeClient(ConditionalClient):
    """1.49: a PUT of the whole tree for registration and for a change; a
    conditional GET of the tree for a periodic without one."""

    def __init__(self, wire: Wire, providers: list[dict]):
        super().__init__(wire, providers)
        self.sent: dict | None = None  # the host as last written or read

    def body(self, providers: list[dict], root: str) -> dict:
        return {
            "root": root,
            "providers": [
                {
                    "uuid": p["uuid"],
                    "name": p["name"],
                    "parent_provider_uuid": p["parent"],
                    "inventories": p["inventories"],
                    "traits": p["traits"],
                    "aggregates": p["aggregates"],
                    **(
                        {"generation": self.generations[p["uuid"]]}
                        if p["uuid"] in self.generations
                        else {}
                    ),
                }
                for p in providers
            ],
        }

    def put(self, providers: list[dict]) -> None:
        root = providers[0]["uuid"]
        path = f"/resource_provider_trees/{root}"
        _s, tag, answer = self.wire.call("PUT", path, "1.49", self.body(providers, root))
        for p in answer["providers"]:
            self.generations[p["uuid"]] = p["generation"]
        self.tags[f"tree {root}"] = tag
        self.sent = json.loads(json.dumps(self.body(providers, root)))

    def register(self) -> None:
        self.put(self.host)
        for p in self.sharing:
            self.put([p])
        for p in self.host:
            self.known[p["uuid"]] = {k: p[k] for k in ("inventories", "traits", "aggregates")}

    def changed(self) -> bool:
        root = self.host[0]["uuid"]
        return self.body(self.host, root) != self.sent

    def prime(self) -> None:
        self.read_sharing()  # the tree's ETag came with the PUT's answer

    def read_sharing(self) -> None:
        if self.sharing:
            aggregates = sorted({a for p in self.host for a in p["aggregates"]})
            query = f"member_of=in:{','.join(aggregates)}&required={SHARES}&{self.INCLUDE}"
            self.read("sharing", f"/resource_providers?{query}")

    def periodic(self) -> None:
        if self.changed():
            self.put(self.host)  # a stale generation would be a 409: read, try again
        else:
            root = self.host[0]["uuid"]
            body = self.read(f"tree {root}", f"/resource_provider_trees/{root}", "1.49")
            if body is not None:  # another writer: what the tree is now
                for p in body["providers"]:
                    self.generations[p["uuid"]] = p["generation"]
        self.read_sharing()


RECIPES = (
    ("single requests (nova, <=1.39)", NovaClient),
    ("1.47 conditional reads", ConditionalClient),
    ("1.49 tree writes", TreeClient),
)


def trees_table(url: str, args) -> None:
    sharing = not args.no_sharing
    rows = []
    logs = []
    for n, (name, recipe) in enumerate(RECIPES):
        wire = Wire(url, args.token)
        providers = nova_host(f"h{n}-{uuid.uuid4().hex[:6]}", sharing)
        client = recipe(wire, providers)
        started = time.perf_counter()
        client.register()
        cells = [(wire.requests, wire.sent + wire.received, time.perf_counter() - started)]
        logs.append((name, "registration", list(wire.log)))
        client.prime()
        for label, change in (("unchanged", None), ("one child changed", change_one_child)):
            counts, sizes, times = [], [], []
            for round_ in range(args.rounds):
                if change is not None:
                    change(providers, round_)
                wire.reset()
                started = time.perf_counter()
                client.periodic()
                times.append(time.perf_counter() - started)
                counts.append(wire.requests)
                sizes.append(wire.sent + wire.received)
            logs.append((name, label, list(wire.log)))
            cells.append(
                (
                    int(statistics.median(counts)),
                    int(statistics.median(sizes)),
                    statistics.median(times),
                )
            )
        rows.append((name, cells))
    providers = nova_host("count", sharing)
    print(
        f"# a nova-shaped host: {sum(SHARES not in p['traits'] for p in providers)} providers"
        + (", and a sharing provider of DISK_GB in its aggregate" if sharing else "")
        + f"; requests, bytes sent and received, time; periodics: medians of {args.rounds}"
    )
    head = ("registration", "unchanged periodic", "one child changed")
    print(f"{'recipe':32s}" + "".join(f" | {h:>28s}" for h in head))
    for name, cells in rows:
        print(
            f"{name:32s}"
            + "".join(
                f" | {count:4d} req {size:8d} B {took * 1000:6.1f} ms"
                for count, size, took in cells
            )
        )
    if args.verbose:
        for name, label, log in logs:
            print(f"\n# {name}, {label}" + (" (its last round)" if label != "registration" else ""))
            for line in log:
                print(f"  {line}")


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@contextlib.contextmanager
def server(url: str | None):
    """``url``, or a ``placement-svc serve`` of its own on SQLite, stopped
    at the end (its log in the temporary directory, shown if it fails)."""
    if url:
        yield url
        return
    with tempfile.TemporaryDirectory(prefix="bench-nova-periodic-") as workdir:
        config = os.path.join(workdir, "placement.conf")
        with open(config, "w") as out:
            out.write(
                "[api]\nauth_strategy = noauth2\n[placement_database]\n"
                f"connection = sqlite:///{workdir}/placement.sqlite\n"
            )
        port = free_port()
        command = [sys.executable, "-m", "placement_svc.cmd.cli", "serve", "--config-file", config]
        command += ["--bind", f"127.0.0.1:{port}", "--workers", "1"]
        with open(os.path.join(workdir, "serve.log"), "w") as log:
            master = subprocess.Popen(command, stdout=log, stderr=log, cwd=workdir)
        try:
            deadline = time.monotonic() + 60
            while True:
                if master.poll() is not None:
                    with open(os.path.join(workdir, "serve.log")) as log:
                        raise SystemExit(f"the server exited:\n{log.read()[-2000:]}")
                with contextlib.suppress(OSError):
                    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=5)
                    conn.request("GET", "/")
                    if conn.getresponse().status == 200:
                        conn.close()
                        break
                if time.monotonic() > deadline:
                    raise SystemExit("the server did not answer in time")
                time.sleep(0.05)
            print(f"# placement-svc serve --workers 1 on SQLite ({sys.executable})")
            yield f"http://127.0.0.1:{port}"
        finally:
            master.terminate()
            master.wait(30)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--url", help="a running placement-svc; default: start one on SQLite in a temporary dir"
    )
    parser.add_argument("--token", default="admin")
    parser.add_argument(
        "--table", choices=("allocations", "trees", "all"), default="all", help="default: all"
    )
    parser.add_argument("--children", type=int, default=8, help="allocations table")
    parser.add_argument("--consumers", type=int, default=40, help="allocations table")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument(
        "--no-sharing", action="store_true", help="trees table: a host without a sharing provider"
    )
    parser.add_argument(
        "--verbose", action="store_true", help="trees table: every request of each recipe"
    )
    args = parser.parse_args(argv)
    with server(args.url) as url:
        if args.table in ("allocations", "all"):
            allocations_table(url, args)
        if args.table == "all":
            print()
        if args.table in ("trees", "all"):
            trees_table(url, args)


if __name__ == "__main__":
    main()
