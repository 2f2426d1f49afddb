"""A small cloud for the explain, capacity and empty-answer tests, written
through the API: three hosts, each short of one thing ``FLAVOR`` needs."""

from __future__ import annotations

import uuid

HOST_A = "aaaaaaaa-0000-4000-8000-00000000000a"  # AVX2, but 14 of its 16 VCPU in use
HOST_B = "bbbbbbbb-0000-4000-8000-00000000000b"  # AVX2, too little memory
HOST_C = "cccccccc-0000-4000-8000-00000000000c"  # room enough, no AVX2
CONSUMER = "dddddddd-0000-4000-8000-00000000000d"
# A flavor of 4 VCPU and 8 GiB on an AVX2 host: no host has it all.
FLAVOR = "resources=VCPU:4,MEMORY_MB:8192&required=HW_CPU_X86_AVX2"


def small_cloud(client) -> None:
    """Three hosts, written through the API: each lacks one thing the flavor
    needs, host-a only because of what an instance already uses."""
    hosts = [
        ("host-a", HOST_A, {"VCPU": 16, "MEMORY_MB": 32768}, ["HW_CPU_X86_AVX2"]),
        ("host-b", HOST_B, {"VCPU": 8, "MEMORY_MB": 4096}, ["HW_CPU_X86_AVX2"]),
        ("host-c", HOST_C, {"VCPU": 8, "MEMORY_MB": 16384}, []),
    ]
    for name, rp_uuid, inventory, traits in hosts:
        answer = client.post("/resource_providers", json={"name": name, "uuid": rp_uuid})
        assert answer.status_code == 200, answer.text
        inventories = {rc: {"total": total} for rc, total in inventory.items()}
        answer = client.put(
            f"/resource_providers/{rp_uuid}/inventories",
            json={"resource_provider_generation": 0, "inventories": inventories},
        )
        assert answer.status_code == 200, answer.text
        answer = client.put(
            f"/resource_providers/{rp_uuid}/traits",
            json={"resource_provider_generation": 1, "traits": traits},
        )
        assert answer.status_code == 200, answer.text
    answer = client.put(
        f"/allocations/{CONSUMER}",
        json={
            "allocations": {HOST_A: {"resources": {"VCPU": 14, "MEMORY_MB": 2048}}},
            "project_id": "demo",
            "user_id": "demo",
            "consumer_generation": None,
            "consumer_type": "INSTANCE",
        },
    )
    assert answer.status_code == 204, answer.text


def one_tree(client, providers: int, root: str, aggregate: str, inventory: dict) -> None:
    """A root (of uuid ``root``) and ``providers - 1`` children, each with
    ``inventory`` (class -> total), the trait HW_CPU_X86_AVX2 and
    ``aggregate``, written through the API (generation 3 each after)."""
    for index in range(providers):
        rp = root if index == 0 else str(uuid.uuid4())
        body = {"name": f"rp{index}", "uuid": rp}
        if index:
            body["parent_provider_uuid"] = root
        assert client.post("/resource_providers", json=body).status_code == 200
        inventories = {rc: {"total": total} for rc, total in inventory.items()}
        for generation, (path, payload) in enumerate(
            (
                ("inventories", {"inventories": inventories}),
                ("traits", {"traits": ["HW_CPU_X86_AVX2"]}),
                ("aggregates", {"aggregates": [aggregate]}),
            )
        ):
            payload["resource_provider_generation"] = generation
            answer = client.put(f"/resource_providers/{rp}/{path}", json=payload)
            assert answer.status_code == 200, answer.text


def api_provider(client, name, parent=None, inventory=None, traits=(), aggregates=()) -> str:
    """A provider written through the API (under ``parent``, a uuid), with
    ``inventory`` ({class: total}), ``traits`` and ``aggregates``; its
    uuid, new each time."""
    rp_uuid = str(uuid.uuid4())
    body = {"name": name, "uuid": rp_uuid}
    if parent:
        body["parent_provider_uuid"] = parent
    assert client.post("/resource_providers", json=body).status_code == 200
    generation = 0
    inventories = {rc: {"total": total} for rc, total in (inventory or {}).items()}
    for path, payload in (
        ("inventories", {"inventories": inventories}),
        ("traits", {"traits": list(traits)}),
        ("aggregates", {"aggregates": list(aggregates)}),
    ):
        if not payload[path]:
            continue
        payload["resource_provider_generation"] = generation
        answer = client.put(f"/resource_providers/{rp_uuid}/{path}", json=payload)
        assert answer.status_code == 200, answer.text
        generation = answer.json()["resource_provider_generation"]
    return rp_uuid
