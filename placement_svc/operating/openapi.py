"""GET /openapi.json: the OpenAPI 3.1 document of the whole API at the newest
microversion served, generated, never kept by hand beside the code.

What comes from where:

* every operation: its record in ``placement_svc/routes.py`` (method,
  microversions, schemas, policy rule, statuses, errors, ETag, the words of
  its query parameters);
* request bodies and query strings: the very schemas the handlers validate
  with (``placement_svc/schemas``), picked at the document's version; each
  query parameter's first microversion, from those schemas (``x-since``);
* response bodies: ``schemas/responses.py``, per version;
* each operation's summary: its policy rule's description;
* what is not an API operation (headers, error answers, the operating URLs
  ``/healthcheck``, ``/metrics`` and this one): ``openapi_parts.py``.

The document is also committed (``doc/openapi.json``, written by
``placement-svc openapi``); ``tests/unit/test_openapi.py`` fails when it is
not what this module makes. ``tests/functional/test_schemathesis.py`` fuzzes
a live service from the document served.
"""

from __future__ import annotations

import json
import sys
import uuid

from microversion_parse import Version

from placement_svc import errors, policies, routes
from placement_svc import microversion as mv
from placement_svc.http.middleware import ENV_REQUEST_ID
from placement_svc.operating import openapi_parts as parts
from placement_svc.operating.openapi_parts import JSON, SCHEMA_REF
from placement_svc.routes import Operation, Route
from placement_svc.schemas import allocation_candidate, responses

PATH = parts.PATH  # where the service mounts Application
OPENAPI_VERSION = "3.1.0"


# -- the document ---------------------------------------------------------------


def document(newest: Version, table: tuple[Route, ...] = routes.ROUTES) -> dict:
    """The OpenAPI 3.1 document of ``table`` (routes.py's) served at
    ``newest``: the URLs and methods there at that version, each with what it
    takes and answers at that version. ``newest`` is 1.39 or later, as [api]
    max_microversion allows."""
    if newest < mv.UPSTREAM_MAX_VERSION:
        raise ValueError(f"the document describes 1.39 and later, not {newest}")
    bodies = responses.for_version(newest)
    rules = _policy_rules()
    paths: dict[str, dict] = {}
    for route in table:
        if route.since is not None and newest < route.since:
            continue
        item = {}
        for op in route.operations:
            gate = max(op.since, route.since or mv.BASE, op.allowed_since or mv.BASE)
            if newest < gate:
                continue
            rule = rules.get(op.policy) if op.policy is not None else None
            item[op.method.lower()] = _operation(route.template, op, newest, rule, gate)
        if item:
            paths[route.template] = item
    for template, item in parts.OPERATING.items():
        paths[template] = {
            method: parts.operating(
                template, method.upper(), op, _rules_by_path(), _operation_id(method, template)
            )
            for method, op in item.items()
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
            "parameters": {"microversion": parts.microversion_parameter(newest)},
            "headers": parts.HEADERS,
        },
    }


