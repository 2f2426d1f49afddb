"""GET /openapi.json: the OpenAPI 3.1 document of the whole API at the newest
microversion served, generated, never kept by hand beside the code.

What comes from where:

* the URLs, their methods and the microversions they appear at: the route
  table (``app.route_table``, handed in: this module cannot import app.py,
  which mounts it), its ``SINCE`` key and ``(handler, feature)`` entries;
* request bodies and query strings: the very schemas the handlers validate
  with (``placement_svc/schemas``), picked at the document's version;
* response bodies: ``schemas/responses.py``, per version;
* each operation's summary and policy: its rule in ``placement_svc/policies``;
* the conditional reads (1.47): ``conditional.TEMPLATES``.

What only this module says, in ``OPERATIONS``: for each URL and method, which
of those schemas it takes and answers, and the errors particular to it (the
ones every request can get are added to all). An operation the route table
has and this table lacks stops the document from being built, and
``tests/unit/test_openapi.py`` checks the two have the same operations, so
neither can drift. ``tests/functional/test_schemathesis.py`` fuzzes a live
service from the document served.

The service's operating URLs (``/healthcheck``, ``/metrics`` and this one)
are not in the route table; ``OPERATING`` describes them.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field

from microversion_parse import Version

from placement_svc import errors, policies
from placement_svc import microversion as mv
from placement_svc.http import conditional
from placement_svc.http.middleware import ENV_REQUEST_ID
from placement_svc.schemas import (
    aggregate,
    allocation,
    allocation_candidate,
    inventory,
    reshaper,
    resource_class,
    resource_provider,
    responses,
    trait,
    usage,
)
from placement_svc.schemas.common import Schema

PATH = "/openapi.json"
OPENAPI_VERSION = "3.1.0"
JSON = "application/json"

# In the route table: a URL of placement-svc's own (app.SINCE, repeated here
# since app.py cannot be imported from here).
SINCE = "since"

Routes = Iterable[tuple[str, Mapping]]
SchemaOf = Callable[[Version], Schema]


@dataclass(frozen=True)
class Operation:
    """What one method of one URL takes and answers, beyond what the route
    table and every request have.

    ``ok``: the success statuses, each with the name of its body in
    ``responses.Bodies`` (None: no body). ``errors``: the errors particular to
    the operation, each with why. ``body``, ``query``: the request schemas,
    by version; ``query_keys``: the keys of ``query`` the handler reads, where
    not all. ``path``: a path parameter's schema where the handler checks
    one. ``since``: the microversion the handler itself requires (404
    before). ``location``: its successes carry a Location header.
    """

    ok: Mapping[int, str | None]
    errors: Mapping[int, str] = field(default_factory=dict)
    body: SchemaOf | None = None
    query: SchemaOf | None = None
    path: Mapping[str, Callable[[Version], dict]] = field(default_factory=dict)
    query_keys: tuple[str, ...] | None = None
    since: Version = mv.BASE
    location: bool = False
    notes: str = ""


NO_PROVIDER = "No resource provider has the uuid."
PROVIDER_CONFLICT = (
    "The resource_provider_generation given is not the provider's (placement.concurrent_update)."
)
INVALID_BODY = "The body does not validate against its schema, or breaks a rule of the data."
CANDIDATES_400 = (
    "A parameter is unknown at this microversion or badly formed (each names what is wrong)."
)

# Every method of every URL of the route table. The template and method
# must be the route table's.
# explain and capacity answer JSON or text.
JSON_OR_TEXT_406 = "The Accept header takes neither application/json nor text/plain."

OPERATIONS: dict[tuple[str, str], Operation] = {
    ("/", "GET"): Operation(
        ok={200: "version_document"},
        notes="The version document; no token needed.",
    ),
    ("/resource_classes", "GET"): Operation(
        ok={200: "resource_classes"}, since=mv.RESOURCE_CLASSES
    ),
    ("/resource_classes", "POST"): Operation(
        ok={201: None},
        errors={
            400: INVALID_BODY,
            409: "A resource class of that name exists.",
        },
        body=resource_class.for_version,
        since=mv.RESOURCE_CLASSES,
        location=True,
    ),
    ("/resource_classes/{name}", "GET"): Operation(
        ok={200: "resource_class"},
        errors={404: "No resource class has the name."},
        since=mv.RESOURCE_CLASSES,
    ),
    ("/resource_classes/{name}", "PUT"): Operation(
        ok={201: None, 204: None},
        errors={
            400: "The name is not a custom resource class name (CUSTOM_ and A-Z, 0-9, _).",
            409: "A resource class was created under the name meanwhile.",
        },
        path={"name": lambda v: resource_class.for_version(v)["properties"]["name"]},
        since=mv.RESOURCE_CLASSES,
        location=True,
        notes="Creates the custom resource class (201), or confirms it exists (204). "
        "Before 1.7 (upstream's history), a body renamed it.",
    ),
    ("/resource_classes/{name}", "DELETE"): Operation(
        ok={204: None},
        errors={
            400: "A standard resource class cannot be deleted.",
            404: "No resource class has the name.",
            409: "A provider has inventory of the class.",
        },
        since=mv.RESOURCE_CLASSES,
    ),
    ("/resource_providers", "GET"): Operation(
        ok={200: "resource_providers"},
        errors={400: CANDIDATES_400},
        query=lambda v: resource_provider.for_version(v).list_query,
    ),
    ("/resource_providers", "POST"): Operation(
        ok={200: "resource_provider"},
        errors={
            400: INVALID_BODY,
            409: "A provider with the uuid or name exists (placement.duplicate_name).",
        },
        body=lambda v: resource_provider.for_version(v).create,
        location=True,
    ),
    ("/resource_providers/{uuid}", "GET"): Operation(
        ok={200: "resource_provider"},
        errors={400: "include= names something else.", 404: NO_PROVIDER},
        query=lambda v: resource_provider.for_version(v).list_query,
        query_keys=("include",),
    ),
    ("/resource_providers/{uuid}", "PUT"): Operation(
        ok={200: "resource_provider"},
        errors={
            400: INVALID_BODY,
            404: NO_PROVIDER,
            409: "Another provider has the name (placement.duplicate_name).",
        },
        body=lambda v: resource_provider.for_version(v).update,
    ),
    ("/resource_providers/{uuid}", "DELETE"): Operation(
        ok={204: None},
        errors={
            404: NO_PROVIDER,
            409: "The provider has allocations or child providers.",
        },
    ),
    ("/resource_providers/{uuid}/inventories", "GET"): Operation(
        ok={200: "inventories"}, errors={404: NO_PROVIDER}
    ),
    ("/resource_providers/{uuid}/inventories", "POST"): Operation(
        ok={201: "inventory"},
        errors={
            400: INVALID_BODY,
            404: NO_PROVIDER,
            409: "The provider has inventory of the class, or changed meanwhile.",
        },
        body=lambda v: inventory.for_version(v).create,
        location=True,
    ),
    ("/resource_providers/{uuid}/inventories", "PUT"): Operation(
        ok={200: "inventories"},
        errors={
            400: INVALID_BODY,
            404: NO_PROVIDER,
            409: PROVIDER_CONFLICT + " Or allocations hold a class the body leaves out.",
        },
        body=lambda v: inventory.for_version(v).replace_all,
    ),
    ("/resource_providers/{uuid}/inventories", "DELETE"): Operation(
        ok={204: None},
        errors={
            404: NO_PROVIDER,
            405: "Before microversion 1.5.",
            409: "Allocations hold some of the inventory, or it changed meanwhile.",
        },
    ),
    ("/resource_providers/{uuid}/inventories/{resource_class}", "GET"): Operation(
        ok={200: "inventory"},
        errors={404: "No such provider, or it has no inventory of the class."},
    ),
    ("/resource_providers/{uuid}/inventories/{resource_class}", "PUT"): Operation(
        ok={200: "inventory"},
        errors={
            400: INVALID_BODY + " Or the provider has no inventory of the class.",
            404: "No such provider or no such resource class.",
            409: PROVIDER_CONFLICT + " Or allocations exceed the new capacity.",
        },
        body=lambda v: inventory.for_version(v).update_one,
    ),
    ("/resource_providers/{uuid}/inventories/{resource_class}", "DELETE"): Operation(
        ok={204: None},
        errors={
            404: "No such provider, or it has no inventory of the class.",
            409: "Allocations hold the inventory, or it changed meanwhile.",
        },
    ),
    ("/resource_providers/{uuid}/usages", "GET"): Operation(
        ok={200: "provider_usages"}, errors={404: NO_PROVIDER}
    ),
    ("/resource_providers/{uuid}/aggregates", "GET"): Operation(
        ok={200: "aggregates"}, errors={404: NO_PROVIDER}, since=mv.AGGREGATES
    ),
    ("/resource_providers/{uuid}/aggregates", "PUT"): Operation(
        ok={200: "aggregates"},
        errors={400: INVALID_BODY, 404: NO_PROVIDER, 409: PROVIDER_CONFLICT},
        body=aggregate.for_version,
        since=mv.AGGREGATES,
    ),
    ("/resource_providers/{uuid}/allocations", "GET"): Operation(
        ok={200: "provider_allocations"}, errors={404: NO_PROVIDER}
    ),
    ("/resource_providers/{uuid}/traits", "GET"): Operation(
        ok={200: "provider_traits"}, errors={404: NO_PROVIDER}, since=mv.TRAITS
    ),
    ("/resource_providers/{uuid}/traits", "PUT"): Operation(
        ok={200: "provider_traits"},
        errors={
            400: INVALID_BODY + " Or a trait does not exist.",
            404: NO_PROVIDER,
            409: PROVIDER_CONFLICT,
        },
        body=lambda v: trait.for_version(v).provider_traits,
        since=mv.TRAITS,
    ),
    ("/resource_providers/{uuid}/traits", "DELETE"): Operation(
        ok={204: None},
        errors={404: NO_PROVIDER, 409: "The provider changed meanwhile."},
        since=mv.TRAITS,
    ),
    ("/allocations", "POST"): Operation(
        ok={204: None},
        errors={
            400: INVALID_BODY + " Or a provider or resource class does not exist.",
            409: "A consumer generation is not the consumer's, the capacity or an "
            "inventory's rules do not allow the amounts, or the data changed meanwhile.",
        },
        body=lambda v: allocation.for_version(v).post,
        since=mv.POST_ALLOCATIONS,
    ),
    ("/allocations", "GET"): Operation(
        ok={200: "allocations"},
        errors={
            400: "Not exactly one of consumer_uuid, resource_provider_uuid and in_tree, "
            "or not uuids, or more than 1000 of them.",
        },
        query=lambda _v: allocation.LIST_QUERY_V1_46,
        notes="Several consumers' allocations in one read (placement-svc's own, 1.46): "
        "consumer_uuid=<uuid> or in:<uuid>,<uuid>,...; resource_provider_uuid= likewise "
        "(every consumer holding allocations against the providers); in_tree=<uuid>.",
    ),
    ("/allocations/{consumer_uuid}", "GET"): Operation(
        ok={200: "consumer_allocations"},
        notes='Never a 404: a consumer without allocations has {"allocations": {}}.',
    ),
    ("/allocations/{consumer_uuid}", "PUT"): Operation(
        ok={204: None},
        errors={
            400: INVALID_BODY + " Or the consumer uuid is not a uuid, or a provider or "
            "resource class does not exist.",
            409: "The consumer generation is not the consumer's, the capacity or an "
            "inventory's rules do not allow the amounts, or the data changed meanwhile.",
        },
        body=lambda v: allocation.for_version(v).put,
    ),
    ("/allocations/{consumer_uuid}", "DELETE"): Operation(
        ok={204: None},
        errors={
            404: "The consumer has no allocations.",
            409: "The data changed meanwhile.",
        },
    ),
    ("/allocation_candidates", "GET"): Operation(
        ok={200: "allocation_candidates"},
        errors={400: CANDIDATES_400},
        query=allocation_candidate.query_schema,
        since=mv.ALLOCATION_CANDIDATES,
        notes="Request groups: resources, required, member_of and in_tree take a "
        "suffix of 1 to 64 characters of A-Z, a-z, 0-9, _ and - (resources1, "
        "required_NET, ...), one group per suffix.",
    ),
    ("/allocation_candidates/explain", "GET"): Operation(
        ok={200: "explanation"},
        errors={
            400: CANDIDATES_400,
            406: JSON_OR_TEXT_406,
        },
        query=allocation_candidate.explain_schema,
        notes="The same query as GET /allocation_candidates, and near_misses= (at most "
        "50). text/plain for a client that prefers it.",
    ),
    ("/allocation_candidates/capacity", "GET"): Operation(
        ok={200: "capacity"},
        errors={
            400: CANDIDATES_400,
            406: JSON_OR_TEXT_406,
        },
        query=allocation_candidate.query_schema,
        notes="The same query as GET /allocation_candidates. text/plain for a client "
        "that prefers it.",
    ),
    ("/traits", "GET"): Operation(
        ok={200: "traits"},
        errors={
            400: "name= is not in:<names> or startswith:<prefix>, or associated= "
            "is not true or false."
        },
        query=lambda v: trait.for_version(v).list_query,
        since=mv.TRAITS,
    ),
    ("/traits/{name}", "GET"): Operation(
        ok={204: None}, errors={404: "No trait has the name."}, since=mv.TRAITS
    ),
    ("/traits/{name}", "PUT"): Operation(
        ok={201: None, 204: None},
        errors={400: "The name is not a custom trait name (CUSTOM_ and A-Z, 0-9, _)."},
        path={"name": lambda v: trait.for_version(v).custom_trait},
        since=mv.TRAITS,
        location=True,
        notes="Creates the custom trait (201), or confirms it exists (204).",
    ),
    ("/traits/{name}", "DELETE"): Operation(
        ok={204: None},
        errors={
            400: "A standard trait cannot be deleted.",
            404: "No trait has the name.",
            409: "A provider has the trait.",
        },
        since=mv.TRAITS,
    ),
    ("/usages", "GET"): Operation(
        ok={200: "usages"},
        errors={400: "No project_id, or a parameter is unknown or badly formed."},
        query=usage.for_version,
        since=mv.USAGES,
    ),
    ("/reshaper", "POST"): Operation(
        ok={204: None},
        errors={
            400: INVALID_BODY + " Or a provider or resource class does not exist.",
            409: "A generation is not the provider's or consumer's, allocations hold "
            "inventory the body takes away, or the data changed meanwhile.",
        },
        body=reshaper.for_version,
        since=mv.RESHAPER,
    ),
}

# Path parameters, by name: what a URL's {name} holds.
PATH_PARAMETERS = {
    "uuid": ({"type": "string"}, "The resource provider's uuid (anything else: 404)."),
    "name": ({"type": "string"}, "The name."),
    "resource_class": ({"type": "string"}, "The resource class name."),
    "consumer_uuid": ({"type": "string"}, "The consumer's uuid."),
}


# -- the document ---------------------------------------------------------------


def document(newest: Version, routes: Routes) -> dict:
    """The OpenAPI 3.1 document of ``routes`` (the route table) served at
    ``newest``: the URLs and methods there at that version, each with what it
    takes and answers at that version. ``newest`` is 1.39 or later, as [api]
    max_microversion allows: OPERATIONS describes those versions."""
    if newest < mv.UPSTREAM_MAX_VERSION:
        raise ValueError(f"the document describes 1.39 and later, not {newest}")
    bodies = responses.for_version(newest)
    rules = _policy_rules()
    paths: dict[str, dict] = {}
    for template, handlers in routes:
        handlers = dict(handlers)
        since = handlers.pop(SINCE, None)
        if since is not None and newest < since:
            continue
        item = {}
        for method, entry in handlers.items():
            method_since = entry[1] if isinstance(entry, tuple) else None
            operation = OPERATIONS.get((template, method))
            if operation is None:
                raise LookupError(f"{method} {template} is in the route table, not in OPERATIONS")
            gate = max(operation.since, since or mv.BASE, method_since or mv.BASE)
            if newest < gate:
                continue
            rule = rules.get((method, template))
            item[method.lower()] = _operation(
                template, method, operation, newest, rule, gate, method_since
            )
        if item:
            paths[template] = item
    for template, item in OPERATING.items():
        paths[template] = {
            method: _operating(template, method.upper(), op, rules) for method, op in item.items()
        }
    used = _referenced(paths)
    return {
        "openapi": OPENAPI_VERSION,
        "info": {
            "title": "Placement API (placement-svc)",
            "version": str(newest),
            "description": _INFO.format(newest=newest),
            "license": {"name": "Apache-2.0", "identifier": "Apache-2.0"},
        },
        "servers": [{"url": "/"}],
        "security": [{"token": []}],
        "paths": paths,
        "components": {
            "schemas": {name: schema for name, schema in bodies._asdict().items() if name in used},
            "securitySchemes": {
                "token": {
                    "type": "apiKey",
                    "in": "header",
                    "name": "X-Auth-Token",
                    "description": "A keystone token; with [api] auth_strategy = noauth2, "
                    "the caller as user or user:project (admin is an administrator).",
                }
            },
            "parameters": {"microversion": _microversion_parameter(newest)},
            "headers": HEADERS,
        },
    }


_SCHEMA_REF = "#/components/schemas/"


def _referenced(value) -> set[str]:
    """The names of the component schemas ``value`` refers to."""
    if isinstance(value, dict):
        ref = value.get("$ref")
        found = (
            {ref[len(_SCHEMA_REF) :]}
            if isinstance(ref, str) and ref.startswith(_SCHEMA_REF)
            else set()
        )
        for item in value.values():
            found |= _referenced(item)
        return found
    if isinstance(value, list):
        return set().union(*(_referenced(item) for item in value)) if value else set()
    return set()


_INFO = """\
OpenStack Placement, microversions 1.0 to 1.39 as upstream, 1.40 and later \
placement-svc's own (docs/microversions.rst). This document describes the API \
at microversion {newest}, the newest this service serves: send \
`OpenStack-API-Version: placement {newest}` (or `placement latest`). A request \
without the header is served at 1.0; at an older version a URL, parameter or \
body may not be there yet or have an older form (upstream's api-ref and version \
history describe them).

