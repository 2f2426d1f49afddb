"""The OpenAPI document (placement_svc/operating/openapi.py): valid OpenAPI 3.1, the
route table's operations exactly, the handlers' own request schemas, and
served as bytes by its WSGI application."""

from __future__ import annotations

import json
import pathlib

import jsonschema
import pytest
import schemathesis
from microversion_parse import Version
from schemathesis.specs.openapi import definitions

from placement_svc import errors, routes
from placement_svc import microversion as mv
from placement_svc.operating import openapi, openapi_parts
from placement_svc.schemas import (
    aggregate,
    allocation,
    allocation_candidate,
    inventory,
    provider_tree,
    reshaper,
    resource_class,
    resource_provider,
    responses,
    trait,
    usage,
)
from tests.support.fixtures import make_conf

REPO = pathlib.Path(__file__).resolve().parents[2]
NEWEST = mv.MAX_VERSION
UPSTREAM = mv.UPSTREAM_MAX_VERSION
METHODS = {"get", "head", "post", "put", "patch", "delete", "options", "trace"}
# Not in the route table: the operating URLs, described by openapi.OPERATING.
OPERATING = {
    ("/healthcheck", "GET"),
    ("/healthcheck", "HEAD"),
    ("/metrics", "GET"),
    ("/openapi.json", "GET"),
    ("/openapi.json", "HEAD"),
}


def document(newest=NEWEST):
    return openapi.document(newest)


def operations(doc) -> set[tuple[str, str]]:
    return {
        (path, method.upper())
        for path, item in doc["paths"].items()
        for method in item
        if method in METHODS
    }


def served_routes(newest) -> set[tuple[str, str]]:
    """routes.py's (template, method) pairs served at ``newest``, read from
    its own markers: a route's since, an operation's since and allowed_since."""
    return {
        (route.template, op.method)
        for route, op in routes.operations()
        if newest >= max(route.since or mv.BASE, op.since, op.allowed_since or mv.BASE)
    }


def schemas_in(value, where="$"):
    """Every JSON schema the document holds, with where it is."""
    if isinstance(value, dict):
        for key, item in value.items():
            if key == "schema":
                yield f"{where}.schema", item
            elif key == "schemas" and where == "$.components":
                for name, schema in item.items():
                    yield f"{where}.schemas.{name}", schema
            else:
                yield from schemas_in(item, f"{where}.{key}")
    elif isinstance(value, list):
        for index, item in enumerate(value):
            yield from schemas_in(item, f"{where}[{index}]")


# -- a valid OpenAPI 3.1 document ---------------------------------------------------


@pytest.mark.parametrize("newest", [UPSTREAM, NEWEST], ids=str)
def test_the_document_is_valid_openapi_3_1(newest):
    doc = json.loads(json.dumps(document(newest)))  # as served: JSON, nothing else
    assert doc["openapi"].startswith("3.1.")
    validator = jsonschema.Draft202012Validator(definitions.OPENAPI_31)
    problems = [f"{list(e.absolute_path)}: {e.message}" for e in validator.iter_errors(doc)]
    assert problems == []
    # The metaschema leaves the JSON schemas inside alone: each is checked
    # as the 2020-12 dialect OpenAPI 3.1 uses.
    for where, schema in schemas_in(doc):
        try:
            jsonschema.Draft202012Validator.check_schema(schema)
        except jsonschema.SchemaError as exc:
            pytest.fail(f"{where}: {exc.message}")


def test_schemathesis_loads_every_operation():
    loaded = schemathesis.openapi.from_dict(json.loads(json.dumps(document())))
    results = list(loaded.get_all_operations())
    assert all(result.ok() for result in results)
    assert len(results) == len(operations(document()))


def test_operation_ids_are_unique():
    ids = [
        op["operationId"]
        for item in document()["paths"].values()
        for method, op in item.items()
        if method in METHODS
    ]
    assert len(ids) == len(set(ids))


# -- the route table, exactly -------------------------------------------------------


@pytest.mark.parametrize("newest", [UPSTREAM, mv.CANDIDATES_EXPLAIN, NEWEST], ids=str)
def test_every_route_is_in_the_document_and_nothing_else(newest):
    assert operations(document(newest)) == served_routes(newest) | OPERATING


def test_the_operating_urls_are_the_ones_routes_py_lacks():
    assert {path for path, _method in OPERATING} == set(openapi_parts.OPERATING)
    assert not set(routes.templates()) & set(openapi_parts.OPERATING)


def test_versions_older_than_upstreams_newest_are_refused():
    with pytest.raises(ValueError):
        openapi.document(mv.RESHAPER)


