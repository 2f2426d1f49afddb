"""Response bodies: what each handler answers, per microversion.

Nothing checks an answer against these at run time. They are what the
OpenAPI document (``placement_svc/operating/openapi.py``) says each operation
answers, and the schemathesis run (``tests/functional/test_schemathesis.py``)
checks the live service's answers against them, so a body and its
description cannot drift apart unseen. Each version's bodies are built whole
by ``_build(version)``, once at import for every feature that changes one;
``for_version`` picks from that table, as the request schemas do.

Every object lists its keys and allows no others: a key a handler adds
without adding it here is a failure of the fuzz run, not a silent change.
"""

from __future__ import annotations

from typing import NamedTuple

from placement_svc import microversion as mv
from placement_svc.schemas import resource_provider
from placement_svc.schemas.common import Schema, pick

_STRING = {"type": "string"}
_INTEGER = {"type": "integer"}
_UUID = {"type": "string", "format": "uuid"}
_GENERATION = {"type": "integer", "description": "Bumped by every change to the provider."}
_UUIDS = {"type": "array", "items": _UUID}


def _object(properties: dict, required=None, **more) -> dict:
    """An object with exactly ``properties`` (all required unless ``required``
    says which)."""
    return {
        "type": "object",
        "properties": properties,
        "required": list(properties) if required is None else list(required),
        "additionalProperties": False,
        **more,
    }


def _map(values: dict, keys: str, **more) -> dict:
    """An object keyed by ``keys`` (said in words) whose values are ``values``."""
    return {"type": "object", "additionalProperties": values, "description": keys, **more}


def _links(rels: list[str]) -> dict:
    return {
        "type": "array",
        "items": _object({"rel": {"type": "string", "enum": rels}, "href": _STRING}),
        "minItems": len(rels),
        "maxItems": len(rels),
    }


# The parts of bodies, named as the handlers render them.

INVENTORY_FIELDS = {
    "total": _INTEGER,
    "reserved": _INTEGER,
    "min_unit": _INTEGER,
    "max_unit": _INTEGER,
    "step_size": _INTEGER,
    "allocation_ratio": {"type": "number"},
}
INVENTORY = _object(INVENTORY_FIELDS)
RESOURCES = _map({"type": "integer", "minimum": 1}, "Amounts by resource class name.")

VERSION_DOCUMENT = _object(
    {
        "versions": {
            "type": "array",
            "minItems": 1,
            "items": _object(
                {
                    "id": _STRING,
                    "max_version": {"type": "string", "pattern": r"^\d+\.\d+$"},
                    "min_version": {"type": "string", "pattern": r"^\d+\.\d+$"},
                    "status": {"type": "string", "enum": ["CURRENT"]},
                    "links": {
                        "type": "array",
                        "items": _object({"rel": _STRING, "href": _STRING}),
                    },
                }
            ),
        }
    }
)

RESOURCE_CLASS = _object({"name": _STRING, "links": _links(["self"])})
RESOURCE_CLASSES = _object({"resource_classes": {"type": "array", "items": RESOURCE_CLASS}})

TRAITS = _object({"traits": {"type": "array", "items": _STRING}})

PROVIDER_INVENTORIES = _object(
    {
        "resource_provider_generation": _GENERATION,
        "inventories": _map(INVENTORY, "Inventories by resource class name."),
    }
)
ONE_INVENTORY = _object({**INVENTORY_FIELDS, "resource_provider_generation": _GENERATION})
PROVIDER_USAGES = _object(
    {
        "resource_provider_generation": _GENERATION,
        "usages": _map(
            {"type": "integer", "minimum": 0},
            "Amount used by resource class name, for each class the provider has inventory of.",
        ),
    }
)
PROVIDER_TRAITS = _object(
    {"traits": {"type": "array", "items": _STRING}, "resource_provider_generation": _GENERATION}
)

# GET and PUT /resource_provider_trees/{root_uuid} (1.49): parents before children.
PROVIDER_TREE = _object(
    {
        "root": _UUID,
        "providers": {
            "type": "array",
            "minItems": 1,
            "items": _object(
                {
                    "uuid": _UUID,
                    "name": _STRING,
                    "parent_provider_uuid": {"anyOf": [_UUID, {"type": "null"}]},
                    "generation": _GENERATION,
                    "inventories": _map(INVENTORY, "Inventories by resource class name."),
                    "traits": {"type": "array", "items": _STRING},
                    "aggregates": _UUIDS,
                }
            ),
        },
    }
)

# Standard names of the error format (placement_svc/errors.py).
ERROR = _object(
    {
        "errors": {
            "type": "array",
            "minItems": 1,
            "maxItems": 1,
            "items": _object(
                {
                    "status": {"type": "integer", "minimum": 400, "maximum": 599},
                    "title": _STRING,
                    "detail": _STRING,
                    "request_id": {"type": "string", "pattern": "^req-"},
                    "code": {
                        "type": "string",
                        "description": "From microversion 1.23, once the request's "
                        "microversion is known (not in a 400 or 406 about the version "
                        "itself).",
                    },
                    "max_version": {
                        "type": "string",
                        "description": "In a 406 for a version not served: the newest served.",
                    },
                    "min_version": {
                        "type": "string",
                        "description": "In a 406 for a version not served: the oldest served.",
                    },
                },
                required=["status", "title", "detail", "request_id"],
            ),
        }
    }
)

