"""The parts of the OpenAPI document (openapi.py) that are no operation of
routes.py: the headers answers carry, the error answers, and the service's
operating URLs (/healthcheck, /metrics, /openapi.json), which are not
Placement API operations and are described here whole."""

from __future__ import annotations

from placement_svc import microversion as mv

JSON = "application/json"
SCHEMA_REF = "#/components/schemas/"
PATH = "/openapi.json"

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


def microversion_parameter(newest) -> dict:
    return {
        "name": mv.HEADER,
        "in": "header",
        "required": False,
        "description": f"The microversion: this document describes {newest}. Without "
        "the header, 1.0; a malformed value is a 400, a version not served a 406.",
        "schema": {"type": "string", "enum": [f"placement {newest}", "placement latest"]},
    }


def header(name: str) -> dict:
    return {"$ref": f"#/components/headers/{name}"}


def error(status: int, why: str) -> dict:
    schema = "unauthorized" if status == 401 else "error"
    headers = {"x-openstack-request-id": header("x-openstack-request-id")}
    if status == 405:
        headers["Allow"] = header("Allow")
    return {
        "description": why,
        "headers": headers,
        "content": {
            JSON: {"schema": {"$ref": SCHEMA_REF + schema}},
            # webob's pages, for a client that prefers HTML or takes neither.
            "text/html": {"schema": {"type": "string"}},
            "text/plain": {"schema": {"type": "string"}},
        },
    }


def common_headers() -> dict:
    return {
        "OpenStack-API-Version": header("OpenStack-API-Version"),
        "x-openstack-request-id": header("x-openstack-request-id"),
    }


# -- the operating URLs --------------------------------------------------------------

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


def operating(template, method, op: dict, rules, operation_id) -> dict:
    op = dict(op)
    rule = rules.get((method, template))
    answers = dict(op.pop("responses"))
    for status, why in op.pop("x-errors", {}).items():
        answers[str(status)] = error(status, why)
    operation: dict = {"operationId": operation_id, "tags": ["operating"]}
    if rule is not None:
        operation["summary"] = rule.description
        operation["description"] = f"Policy: `{rule.name}`."
    operation.update(op)
    operation["responses"] = dict(sorted(answers.items()))
    return operation