def test_a_new_operation_is_in_the_document_with_what_its_record_says():
    extra = routes.Route(
        "/resource_providers/{uuid}/colour",
        "resource_providers",
        (routes.Operation("GET", "colour", "placement:colour", {200: None}, since=NEWEST),),
    )
    doc = openapi.document(NEWEST, (*routes.ROUTES, extra))
    colour = doc["paths"]["/resource_providers/{uuid}/colour"]["get"]
    assert colour["x-since"] == str(NEWEST)
    assert (
        colour["responses"]["404"]["description"] == f"Before microversion {NEWEST}, no such URL."
    )
    older = openapi.document(UPSTREAM, (*routes.ROUTES, extra))
    assert "/resource_providers/{uuid}/colour" not in older["paths"]


def test_own_routes_and_features_disappear_at_1_39():
    doc = document(UPSTREAM)
    assert "/allocation_candidates/explain" not in doc["paths"]
    assert "/allocation_candidates/capacity" not in doc["paths"]
    assert set(doc["paths"]["/allocations"]) == {"post"}
    show = doc["paths"]["/resource_providers/{uuid}"]["get"]
    assert [p for p in show["parameters"] if p.get("in") == "query"] == []
    listing = doc["paths"]["/resource_providers"]["get"]
    assert "include" not in {p.get("name") for p in listing["parameters"]}
    candidates = doc["paths"]["/allocation_candidates"]["get"]
    names = {p.get("name") for p in candidates["parameters"]}
    assert {"root_member_of", "isolate"}.isdisjoint(names)
    assert "root_required" in names
    # No conditional reads, no body of ours.
    for item in doc["paths"].values():
        for op in item.values():
            assert "304" not in op["responses"]
    assert "explanation" not in doc["components"]["schemas"]
    assert doc["components"]["parameters"]["microversion"]["schema"]["enum"] == [
        "placement 1.39",
        "placement latest",
    ]


def test_own_routes_are_there_from_their_version():
    doc = document(NEWEST)
    explain = doc["paths"]["/allocation_candidates/explain"]["get"]
    assert "404" in explain["responses"]  # before 1.44
    assert set(explain["responses"]["200"]["content"]) == {"application/json", "text/plain"}
    bulk = doc["paths"]["/allocations"]["get"]
    assert "405" in bulk["responses"]  # before 1.46, the 405 it always was
    assert doc["info"]["version"] == str(NEWEST)


# The conditional reads (a PUT declared so, a whole tree's, carries the ETag
# of its answer and is never a 304).
ETAGS = {
    (route.template, op.method)
    for route, op in routes.operations()
    if op.etag and op.method == "GET"
}


@pytest.mark.parametrize("newest", [mv.BULK_ALLOCATIONS, NEWEST], ids=str)
def test_conditional_reads_have_their_304_from_1_47(newest):
    doc = document(newest)
    for template, item in doc["paths"].items():
        for method, op in item.items():
            conditional_read = (template, method.upper()) in ETAGS
            expected = conditional_read and newest >= mv.CONDITIONAL_READS
            assert ("304" in op["responses"]) == expected, (method, template)
            names = {p.get("name") for p in op["parameters"] if "name" in p} if expected else set()
            if expected:
                assert "If-None-Match" in names
                assert "ETag" in op["responses"]["200"]["headers"]


def test_every_api_operation_needs_a_token_but_the_version_document():
    doc = document()
    assert doc["security"] == [{"token": []}]
    assert doc["components"]["securitySchemes"]["token"] == {
        **doc["components"]["securitySchemes"]["token"],
        "type": "apiKey",
        "in": "header",
        "name": "X-Auth-Token",
    }
    for template, method in served_routes(NEWEST):
        op = doc["paths"][template][method.lower()]
        if template == "/":
            assert op["security"] == []
            assert "401" not in op["responses"]
        else:
            assert "security" not in op
            assert {"401", "403", "400", "406"} <= set(op["responses"]), (method, template)
            assert "Policy: `placement:" in op["description"]
        assert op["parameters"][0] == {"$ref": "#/components/parameters/microversion"}


def test_errors_are_described_in_the_error_format():
    """All but the healthcheck's 503, which is oslo.middleware's answer."""
    doc = document()
    for template, item in doc["paths"].items():
        if template == "/healthcheck":
            continue
        for op in item.values():
            for status, answer in op["responses"].items():
                if int(status) < 400:
                    continue
                schema = answer["content"]["application/json"]["schema"]
                wanted = "unauthorized" if status == "401" else "error"
                assert schema == {"$ref": f"#/components/schemas/{wanted}"}


def test_the_error_schema_takes_the_bodies_errors_renders():
    bodies = responses.for_version(NEWEST)
    for with_code in (False, True):
        bodies.error.check(errors.error_body(errors.NotFound("gone"), "req-1", with_code))
    bodies.unauthorized.check(errors.webob_json_body(errors.AuthenticationRequired("no token")))
    with pytest.raises(jsonschema.ValidationError):
        bodies.error.check({"errors": [{"status": 404, "title": "Not Found"}]})


