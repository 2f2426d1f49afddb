"""The live service fuzzed from its own OpenAPI document (issue 16).

A real ``placement-svc serve`` on a new SQLite file (noauth2) is given a
small cloud (a provider tree with inventories, traits and an aggregate, a
sharing provider, consumers with allocations, a custom resource class and
trait); then schemathesis, the ``st`` command, loads the document from the
live ``GET /openapi.json`` and runs every phase (examples, coverage,
fuzzing, stateful) against every operation, with a bounded number of
examples per operation and hypothesis derandomized, so a run is the same
run every time. Path and query parameters draw from the cloud's names
(schemathesis' dictionaries) half of the time, so the fuzz reaches past
404s into real bodies. The checks:

* not_a_server_error: no 500, whatever the input;
* status_code_conformance: every status is one the document lists;
* content_type_conformance: every Content-Type is one it lists;
* response_schema_conformance: every body matches its schema.

Any finding fails the test, with schemathesis' report (each failure with a
curl command that reproduces it). To run the same by hand against a
server of your own::

    CHECKS=not_a_server_error,status_code_conformance
    CHECKS=$CHECKS,content_type_conformance,response_schema_conformance
    .venv/bin/st run http://127.0.0.1:8778/openapi.json --checks $CHECKS \\
        -H 'x-auth-token: admin' -H 'x-roles: admin,service' \\
        -H 'OpenStack-API-Version: placement latest' \\
        --max-examples 100 --generation-deterministic --workers 1
"""

from __future__ import annotations

import json
import pathlib
import subprocess
import sys
import time

import httpx
import pytest

from tests.support.servers import serving, write_conf

CHECKS = (
    "not_a_server_error",
    "status_code_conformance",
    "content_type_conformance",
    "response_schema_conformance",
)
MAX_EXAMPLES = 100
# The whole run's bound: it takes about 45 seconds on a 2-core machine
# (some 5000 requests).
TIMEOUT = 300
# Admin and service: the reshaper's policy wants the service role.
HEADERS = {
    "x-auth-token": "admin",
    "x-roles": "admin,service",
    "OpenStack-API-Version": "placement latest",
}
ST = pathlib.Path(sys.executable).with_name("st")

# The cloud, in fixed uuids so each run is the same run (mnemonics: cc a
# compute node, ee its NUMA child, 5a shared storage, aa consumers, ag an
# aggregate, 00 names nothing).
COMPUTE = "cc000001-0000-4000-8000-000000000001"
NUMA = "ee000001-0000-4000-8000-000000000001"
STORAGE = "5a000001-0000-4000-8000-000000000001"
AGGREGATE = "a9000001-0000-4000-8000-000000000001"
INSTANCE = "aa000001-0000-4000-8000-000000000001"
MIGRATION = "aa000002-0000-4000-8000-000000000001"
NOBODY = "00000000-0000-4000-8000-000000000000"
PROJECT, USER = "fuzz-project", "fuzz-user"
CUSTOM_CLASS, CUSTOM_TRAIT = "CUSTOM_FUZZ", "CUSTOM_FUZZ_GOLD"


def build_cloud(base: str) -> None:
    """The small cloud the fuzz starts from, through the API itself."""
    with httpx.Client(base_url=base, headers=HEADERS, timeout=10) as client:

        def call(method, path, body=None, expect=(200, 201, 204)):
            answer = client.request(method, path, json=body)
            assert answer.status_code in expect, (method, path, answer.text)
            return answer

        call("PUT", f"/resource_classes/{CUSTOM_CLASS}")
        call("PUT", f"/traits/{CUSTOM_TRAIT}")
        call("POST", "/resource_providers", {"name": "compute-1", "uuid": COMPUTE})
        call(
            "POST",
            "/resource_providers",
            {"name": "compute-1-numa-0", "uuid": NUMA, "parent_provider_uuid": COMPUTE},
        )
        call("POST", "/resource_providers", {"name": "storage", "uuid": STORAGE})
        inventories = {
            COMPUTE: {"MEMORY_MB": {"total": 8192}, CUSTOM_CLASS: {"total": 4}},
            NUMA: {"VCPU": {"total": 8, "allocation_ratio": 4.0}},
            STORAGE: {"DISK_GB": {"total": 1000, "reserved": 100}},
        }
        for uuid, held in inventories.items():
            call(
                "PUT",
                f"/resource_providers/{uuid}/inventories",
                {"resource_provider_generation": 0, "inventories": held},
            )
        for uuid in (COMPUTE, STORAGE):
            call(
                "PUT",
                f"/resource_providers/{uuid}/aggregates",
                {"aggregates": [AGGREGATE], "resource_provider_generation": 1},
            )
        call(
            "PUT",
            f"/resource_providers/{STORAGE}/traits",
            {"traits": ["MISC_SHARES_VIA_AGGREGATE"], "resource_provider_generation": 2},
        )
        call(
            "PUT",
            f"/resource_providers/{COMPUTE}/traits",
            {"traits": [CUSTOM_TRAIT, "HW_CPU_X86_AVX2"], "resource_provider_generation": 2},
        )
        owner = {"project_id": PROJECT, "user_id": USER, "consumer_generation": None}
        call(
            "POST",
            "/allocations",
            {
                INSTANCE: {
                    **owner,
                    "consumer_type": "INSTANCE",
                    "allocations": {
                        NUMA: {"resources": {"VCPU": 2}},
                        COMPUTE: {"resources": {"MEMORY_MB": 1024}},
                        STORAGE: {"resources": {"DISK_GB": 10}},
                    },
                },
                MIGRATION: {
                    **owner,
                    "consumer_type": "MIGRATION",
                    "allocations": {NUMA: {"resources": {"VCPU": 1}}},
                },
            },
        )


