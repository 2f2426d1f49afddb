"""routes.py is the one declaration of every operation: the application
binds what it names, and the version checks follow what it says.

Each operation's policy rule is proven by tests/unit/test_policy.py (every
operation refuses a caller without roles with *its* rule's words), its
conditional read by gabbits/conditional-reads.yaml, its schemas by the
gabbi files and tests/unit/test_openapi.py. Here: the microversions. No
database: a request that gets past the checks reaches UntouchableDatabase.
"""

from __future__ import annotations

import uuid

import httpx
import pytest
from microversion_parse import Version

from placement_svc import app, routes
from placement_svc import microversion as mv
from tests.support.fixtures import UntouchableDatabase, make_conf

PROJECT = "6a7c0c3b1f2e4d5c8b9a0f1e2d3c4b5a"


@pytest.fixture
def http(tmp_path):
    application = app.create_app(conf_in(tmp_path), UntouchableDatabase())
    return httpx.Client(transport=httpx.WSGITransport(app=application), base_url="http://p")


def conf_in(tmp_path):
    """noauth2 and the default policy (no policy file of the machine's)."""
    return make_conf(**{"oslo_policy.policy_file": str(tmp_path / "policy.yaml")})


def call(http, method, template, version):
    url = (
        template.replace("{uuid}", str(uuid.uuid4()))
        .replace("{consumer_uuid}", str(uuid.uuid4()))
        .replace("{root_uuid}", str(uuid.uuid4()))
        .replace("{resource_class}", "VCPU")
        .replace("{name}", "CUSTOM_GOLD")
    )
    headers = {
        "x-auth-token": f"admin:{PROJECT}",
        "x-roles": "admin,service",
        "openstack-api-version": f"placement {version}",
        "content-type": "application/json",
    }
    return http.request(method, url, headers=headers, content=b"{}" if method != "GET" else None)


def gate(route, op) -> Version:
    return max(route.since or mv.BASE, op.since)


LATER = [
    (route.template, op.method, gate(route, op))
    for route, op in routes.operations()
    if gate(route, op) > mv.BASE and op.allowed_since is None
]


def before(version: Version) -> Version:
    return Version(version.major, version.minor - 1)


def test_the_later_operations_are_the_ones_upstream_and_we_added_later():
    assert len(LATER) == 23
    assert ("/allocation_candidates/explain", "GET", mv.CANDIDATES_EXPLAIN) in LATER
    assert ("/resource_provider_trees/{root_uuid}", "PUT", mv.TREE_WRITES) in LATER
    assert ("/resource_classes/{name}", "DELETE", mv.RESOURCE_CLASSES) in LATER


@pytest.mark.parametrize("template, method, since", LATER, ids=lambda v: str(v))
def test_an_operation_is_a_404_before_its_microversion_and_there_from_it(
    http, template, method, since
):
    early = call(http, method, template, before(since))
    assert early.status_code == 404, early.text
    assert f"needs microversion {since} or later" in early.json()["errors"][0]["detail"]
    there = call(http, method, template, since)
    assert there.status_code != 404, there.text


def test_a_method_of_our_own_joins_the_allow_header_at_its_microversion(http):
    early = call(http, "GET", "/allocations", before(mv.BULK_ALLOCATIONS))
    assert early.status_code == 405
    assert early.headers["allow"] == "POST"
    assert call(http, "PATCH", "/allocations", mv.BULK_ALLOCATIONS).headers["allow"] == (
        "POST, GET"
    )


def test_patch_joins_a_consumer_s_allow_header_at_1_50(http):
    early = call(http, "PATCH", "/allocations/{consumer_uuid}", before(mv.ALLOCATION_DELTAS))
    assert (early.status_code, early.headers["allow"]) == (405, "GET, PUT, DELETE")
    later = call(http, "POST", "/allocations/{consumer_uuid}", mv.ALLOCATION_DELTAS)
    assert (later.status_code, later.headers["allow"]) == (405, "GET, PUT, PATCH, DELETE")


def test_a_url_of_our_own_is_a_404_for_any_method_before_it_appears(http):
    early = before(mv.CANDIDATES_EXPLAIN)
    for method in ("GET", "PATCH", "DELETE"):
        answer = call(http, method, "/allocation_candidates/capacity", early)
        assert answer.status_code == 404, (method, answer.text)
    later = call(http, "PATCH", "/allocation_candidates/capacity", mv.CANDIDATES_EXPLAIN)
    assert (later.status_code, later.headers["allow"]) == (405, "GET")


def test_every_operation_names_a_resource_and_a_handler_the_application_has(tmp_path):
    served = app.resources(None, conf_in(tmp_path))
    for route, op in routes.operations():
        assert callable(getattr(served[route.resource], op.handler)), (route.template, op.method)


def test_each_method_of_a_url_is_declared_once():
    for route in routes.ROUTES:
        methods = [op.method for op in route.operations]
        assert len(methods) == len(set(methods)), route.template
    assert len(routes.templates()) == len(set(routes.templates()))