# A request without credentials is refused by the front door, in its own
# format: noauth2 in webob's, keystonemiddleware's auth_token in its own.
UNAUTHORIZED = {
    "anyOf": [
        _object({"message": _STRING, "code": {"type": "string"}, "title": _STRING}),
        _object(
            {"error": _object({"code": _INTEGER, "title": _STRING, "message": _STRING})},
        ),
    ]
}

# GET /allocation_candidates/explain (1.44): the top-level keys; what each
# step holds is documented in README.rst ("Why no valid host?").
_STEP = {"type": "object", "description": "One filter or rule with its count before and after."}
EXPLANATION = _object(
    {
        "cloud": _object({"providers": _INTEGER, "trees": _INTEGER}),
        "groups": _map(
            _object(
                {
                    "resources": RESOURCES,
                    "considered": _INTEGER,
                    "funnel": {"type": "array", "items": _STEP},
                    "providers": _INTEGER,
                    "trees": _INTEGER,
                }
            ),
            "Each request group's funnel, by suffix ('' for the unsuffixed group).",
        ),
        "trees_for_all_groups": _INTEGER,
        "request_filters": {"type": "array", "items": _STEP},
        "merge_rules": {"type": "array", "items": _STEP},
        "trees_with_candidates": _INTEGER,
        "candidates": _INTEGER,
        "candidates_capped": {
            "anyOf": [
                {"type": "null"},
                _object({"at": _INTEGER, "by": {"enum": ["explain", "max_allocation_candidates"]}}),
            ]
        },
        "near_misses": {"type": "array", "items": {"type": "object"}},
    }
)

# GET /allocation_candidates/capacity (1.44)
CAPACITY = _object(
    {
        "trees": {
            "type": "array",
            "items": _object(
                {
                    "root": _object({"uuid": _UUID, "name": _STRING}),
                    "copies": {"type": "integer", "minimum": 1},
                    "exact": {"type": "boolean"},
                }
            ),
        },
        "trees_with_room": _INTEGER,
        "total": _INTEGER,
        "total_exact": {"type": "boolean"},
    }
)


def _provider_links(version) -> list[str]:
    return ["self", *resource_provider.link_rels(version)]


def _aggregates(version) -> dict:
    if version >= mv.AGGREGATE_GENERATION:
        return _object({"aggregates": _UUIDS, "resource_provider_generation": _GENERATION})
    return _object({"aggregates": _UUIDS})


def _provider(version) -> dict:
    properties = {
        "uuid": _UUID,
        "name": _STRING,
        "generation": _GENERATION,
        "links": _links(_provider_links(version)),
    }
    if version >= mv.NESTED_PROVIDERS:
        properties["parent_provider_uuid"] = {"anyOf": [_UUID, {"type": "null"}]}
        properties["root_provider_uuid"] = _UUID
    required = list(properties)
    if version >= mv.PROVIDER_INCLUDE:
        # include= (1.45): the bodies of the provider's own sub-resource reads.
        properties["inventories"] = PROVIDER_INVENTORIES
        properties["traits"] = PROVIDER_TRAITS
        properties["aggregates"] = _aggregates(version)
        properties["usages"] = PROVIDER_USAGES
    return _object(properties, required)


def _consumer(version) -> dict:
    """GET /allocations/{consumer_uuid}: ``{"allocations": {}}`` alone for a
    consumer without allocations; with them, its owner (1.12), generation
    (1.28) and type (1.38)."""
    entry = _object({"resources": RESOURCES, "generation": _GENERATION})
    properties: dict = {"allocations": _map(entry, "The consumer's allocations by provider uuid.")}
    owner = []
    if version >= mv.ALLOCATIONS_DICT:
        owner = ["project_id", "user_id"]
        properties["project_id"] = _STRING
        properties["user_id"] = _STRING
    if version >= mv.CONSUMER_GENERATION:
        owner.append("consumer_generation")
        properties["consumer_generation"] = _INTEGER
    if version >= mv.CONSUMER_TYPES:
        owner.append("consumer_type")
        properties["consumer_type"] = _STRING
    if version >= mv.HOLDS:
        owner.append("hold")
        properties["hold"] = {
            "anyOf": [
                _object({"expires_at": {"type": "string", "format": "date-time"}}),
                {"type": "null"},
            ],
            "description": "When the allocations expire unless confirmed (1.51); "
            "null for allocations that are confirmed.",
        }
    body = _object(properties, ["allocations"])
    if owner:
        body["if"] = {"properties": {"allocations": {"minProperties": 1}}}
        body["then"] = {"required": owner}
        body["else"] = {"maxProperties": 1}
    return body


def _provider_allocations(version) -> dict:
    entry: dict = {"resources": RESOURCES}
    if version >= mv.CONSUMER_GENERATION:
        entry["consumer_generation"] = _INTEGER
    return _object(
        {
            "allocations": _map(_object(entry), "The allocations by consumer uuid."),
            "resource_provider_generation": _GENERATION,
        }
    )