# What parameters draw from, half of the time (the other half schemathesis
# makes up values from the schema, or breaks it).
DICTIONARIES = {
    "providers": [COMPUTE, NUMA, STORAGE, NOBODY],
    "consumers": [INSTANCE, MIGRATION, NOBODY],
    "classes": ["VCPU", "MEMORY_MB", "DISK_GB", CUSTOM_CLASS],
    "names": [CUSTOM_CLASS, CUSTOM_TRAIT, "VCPU", "HW_CPU_X86_AVX2", "CUSTOM_NEW"],
    "resources": ["VCPU:1", "VCPU:2,MEMORY_MB:512", "DISK_GB:10", f"{CUSTOM_CLASS}:1"],
    "required": [
        CUSTOM_TRAIT,
        f"!{CUSTOM_TRAIT}",
        "in:HW_CPU_X86_AVX2,COMPUTE_NET_VIF_MODEL_E1000",
    ],
    "member_of": [AGGREGATE, f"in:{AGGREGATE},{NOBODY}", f"!{AGGREGATE}"],
    "include": ["inventories", "inventories,traits,aggregates,usages", "usages"],
    "consumer_uuid": [INSTANCE, f"in:{INSTANCE},{MIGRATION},{NOBODY}"],
    "provider_uuid": [NUMA, f"in:{COMPUTE},{STORAGE}"],
    "projects": [PROJECT, "other-project"],
    "trait_names": ["startswith:CUSTOM_", f"in:{CUSTOM_TRAIT},HW_CPU_X86_AVX2"],
}
BINDINGS = {
    "path.uuid": "providers",
    "path.consumer_uuid": "consumers",
    "path.resource_class": "classes",
    "path.name": "names",
    "query.resources": "resources",
    "query.required": "required",
    "query.member_of": "member_of",
    "query.in_tree": "providers",
    "query.include": "include",
    "query.consumer_uuid": "consumer_uuid",
    "query.resource_provider_uuid": "provider_uuid",
    "query.project_id": "projects",
    "query.name": "trait_names",
}


def write_config(tmp_path) -> pathlib.Path:
    """schemathesis.toml: the dictionaries and what draws from them."""
    lines = []
    for name, values in DICTIONARIES.items():
        lines += [f"[dictionaries.{name}]", f"values = {json.dumps(values)}", ""]
    lines.append("[parameters]")
    for key, name in BINDINGS.items():
        lines.append(f'"{key}" = {{ dictionary = "{name}", probability = 0.5 }}')
    path = tmp_path / "schemathesis.toml"
    path.write_text("\n".join(lines) + "\n")
    return path


def fuzz(document_url: str, config: pathlib.Path, cwd) -> subprocess.CompletedProcess:
    headers = [arg for name, value in HEADERS.items() for arg in ("-H", f"{name}: {value}")]
    return subprocess.run(
        [
            str(ST),
            "--config-file",
            str(config),
            "--no-color",
            "run",
            document_url,
            "--checks",
            ",".join(CHECKS),
            *headers,
            "--max-examples",
            str(MAX_EXAMPLES),
            "--generation-deterministic",
            "--workers",
            "1",
            "--request-timeout",
            "30",
        ],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=TIMEOUT,
    )


@pytest.mark.slow
def test_schemathesis_finds_nothing_in_the_live_service(tmp_path, sqlite_url):
    conf_path = write_conf(tmp_path, sqlite_url)
    with serving(tmp_path, conf_path) as (base, log):
        build_cloud(base)
        config = write_config(tmp_path)
        started = time.monotonic()
        result = fuzz(base + "/openapi.json", config, tmp_path)
        took = time.monotonic() - started
    report = result.stdout + result.stderr
    assert result.returncode == 0, f"schemathesis found something ({took:.0f}s):\n{report}"
    assert "Traceback" not in log.read_text(), log.read_text()
    # The run tested every operation the document has, in every phase.
    assert "Tested: " in report, report