# -- the handlers' own schemas -------------------------------------------------------


def request_body(doc, template, method):
    return doc["paths"][template][method]["requestBody"]["content"]["application/json"]["schema"]


def query(doc, template, method="get"):
    return {
        p["name"]: p for p in doc["paths"][template][method]["parameters"] if p.get("in") == "query"
    }


@pytest.mark.parametrize("newest", [UPSTREAM, NEWEST], ids=str)
def test_request_bodies_are_the_schemas_the_handlers_validate_with(newest):
    doc = document(newest)
    rps, invs = resource_provider.for_version(newest), inventory.for_version(newest)
    expected = {
        ("/resource_classes", "post"): resource_class.for_version(newest),
        ("/resource_providers", "post"): rps.create,
        ("/resource_providers/{uuid}", "put"): rps.update,
        ("/resource_providers/{uuid}/inventories", "post"): invs.create,
        ("/resource_providers/{uuid}/inventories", "put"): invs.replace_all,
        ("/resource_providers/{uuid}/inventories/{resource_class}", "put"): invs.update_one,
        ("/resource_providers/{uuid}/aggregates", "put"): aggregate.for_version(newest),
        ("/resource_providers/{uuid}/traits", "put"): trait.for_version(newest).provider_traits,
        ("/allocations", "post"): allocation.for_version(newest).post,
        ("/allocations/{consumer_uuid}", "put"): allocation.for_version(newest).put,
        ("/reshaper", "post"): reshaper.for_version(newest),
    }
    if newest >= mv.TREE_WRITES:
        expected[("/resource_provider_trees/{root_uuid}", "put")] = provider_tree.TREE
    if newest >= mv.ALLOCATION_DELTAS:
        expected[("/allocations/{consumer_uuid}", "patch")] = allocation.PATCH_V1_50
    if newest >= mv.HOLDS:
        expected[("/allocations/{consumer_uuid}/confirm", "post")] = allocation.CONFIRM_V1_51
    for (template, method), schema in expected.items():
        assert request_body(doc, template, method) is schema, (method, template)
    with_body = {
        (template, method)
        for template, item in doc["paths"].items()
        for method, op in item.items()
        if "requestBody" in op
    }
    assert with_body == set(expected)


@pytest.mark.parametrize("newest", [UPSTREAM, NEWEST], ids=str)
def test_query_parameters_are_the_keys_of_the_handlers_query_schemas(newest):
    doc = document(newest)
    expected = {
        "/resource_providers": resource_provider.for_version(newest).list_query,
        "/traits": trait.for_version(newest).list_query,
        "/usages": usage.for_version(newest),
        "/allocation_candidates": allocation_candidate.query_schema(newest),
    }
    if newest >= mv.CANDIDATES_EXPLAIN:
        expected["/allocation_candidates/explain"] = allocation_candidate.explain_schema(newest)
        expected["/allocation_candidates/capacity"] = allocation_candidate.query_schema(newest)
    if newest >= mv.BULK_ALLOCATIONS:
        expected["/allocations"] = allocation.LIST_QUERY_V1_46
    if newest >= mv.HOLDS:
        expected["/allocations"] = allocation.LIST_QUERY_V1_51
    for template, schema in expected.items():
        params = query(doc, template)
        for name in schema["properties"]:
            assert params[name]["required"] == (name in schema.get("required", ())), name
        assert set(params) == set(schema["properties"]) | {
            p[1:].split("(", 1)[0] for p in schema.get("patternProperties", {})
        }


@pytest.mark.parametrize("newest", [UPSTREAM, NEWEST], ids=str)
def test_every_query_parameter_has_a_type_a_description_and_a_first_version(newest):
    for template, item in document(newest)["paths"].items():
        for method, op in item.items():
            for param in op.get("parameters", ()):  # the operating URLs have none
                if param.get("in") != "query":
                    continue
                where = (method, template, param["name"])
                assert param["description"].strip(), where
                assert param["schema"].get("type") in ("string", "integer"), where
                assert Version(*map(int, param["x-since"].split("."))) <= newest, where


def test_every_parameter_of_every_version_has_its_words():
    """A parameter added to a query schema without words in its family's
    QUERY_WORDS stops the document being built (a KeyError): this finds it
    at any version, not only the newest."""
    for _route, op in routes.operations():
        for minor in range(0, NEWEST.minor + 1):
            for name in openapi.query_keys(op, Version(1, minor)):
                assert name in op.words, (op.method, _route.template, name, minor)