Errors are `{{"errors": [{{"status", "title", "detail", "request_id", "code"}}]}}` \
(code from 1.23), or webob's HTML or plain-text page for a client that prefers \
one. A method a URL does not list is a 405 whose Allow header names those it \
does.

Generated from the route table and the JSON schemas the handlers validate with.
"""


def _microversion_parameter(newest) -> dict:
    return {
        "name": mv.HEADER,
        "in": "header",
        "required": False,
        "description": f"The microversion: this document describes {newest}. Without "
        "the header, 1.0; a malformed value is a 400, a version not served a 406.",
        "schema": {"type": "string", "enum": [f"placement {newest}", "placement latest"]},
    }


HEADERS = {
    "OpenStack-API-Version": {
        "description": "The microversion the request was served at.",
        "schema": {"type": "string"},
    },
    "x-openstack-request-id": {
        "description": "The request's id, as the log line and error bodies carry it.",
        "schema": {"type": "string"},
    },
    "Last-Modified": {
        "description": "From 1.15: when what the answer shows last changed (or now).",
        "schema": {"type": "string"},
    },
    "Cache-Control": {"description": "From 1.15: no-cache.", "schema": {"type": "string"}},
    "ETag": {
        "description": "From 1.47: the answer's strong validator, for If-None-Match.",
        "schema": {"type": "string"},
    },
    "Location": {"description": "The URL of what was created.", "schema": {"type": "string"}},
    "Allow": {"description": "The methods the URL allows.", "schema": {"type": "string"}},
}


def _header(name: str) -> dict:
    return {"$ref": f"#/components/headers/{name}"}


def _policy_rules() -> dict[tuple[str, str], object]:
    """(method, path) -> the policy rule that guards it."""
    return {
        (op["method"], op["path"]): rule
        for rule in policies.list_rules()
        for op in getattr(rule, "operations", None) or ()
    }


def _operation(template, method, op: Operation, newest, rule, gate, method_since) -> dict:
    conditional_read = (
        method == "GET" and template in conditional.TEMPLATES and newest >= mv.CONDITIONAL_READS
    )
    authenticated = template != "/"
    parameters = [{"$ref": "#/components/parameters/microversion"}]
    parameters += _path_parameters(template, op, newest)
    parameters += _query_parameters(template, op, newest)
    if conditional_read:
        parameters.append(
            {
                "name": "If-None-Match",
                "in": "header",
                "required": False,
                "description": "From 1.47: an ETag of an earlier answer; the same answer "
                "is a 304 without a body.",
                "schema": {"type": "string"},
            }
        )
    answers: dict[str, dict] = {}
    for status, body_name in op.ok.items():
        answers[str(status)] = _success(status, body_name, op, template, conditional_read)
    if conditional_read:
        answers["304"] = {
            "description": "Not Modified: If-None-Match names the answer's ETag (1.47).",
            "headers": {"ETag": _header("ETag"), **_common_headers()},
        }
    for status, why in _errors(template, method, op, newest, authenticated, gate, method_since):
        answers[str(status)] = _error(status, why)
    operation: dict = {
        "operationId": _operation_id(method, template),
        "summary": rule.description if rule is not None else "The version document.",
        "tags": [_tag(template)],
        "parameters": parameters,
        "responses": dict(sorted(answers.items())),
    }
    notes = [op.notes] if op.notes else []
    if rule is not None:
        notes.append(f"Policy: `{rule.name}`.")
    if gate > mv.BASE:
        notes.append(f"From microversion {gate}.")
    if notes:
        operation["description"] = " ".join(notes)
    if not authenticated:
        operation["security"] = []
    body = op.body(newest) if op.body is not None else None
    if body is not None:
        operation["requestBody"] = {"required": True, "content": {JSON: {"schema": body}}}
    return operation


def _success(status, body_name, op: Operation, template, conditional_read) -> dict:
    headers = _common_headers()
    if op.location:
        headers["Location"] = _header("Location")
    answer: dict = {"description": _STATUS_WORDS.get(status, "OK")}
    if body_name is not None:
        headers["Last-Modified"] = _header("Last-Modified")
        headers["Cache-Control"] = _header("Cache-Control")
        if conditional_read:
            headers["ETag"] = _header("ETag")
        ref = {"$ref": _SCHEMA_REF + body_name}
        answer["content"] = {JSON: {"schema": ref}}
        if body_name in ("explanation", "capacity"):
            answer["content"]["text/plain"] = {
                "schema": {"type": "string", "description": "The same, for people to read."}
            }
    elif template.startswith("/traits/"):
        headers["Last-Modified"] = _header("Last-Modified")
        headers["Cache-Control"] = _header("Cache-Control")
    answer["headers"] = headers
    return answer


_STATUS_WORDS = {200: "OK", 201: "Created", 204: "No Content (done, or already so)"}


def _common_headers() -> dict:
    return {
        "OpenStack-API-Version": _header("OpenStack-API-Version"),
        "x-openstack-request-id": _header("x-openstack-request-id"),
    }


def _errors(template, method, op: Operation, newest, authenticated, gate, method_since):
    """(status, why) for every error the operation can answer, in status order."""
    found: dict[int, str] = {
        400: "The OpenStack-API-Version header is malformed; or a Content-Length that "
        "is not a number, or a body without a Content-Type.",
        406: "The microversion asked for is not served (the body names the range).",
        414: "The URL is longer than 40960 characters.",
    }
    if authenticated:
        found[401] = "No credentials (no X-Auth-Token)."
        found[403] = "The caller's roles do not satisfy the operation's policy."
        found[503] = "The database is busy or unreachable; retry."
        if method == "GET":
            found[406] += " Or the Accept header does not take application/json."
    if op.body is not None:
        found[413] = "The body is larger than 8 MiB."
        found[415] = "The body is not application/json."
    if gate > mv.BASE:
        found[404] = f"Before microversion {gate}, no such URL."
    if method_since is not None:
        found[405] = f"Before microversion {method_since}, the URL has no {method}."
    for status, why in op.errors.items():
        found[status] = f"{found[status]} {why}" if status in found else why
    return sorted(found.items())


def _error(status: int, why: str) -> dict:
    schema = "unauthorized" if status == 401 else "error"
    headers = {"x-openstack-request-id": _header("x-openstack-request-id")}
    if status == 405:
        headers["Allow"] = _header("Allow")
    return {
        "description": why,
        "headers": headers,
        "content": {
            JSON: {"schema": {"$ref": _SCHEMA_REF + schema}},
            # webob's pages, for a client that prefers HTML or takes neither.
            "text/html": {"schema": {"type": "string"}},
            "text/plain": {"schema": {"type": "string"}},
        },
    }


def _path_parameters(template, op: Operation, newest) -> list[dict]:
    found = []
    for part in template.split("/"):
        if part.startswith("{") and part.endswith("}"):
            name = part[1:-1]
            schema, why = PATH_PARAMETERS[name]
            if name in op.path:
                schema = op.path[name](newest)
            found.append(
                {"name": name, "in": "path", "required": True, "description": why, "schema": schema}
            )
    return found


def _query_parameters(template, op: Operation, newest) -> list[dict]:
    """One parameter per key of the query schema; a request group's
    parameters (patternProperties) under their unsuffixed name."""
    schema = op.query(newest) if op.query is not None else None
    if schema is None:
        return []
    properties = dict(schema.get("properties", {}))
    if op.query_keys is not None:
        properties = {k: v for k, v in properties.items() if k in op.query_keys}
    if "patternProperties" in schema:
        for name in allocation_candidate.group_parameters(newest):
            properties.setdefault(name, schema["patternProperties"][_group_key(name, newest)])
    required = set(schema.get("required", ()))
    return [
        {"name": name, "in": "query", "required": name in required, "schema": value}
        for name, value in properties.items()
    ]


def _group_key(name: str, version) -> str:
    return f"^{name}({allocation_candidate.suffix_pattern(version)})?$"


def _operation_id(method: str, template: str) -> str:
    words = [p.strip("{}") for p in template.strip("/").split("/") if p] or ["root"]
    return method.lower() + "_" + "_".join(w.replace(".", "_") for w in words)


def _tag(template: str) -> str:
    parts = [p for p in template.strip("/").split("/") if p and not p.startswith("{")]
    if not parts:
        return "versions"
    if parts[0] == "resource_providers" and len(parts) > 1:
        return parts[1]
    return parts[0]


# -- the operating URLs (not in the route table) ----------------------------------

_HEALTH_BODY = {
    "type": "object",
    "properties": {
        "detailed": {"type": "boolean"},
        "reasons": {"type": "array", "items": {"type": "string"}},
    },
    "required": ["detailed", "reasons"],
}
_HEALTH_CONTENT = {
    "text/plain": {"schema": {"type": "string"}},
    JSON: {"schema": _HEALTH_BODY},
    "text/html": {"schema": {"type": "string"}},
}

# template -> method -> the OpenAPI operation (without summary and policy,
# which come from the policy rule where there is one).
OPERATING: dict[str, dict[str, dict]] = {
    "/healthcheck": {
        "get": {
            "summary": "Whether this process can serve: its database answers (oslo.middleware's "
            "healthcheck); no token needed.",
            "security": [],
            "responses": {
                "200": {"description": "Available.", "content": _HEALTH_CONTENT},
                "503": {
                    "description": "Not available (the reasons say why).",
                    "content": _HEALTH_CONTENT,
                },
            },
        },
        "head": {
            "summary": "Whether this process can serve, without a body; no token needed.",
            "security": [],
            "responses": {
                "204": {"description": "Available."},
                "503": {"description": "Not available."},
            },
        },
    },
    "/metrics": {
        "get": {
            "responses": {
                "200": {
                    "description": "The Prometheus text format (OpenMetrics to a client "
                    "that asks for it).",
                    "content": {
                        "text/plain; version=0.0.4": {"schema": {"type": "string"}},
                        "application/openmetrics-text": {"schema": {"type": "string"}},
                    },
                },
            },
            "x-errors": {
                401: "No credentials (no X-Auth-Token).",
                403: "The caller's roles do not satisfy the policy.",
                404: "Metrics are off ([metrics] enabled = false).",
            },
        },
    },
    PATH: {
        "get": {
            "summary": "This document; no token needed.",
            "security": [],
            "responses": {
                "200": {
                    "description": "The OpenAPI 3.1 document of the API.",
                    "content": {JSON: {"schema": {"type": "object"}}},
                }
            },
        },
        "head": {
            "summary": "This document's headers; no token needed.",
            "security": [],
            "responses": {"200": {"description": "The document's headers, no body."}},
        },
    },
}


def _operating(template, method, op: dict, rules) -> dict:
    op = dict(op)
    rule = rules.get((method, template))
    answers = dict(op.pop("responses"))
    for status, why in op.pop("x-errors", {}).items():
        answers[str(status)] = _error(status, why)
    operation: dict = {"operationId": _operation_id(method, template), "tags": ["operating"]}
    if rule is not None:
        operation["summary"] = rule.description
        operation["description"] = f"Policy: `{rule.name}`."
    operation.update(op)
    operation["responses"] = dict(sorted(answers.items()))
    return operation


# -- serving it -------------------------------------------------------------------


class Application:
    """WSGI: GET and HEAD /openapi.json answer the document, built once at
    the newest microversion served ([api] max_microversion) and kept as
    bytes (one copy per mount prefix, which its ``servers`` names); any
    other method is a 405 in the error format. No token needed: mount it
    outside authentication, for PATH_INFO == ``PATH``, with the route table
    the service serves::

        openapi.Application(conf, route_table(db, conf))
    """

    def __init__(self, conf, routes: Routes):
        newest = mv.served_up_to(conf.api.max_microversion)
        self.document = document(newest, routes)
        self._bytes: dict[str, bytes] = {}

    def body(self, prefix: str = "") -> bytes:
        """The document as served under ``prefix`` (SCRIPT_NAME)."""
        found = self._bytes.get(prefix)
        if found is None:
            served = {**self.document, "servers": [{"url": prefix or "/"}]}
            found = json.dumps(served, separators=(",", ":")).encode("utf-8")
            self._bytes[prefix] = found
        return found

    def __call__(self, environ, start_response):
        method = environ.get("REQUEST_METHOD", "GET")
        if method not in ("GET", "HEAD"):
            return self._not_allowed(environ, start_response, method)
        body = self.body(environ.get("SCRIPT_NAME", ""))
        headers = [("Content-Type", JSON), ("Content-Length", str(len(body)))]
        start_response("200 OK", headers)
        return [b""] if method == "HEAD" else [body]

    def _not_allowed(self, environ, start_response, method):
        error = errors.MethodNotAllowed(method, ["GET", "HEAD"])
        request_id = environ.get(ENV_REQUEST_ID) or f"req-{uuid.uuid4()}"
        body = json.dumps(errors.error_body(error, request_id, with_code=False)).encode("utf-8")
        headers = [
            ("Content-Type", JSON),
            ("Content-Length", str(len(body))),
            ("Allow", "GET, HEAD"),
        ]
        start_response("405 Method Not Allowed", headers)
        return [body]