def _candidates(version) -> dict:
    by_provider = _map(_object({"resources": RESOURCES}), "Amounts by provider uuid.")
    if version < mv.ALLOCATIONS_DICT:
        allocations: dict = {
            "type": "array",
            "items": _object(
                {"resource_provider": _object({"uuid": _UUID}), "resources": RESOURCES}
            ),
        }
    else:
        allocations = by_provider
    request = {"allocations": allocations}
    if version >= mv.MAPPINGS:
        request["mappings"] = _map(_UUIDS, "The providers of each request group, by suffix.")
    if version >= mv.RANKED_CANDIDATES:
        request["rank"] = _object(
            {
                "score": _INTEGER,
                "keys": {
                    "type": "array",
                    "items": {"anyOf": [{"type": "number"}, {"type": "null"}]},
                    "description": "The free fraction of each sort key's class in the "
                    "candidate's tree after it; null for a tree without that class.",
                },
            },
            description="What the candidate was ranked by (1.48): its preference score "
            "and its sort keys.",
        )
    summary: dict = {
        "resources": _map(
            _object({"capacity": _INTEGER, "used": _INTEGER}), "By resource class name."
        )
    }
    if version >= mv.CANDIDATES_REQUIRED:
        summary["traits"] = {"type": "array", "items": _STRING}
    if version >= mv.NESTED_CANDIDATES:
        summary["parent_provider_uuid"] = {"anyOf": [_UUID, {"type": "null"}]}
        summary["root_provider_uuid"] = _UUID
    return _object(
        {
            "allocation_requests": {"type": "array", "items": _object(request)},
            "provider_summaries": _map(_object(summary), "By provider uuid."),
        }
    )


def _usages(version) -> dict:
    if version >= mv.CONSUMER_TYPES:
        by_type = _map(
            {"type": "integer", "minimum": 0},
            "Amount used by resource class name, and consumer_count.",
            required=["consumer_count"],
        )
        return _object({"usages": _map(by_type, "By consumer type (or all, or unknown).")})
    return _object({"usages": _map({"type": "integer", "minimum": 0}, "By resource class name.")})


class Bodies(NamedTuple):
    version_document: Schema
    resource_classes: Schema
    resource_class: Schema
    traits: Schema
    resource_providers: Schema
    resource_provider: Schema
    inventories: Schema
    inventory: Schema
    provider_usages: Schema
    aggregates: Schema
    provider_traits: Schema
    provider_allocations: Schema
    consumer_allocations: Schema
    allocations: Schema  # GET /allocations (1.46)
    allocation_candidates: Schema
    explanation: Schema  # 1.44
    capacity: Schema  # 1.44
    usages: Schema
    provider_tree: Schema  # 1.49
    error: Schema
    unauthorized: Schema


def _build(version) -> Bodies:
    provider = _provider(version)
    consumer = _consumer(version)
    return Bodies(
        version_document=Schema(VERSION_DOCUMENT),
        resource_classes=Schema(RESOURCE_CLASSES),
        resource_class=Schema(RESOURCE_CLASS),
        traits=Schema(TRAITS),
        resource_providers=Schema(
            _object({"resource_providers": {"type": "array", "items": provider}})
        ),
        resource_provider=Schema(provider),
        inventories=Schema(PROVIDER_INVENTORIES),
        inventory=Schema(ONE_INVENTORY),
        provider_usages=Schema(PROVIDER_USAGES),
        aggregates=Schema(_aggregates(version)),
        provider_traits=Schema(PROVIDER_TRAITS),
        provider_allocations=Schema(_provider_allocations(version)),
        consumer_allocations=Schema(consumer),
        allocations=Schema(
            _object({"allocations": _map(consumer, "Each consumer's body, by consumer uuid.")})
        ),
        allocation_candidates=Schema(_candidates(version)),
        explanation=Schema(EXPLANATION),
        capacity=Schema(CAPACITY),
        usages=Schema(_usages(version)),
        provider_tree=Schema(PROVIDER_TREE),
        error=Schema(ERROR),
        unauthorized=Schema(UNAUTHORIZED),
    )


# Every feature a body above depends on, oldest first.
_CHANGES = (
    mv.BASE,
    mv.AGGREGATES,
    mv.TRAITS,
    mv.ALLOCATIONS_LINK,
    mv.ALLOCATIONS_DICT,
    mv.NESTED_PROVIDERS,
    mv.CANDIDATES_REQUIRED,
    mv.AGGREGATE_GENERATION,
    mv.CONSUMER_GENERATION,
    mv.NESTED_CANDIDATES,
    mv.MAPPINGS,
    mv.CONSUMER_TYPES,
    mv.PROVIDER_INCLUDE,
    mv.RANKED_CANDIDATES,
    mv.HOLDS,
)
_BY_VERSION = [(feature, _build(feature)) for feature in _CHANGES]


def for_version(version) -> Bodies:
    return pick(_BY_VERSION, version)
