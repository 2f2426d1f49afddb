"""A small cloud made through the HTTP API for the console's tests (and to
look at the console by hand: ``python -m tests.browser.seed URL``).

Three compute hosts, each a root with two NUMA children holding VCPU and
MEMORY_MB (DISK_GB on the root of the first two), a sharing storage
provider in an aggregate with two of the hosts, traits on some, and a few
consumers with project, user and consumer type.
"""

from __future__ import annotations

import json
import sys
import urllib.error
import urllib.request

MICROVERSION = "placement 1.51"
HEADERS = {
    "x-auth-token": "admin",
    "content-type": "application/json",
    "accept": "application/json",
}

# The microversion asked of each service seeded (a capped one refuses more).
VERSIONS: dict[str, str] = {}

AGG_STORAGE = "5a9e0a01-5a1e-4c1b-8d3e-5707a9e00001"
AGG_RACK = "7ac00002-7ac0-4c1b-8d3e-7ac000000002"
STORAGE = "5707a9e0-0000-4000-8000-000000000001"


def compute(n: int) -> str:
    return f"c0000000-0000-4000-8000-00000000000{n}"


def numa(n: int, k: int) -> str:
    return f"c0000000-0000-4000-8000-0000000000{n}{k}"


def consumer(n: int) -> str:
    return f"e0000000-0000-4000-8000-00000000000{n}"


def call(base: str, method: str, path: str, body=None, headers=None):
    """``method`` ``path`` on the API at ``base``, as admin at 1.51 (or as
    ``headers`` say): its status, body (parsed) and headers."""
    data = None if body is None else json.dumps(body).encode()
    headers = {
        **HEADERS,
        "openstack-api-version": VERSIONS.get(base, MICROVERSION),
        **(headers or {}),
    }
    request = urllib.request.Request(base + path, data=data, method=method, headers=headers)
    try:
        with urllib.request.urlopen(request, timeout=30) as response:
            text = response.read()
            return response.status, (json.loads(text) if text else None), response.headers
    except urllib.error.HTTPError as error:
        text = error.read()
        return error.code, (json.loads(text) if text else None), error.headers


def ok(base: str, method: str, path: str, body=None):
    status, answer, _ = call(base, method, path, body)
    assert status < 300, (method, path, status, answer)
    return answer


def provider(base, uuid, name, parent=None):
    body = {"uuid": uuid, "name": name}
    if parent:
        body["parent_provider_uuid"] = parent
    ok(base, "POST", "/resource_providers", body)


def _replace(base, uuid, what: str, value) -> None:
    """PUT /resource_providers/{uuid}/<what> at the provider's generation."""
    generation = ok(base, "GET", f"/resource_providers/{uuid}")["generation"]
    body = {"resource_provider_generation": generation, what: value}
    ok(base, "PUT", f"/resource_providers/{uuid}/{what}", body)


def inventories(base, uuid, inv: dict):
    _replace(base, uuid, "inventories", inv)


def traits(base, uuid, names):
    _replace(base, uuid, "traits", names)


def aggregates(base, uuid, aggs):
    _replace(base, uuid, "aggregates", aggs)


def allocate(base, consumer_uuid, allocations: dict, project, user, consumer_type="INSTANCE"):
    ok(
        base,
        "PUT",
        f"/allocations/{consumer_uuid}",
        {
            "allocations": {rp: {"resources": res} for rp, res in allocations.items()},
            "project_id": project,
            "user_id": user,
            "consumer_generation": None,
            "consumer_type": consumer_type,
        },
    )


def seed(base: str, microversion: str = MICROVERSION) -> None:
    """Make the cloud; ``base`` is the service's URL (no trailing slash).
    Every request to ``base`` from then on asks for ``microversion``."""
    VERSIONS[base] = microversion
    ok(base, "PUT", "/traits/CUSTOM_GOLD")
    for n in (1, 2, 3):
        provider(base, compute(n), f"compute{n}")
        for k in (0, 1):
            provider(base, numa(n, k), f"compute{n}_numa{k}", parent=compute(n))
            inventories(
                base,
                numa(n, k),
                {
                    "VCPU": {"total": 8 * n, "allocation_ratio": 2.0, "reserved": k},
                    "MEMORY_MB": {"total": 16384 * n, "reserved": 512, "max_unit": 8192 * n},
                },
            )
        if n < 3:
            inventories(base, compute(n), {"DISK_GB": {"total": 100 * n, "reserved": 10}})
    traits(base, compute(1), ["HW_CPU_X86_AVX2", "COMPUTE_STATUS_DISABLED"])
    traits(base, compute(2), ["HW_CPU_X86_AVX2", "CUSTOM_GOLD"])
    traits(base, numa(2, 0), ["HW_NUMA_ROOT"])
    aggregates(base, compute(1), [AGG_STORAGE, AGG_RACK])
    aggregates(base, compute(2), [AGG_STORAGE])
    aggregates(base, compute(3), [AGG_RACK])

    provider(base, STORAGE, "shared-storage")
    inventories(base, STORAGE, {"DISK_GB": {"total": 2000, "reserved": 0, "allocation_ratio": 1.0}})
    traits(base, STORAGE, ["MISC_SHARES_VIA_AGGREGATE"])
    aggregates(base, STORAGE, [AGG_STORAGE])

    allocate(
        base,
        consumer(1),
        {numa(1, 0): {"VCPU": 4, "MEMORY_MB": 4096}, STORAGE: {"DISK_GB": 40}},
        "project-a",
        "alice",
    )
    allocate(
        base,
        consumer(2),
        {numa(1, 1): {"VCPU": 2, "MEMORY_MB": 2048}, compute(1): {"DISK_GB": 20}},
        "project-a",
        "bob",
    )
    allocate(
        base,
        consumer(3),
        {numa(2, 0): {"VCPU": 12, "MEMORY_MB": 16384}, STORAGE: {"DISK_GB": 100}},
        "project-b",
        "carol",
        consumer_type="MIGRATION",
    )


if __name__ == "__main__":
    seed(sys.argv[1].rstrip("/"))