def _referenced(value) -> set[str]:
    """The names of the component schemas ``value`` refers to."""
    if isinstance(value, dict):
        ref = value.get("$ref")
        found = (
            {ref[len(SCHEMA_REF) :]}
            if isinstance(ref, str) and ref.startswith(SCHEMA_REF)
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


def _policy_rules() -> dict[str, object]:
    """rule name -> the policy rule."""
    return {rule.name: rule for rule in policies.list_rules()}


def _rules_by_path() -> dict[tuple[str, str], object]:
    """(method, path) -> the policy rule of an operating URL."""
    return {
        (op["method"], op["path"]): rule
        for rule in policies.list_rules()
        for op in getattr(rule, "operations", None) or ()
    }


def _operation(template: str, op: Operation, newest: Version, rule, gate: Version) -> dict:
    conditional_read = op.etag and op.method == "GET" and newest >= mv.CONDITIONAL_READS
    authenticated = op.policy is not None
    parameters = [{"$ref": "#/components/parameters/microversion"}]
    parameters += _path_parameters(template, op, newest)
    parameters += _query_parameters(op, gate, newest)
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
    body = op.body(newest) if op.body is not None else None
    answers: dict[str, dict] = {}
    for status, body_name in op.ok.items():
        answers[str(status)] = _success(status, body_name, op, template, conditional_read)
    if conditional_read:
        answers["304"] = {
            "description": "Not Modified: If-None-Match names the answer's ETag (1.47).",
            "headers": {"ETag": parts.header("ETag"), **parts.common_headers()},
        }
    for status, why in _errors(op, authenticated, gate, body is not None):
        answers[str(status)] = parts.error(status, why)
    operation: dict = {
        "operationId": _operation_id(op.method, template),
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
    if gate > mv.BASE:
        operation["x-since"] = str(gate)
    if not authenticated:
        operation["security"] = []
    if body is not None:
        operation["requestBody"] = {"required": True, "content": {JSON: {"schema": body}}}
    return operation


def _success(status, body_name, op: Operation, template, conditional_read) -> dict:
    headers = parts.common_headers()
    if op.location:
        headers["Location"] = parts.header("Location")
    answer: dict = {"description": _STATUS_WORDS.get(status, "OK")}
    if body_name is not None:
        headers["Last-Modified"] = parts.header("Last-Modified")
        headers["Cache-Control"] = parts.header("Cache-Control")
        if conditional_read:
            headers["ETag"] = parts.header("ETag")
        ref = {"$ref": SCHEMA_REF + body_name}
        answer["content"] = {JSON: {"schema": ref}}
        if body_name in ("explanation", "capacity"):
            answer["content"]["text/plain"] = {
                "schema": {"type": "string", "description": "The same, for people to read."}
            }
    elif template.startswith("/traits/"):
        headers["Last-Modified"] = parts.header("Last-Modified")
        headers["Cache-Control"] = parts.header("Cache-Control")
    answer["headers"] = headers
    return answer


_STATUS_WORDS = {200: "OK", 201: "Created", 204: "No Content (done, or already so)"}


def _errors(op: Operation, authenticated: bool, gate: Version, has_body: bool):
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
        if op.method == "GET":
            found[406] += " Or the Accept header does not take application/json."
    if has_body:
        found[413] = "The body is larger than 8 MiB."
        found[415] = "The body is not application/json."
    if gate > mv.BASE and op.allowed_since is None:
        found[404] = f"Before microversion {gate}, no such URL."
    if op.allowed_since is not None:
        found[405] = f"Before microversion {op.allowed_since}, the URL has no {op.method}."
    for status, why in op.errors.items():
        found[status] = f"{found[status]} {why}" if status in found else why
    return sorted(found.items())


def _path_parameters(template: str, op: Operation, newest: Version) -> list[dict]:
    found = []
    for part in template.split("/"):
        if part.startswith("{") and part.endswith("}"):
            name = part[1:-1]
            schema, why = routes.PATH_PARAMETERS[name]
            if name in op.path:
                schema = op.path[name](newest)
            found.append(
                {"name": name, "in": "path", "required": True, "description": why, "schema": schema}
            )
    return found


def query_keys(op: Operation, version: Version) -> list[str]:
    """The query parameters ``op`` takes at ``version``: the keys of its
    query schema (a request group's parameters under their unsuffixed name)."""
    schema = op.query(version) if op.query is not None else None
    if schema is None:
        return []
    names = list(schema.get("properties", {}))
    if "patternProperties" in schema:
        names += [
            name for name in allocation_candidate.group_parameters(version) if name not in names
        ]
    if op.query_keys is not None:
        names = [name for name in names if name in op.query_keys]
    return names


def first_version(op: Operation, name: str, gate: Version, newest: Version) -> Version:
    """The first microversion at which ``op`` (there from ``gate``) takes
    the query parameter."""
    for minor in range(gate.minor, newest.minor + 1):
        version = Version(newest.major, minor)
        if name in query_keys(op, version):
            return version
    raise LookupError(f"{name} is not a parameter at {newest}")


def _query_parameters(op: Operation, gate: Version, newest: Version) -> list[dict]:
    """One parameter per key of the query schema at ``newest``, with its
    value's form and meaning (the operation's ``words``) and the version it
    appears at (``x-since``)."""
    schema = op.query(newest) if op.query is not None else None
    if schema is None:
        return []
    required = set(schema.get("required", ()))
    found = []
    for name in query_keys(op, newest):
        words = op.words[name]
        since = first_version(op, name, gate, newest)
        description = words.description
        if since > mv.BASE:
            description += f" From microversion {since}."
        found.append(
            {
                "name": name,
                "in": "query",
                "required": name in required,
                "description": description,
                "schema": words.schema,
                "x-since": str(since),
            }
        )
    return found


def _operation_id(method: str, template: str) -> str:
    words = [p.strip("{}") for p in template.strip("/").split("/") if p] or ["root"]
    return method.lower() + "_" + "_".join(w.replace(".", "_") for w in words)


def _tag(template: str) -> str:
    parts_ = [p for p in template.strip("/").split("/") if p and not p.startswith("{")]
    if not parts_:
        return "versions"
    if parts_[0] == "resource_providers" and len(parts_) > 1:
        return parts_[1]
    return parts_[0]


# -- serving it -------------------------------------------------------------------


class Application:
    """WSGI: GET and HEAD /openapi.json answer the document, built once at
    the newest microversion served ([api] max_microversion) and kept as
    bytes (one copy per mount prefix, which its ``servers`` names); any
    other method is a 405 in the error format. No token needed: mount it
    outside authentication, for PATH_INFO == ``PATH``."""

    def __init__(self, conf):
        newest = mv.served_up_to(conf.api.max_microversion)
        self.document = document(newest)
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


def committed(newest: Version = mv.MAX_VERSION) -> str:
    """The document as committed in docs/openapi.json (``make genopenapi``)."""
    return json.dumps(document(newest), indent=2, sort_keys=False) + "\n"


if __name__ == "__main__":  # make genopenapi
    sys.stdout.write(committed())