def test_each_parameter_says_the_microversion_it_appears_at():
    doc = document(NEWEST)
    providers = query(doc, "/resource_providers")
    assert {name: p["x-since"] for name, p in providers.items()} == {
        "name": "1.0",
        "uuid": "1.0",
        "member_of": "1.3",
        "resources": "1.4",
        "in_tree": "1.14",
        "required": "1.18",
        "include": "1.45",
    }
    candidates = query(doc, "/allocation_candidates")
    assert candidates["limit"]["x-since"] == "1.16"
    assert candidates["limit"]["schema"] == {"type": "integer", "minimum": 1}
    assert candidates["root_member_of"]["x-since"] == "1.40"
    assert candidates["root_member_of"]["description"].endswith("From microversion 1.40.")
    assert candidates["resources"]["x-since"] == "1.10"
    assert query(doc, "/allocations")["in_tree"]["x-since"] == "1.46"


def test_the_committed_document_is_what_the_code_makes():
    """docs/openapi.json, as etc/placement.conf.sample: `make genopenapi`
    writes it; a change to routes.py or a schema without it fails here."""
    committed = (REPO / "docs" / "openapi.json").read_text(encoding="utf-8")
    assert committed == openapi.committed(), "docs/openapi.json is stale: run make genopenapi"


def test_a_provider_read_takes_include_only_from_1_45():
    doc = document(NEWEST)
    params = query(doc, "/resource_providers/{uuid}")
    assert list(params) == ["include"]
    assert params["include"]["x-since"] == "1.45"
    assert params["include"]["description"].startswith("Embed the providers' inventories")


def test_path_names_the_handlers_check_use_their_schemas():
    doc = document(NEWEST)

    def path_schema(template, method):
        (param,) = [
            p for p in doc["paths"][template][method]["parameters"] if p.get("in") == "path"
        ]
        return param["schema"]

    assert path_schema("/traits/{name}", "put") is trait.for_version(NEWEST).custom_trait
    rc_name = resource_class.for_version(NEWEST)["properties"]["name"]
    assert path_schema("/resource_classes/{name}", "put") is rc_name


def test_response_bodies_are_the_response_schemas_of_the_version():
    doc = document(NEWEST)
    bodies = responses.for_version(NEWEST)
    for name, schema in doc["components"]["schemas"].items():
        assert schema is getattr(bodies, name)
    show = doc["paths"]["/resource_providers/{uuid}"]["get"]["responses"]["200"]
    assert show["content"]["application/json"]["schema"] == {
        "$ref": "#/components/schemas/resource_provider"
    }


# -- the WSGI application -----------------------------------------------------------


def call(application, method="GET", script_name=""):
    answer = {}

    def start_response(status, headers, exc_info=None):
        answer["status"] = status
        answer["headers"] = dict(headers)

    environ = {"REQUEST_METHOD": method, "PATH_INFO": openapi.PATH, "SCRIPT_NAME": script_name}
    answer["body"] = b"".join(application(environ, start_response))
    return answer


def test_the_application_serves_the_document_as_json():
    application = openapi.Application(make_conf())
    answer = call(application)
    assert answer["status"] == "200 OK"
    assert answer["headers"]["Content-Type"] == "application/json"
    assert answer["headers"]["Content-Length"] == str(len(answer["body"]))
    assert json.loads(answer["body"]) == json.loads(json.dumps(document()))
    # Built once: the same bytes every time.
    assert call(application)["body"] is answer["body"]


def test_head_has_the_headers_and_no_body():
    application = openapi.Application(make_conf())
    answer = call(application, "HEAD")
    assert answer["status"] == "200 OK"
    assert answer["body"] == b""
    assert int(answer["headers"]["Content-Length"]) == len(call(application)["body"])


@pytest.mark.parametrize("method", ["POST", "PUT", "DELETE", "PATCH", "OPTIONS"])
def test_other_methods_are_405_in_the_error_format(method):
    answer = call(openapi.Application(make_conf()), method)
    assert answer["status"] == "405 Method Not Allowed"
    assert answer["headers"]["Allow"] == "GET, HEAD"
    body = json.loads(answer["body"])
    responses.for_version(NEWEST).error.check(body)
    assert body["errors"][0]["status"] == 405
    assert f"The method {method} is not allowed" in body["errors"][0]["detail"]


def test_under_a_prefix_the_servers_url_is_the_prefix():
    application = openapi.Application(make_conf())
    assert json.loads(call(application)["body"])["servers"] == [{"url": "/"}]
    served = json.loads(call(application, script_name="/placement")["body"])
    assert served["servers"] == [{"url": "/placement"}]


def test_the_document_follows_max_microversion():
    capped = openapi.Application(make_conf(**{"api.max_microversion": "1.39"}))
    doc = json.loads(call(capped)["body"])
    assert doc["info"]["version"] == "1.39"
    assert "/allocation_candidates/explain" not in doc["paths"]
