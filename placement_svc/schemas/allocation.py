"""Schemas for PUT /allocations/{consumer_uuid} and POST /allocations.

Each microversion's body is written out whole below, from the named parts
that follow. The body of PUT changed at 1.8 (project and user required),
1.12 (allocations keyed by provider), 1.28 (consumer generation; empty
allocations delete), 1.34 (mappings, accepted and ignored) and 1.38
(consumer type). POST /allocations (from 1.13) takes one PUT-like body per
consumer, keyed by consumer uuid, where allocations may always be empty.
GET /allocations (from 1.46) has a query string: which consumers to read.
"""

from typing import NamedTuple

from placement_svc import microversion as mv
from placement_svc.schemas.common import UUID, UUID_VALUE, UUIDS, Param, Schema, pick

UUID_KEY = "^[0-9a-fA-F-]{36}$"
RESOURCE_CLASS_KEY = "^[A-Z0-9_]+$"
# A request group suffix (1.33); unanchored, as upstream matches it.
GROUP_SUFFIX = "[a-zA-Z0-9_-]{1,64}"

# The part shared by every form: amounts per resource class, at least one.
RESOURCES = {
    "type": "object",
    "minProperties": 1,
    "patternProperties": {RESOURCE_CLASS_KEY: {"type": "integer", "minimum": 1}},
    "additionalProperties": False,
}

# Any text a database can store: no NUL (PostgreSQL refuses it) and no lone
# UTF-16 surrogate (JSON can spell one, UTF-8 cannot); either would otherwise
# fail in the database driver, a 500.
OWNER_ID = {
    "type": "string",
    "minLength": 1,
    "maxLength": 255,
    "pattern": r"^[^\x00\ud800-\udfff]*$",
}
PROJECT_ID = OWNER_ID
USER_ID = OWNER_ID
CONSUMER_GENERATION = {"type": ["integer", "null"]}
CONSUMER_TYPE = {"type": "string", "pattern": "^[A-Z0-9_]+$", "minLength": 1, "maxLength": 255}

# What the client asserts the request groups were satisfied by (1.34).
MAPPINGS = {
    "type": "object",
    "minProperties": 1,
    "patternProperties": {
        GROUP_SUFFIX: {"type": "array", "minItems": 1, "items": UUID},
    },
}

# Before 1.12: a list of {resource_provider: {uuid}, resources}.
ALLOCATION_LIST = {
    "type": "array",
    "minItems": 1,
    "items": {
        "type": "object",
        "properties": {
            "resource_provider": {
                "type": "object",
                "properties": {"uuid": UUID},
                "required": ["uuid"],
                "additionalProperties": False,
            },
            "resources": RESOURCES,
        },
        "required": ["resource_provider", "resources"],
        "additionalProperties": False,
    },
}


def _by_provider(min_providers: int) -> dict:
    """From 1.12: {provider uuid: {resources, optional generation}}."""
    return {
        "type": "object",
        "minProperties": min_providers,
        "patternProperties": {
            UUID_KEY: {
                "type": "object",
                "properties": {"generation": {"type": "integer"}, "resources": RESOURCES},
                "required": ["resources"],
                "additionalProperties": False,
            }
        },
        "additionalProperties": False,
    }


ALLOCATIONS_BY_PROVIDER = _by_provider(min_providers=1)
# POST /allocations, and PUT from 1.28: {} removes the consumer's allocations.
ALLOCATIONS_BY_PROVIDER_OR_NONE = _by_provider(min_providers=0)


def _body(properties: dict, required: list[str]) -> Schema:
    return Schema(
        {
            "type": "object",
            "properties": properties,
            "required": required,
            "additionalProperties": False,
        }
    )


# PUT /allocations/{consumer_uuid}, one schema per microversion range.
PUT_V1_0 = _body({"allocations": ALLOCATION_LIST}, ["allocations"])

PUT_V1_8 = _body(
    {"allocations": ALLOCATION_LIST, "project_id": PROJECT_ID, "user_id": USER_ID},
    ["allocations", "project_id", "user_id"],
)

PUT_V1_12 = _body(
    {"allocations": ALLOCATIONS_BY_PROVIDER, "project_id": PROJECT_ID, "user_id": USER_ID},
    ["allocations", "project_id", "user_id"],
)

PUT_V1_28 = _body(
    {
        "allocations": ALLOCATIONS_BY_PROVIDER_OR_NONE,
        "project_id": PROJECT_ID,
        "user_id": USER_ID,
        "consumer_generation": CONSUMER_GENERATION,
    },
    ["allocations", "project_id", "user_id", "consumer_generation"],
)

PUT_V1_34 = _body(
    {
        "allocations": ALLOCATIONS_BY_PROVIDER_OR_NONE,
        "project_id": PROJECT_ID,
        "user_id": USER_ID,
        "consumer_generation": CONSUMER_GENERATION,
        "mappings": MAPPINGS,
    },
    ["allocations", "project_id", "user_id", "consumer_generation"],
)

PUT_V1_38 = _body(
    {
        "allocations": ALLOCATIONS_BY_PROVIDER_OR_NONE,
        "project_id": PROJECT_ID,
        "user_id": USER_ID,
        "consumer_generation": CONSUMER_GENERATION,
        "mappings": MAPPINGS,
        "consumer_type": CONSUMER_TYPE,
    },
    ["allocations", "project_id", "user_id", "consumer_generation", "consumer_type"],
)

# One consumer's entry in POST /allocations (and in POST /reshaper).
CONSUMER_V1_13 = _body(
    {
        "allocations": ALLOCATIONS_BY_PROVIDER_OR_NONE,
        "project_id": PROJECT_ID,
        "user_id": USER_ID,
    },
    ["allocations", "project_id", "user_id"],
)
CONSUMER_V1_28 = PUT_V1_28
CONSUMER_V1_34 = PUT_V1_34
CONSUMER_V1_38 = PUT_V1_38


def by_consumer(consumer: dict, min_consumers: int = 1) -> dict:
    """{consumer uuid: consumer entry}, as POST /allocations and /reshaper take."""
    return {
        "type": "object",
        "minProperties": min_consumers,
        "patternProperties": {UUID_KEY: consumer},
        "additionalProperties": False,
    }


# POST /allocations, one schema per microversion range.
POST_V1_13 = Schema(by_consumer(CONSUMER_V1_13))
POST_V1_28 = Schema(by_consumer(CONSUMER_V1_28))
POST_V1_34 = Schema(by_consumer(CONSUMER_V1_34))
POST_V1_38 = Schema(by_consumer(CONSUMER_V1_38))


# GET /allocations (1.46): which consumers' allocations to read; exactly one
# of the three, each a uuid or in:<uuid>,<uuid>,... (in_tree: one uuid),
# checked by the handler, which words each problem. The URL has no GET before
# 1.46 and one query since, so this schema is not in the table below.
LIST_QUERY_V1_46 = Schema(
    {
        "type": "object",
        "properties": {
            "consumer_uuid": {"type": "string"},
            "resource_provider_uuid": {"type": "string"},
            "in_tree": {"type": "string"},
        },
        "additionalProperties": False,
    }
)

# What each parameter of LIST_QUERY_V1_46 means (the OpenAPI document's words).
LIST_QUERY_WORDS = {
    "consumer_uuid": Param(
        UUIDS, "The consumer's uuid, or in:<uuid>,<uuid>,... for several (at most 1000)."
    ),
    "resource_provider_uuid": Param(
        UUIDS,
        "Every consumer holding allocations against the provider, or in:<uuid>,... "
        "against any of several.",
    ),
    "in_tree": Param(UUID_VALUE, "Every consumer holding allocations in the tree of the provider."),
    "held": Param(
        {"type": "string", "enum": ["true", "false"]},
        "From 1.51: true, only the consumers whose allocations are held (with their "
        "expiry); false, only the others.",
    ),
}


# A hold (1.51): the allocations expire after ttl seconds unless confirmed.
HOLD = {
    "type": "object",
    "properties": {"ttl": {"type": "integer", "minimum": 1, "maximum": 86400}},
    "required": ["ttl"],
    "additionalProperties": False,
}
PUT_V1_51 = _body(
    {
        "allocations": ALLOCATIONS_BY_PROVIDER_OR_NONE,
        "project_id": PROJECT_ID,
        "user_id": USER_ID,
        "consumer_generation": CONSUMER_GENERATION,
        "mappings": MAPPINGS,
        "consumer_type": CONSUMER_TYPE,
        "hold": HOLD,
    },
    ["allocations", "project_id", "user_id", "consumer_generation", "consumer_type"],
)
CONSUMER_V1_51 = PUT_V1_51
POST_V1_51 = Schema(by_consumer(CONSUMER_V1_51))
# POST /allocations/{consumer_uuid}/confirm: nothing, or the generation seen.
CONFIRM_V1_51 = Schema(
    {
        "type": "object",
        "properties": {"consumer_generation": {"type": "integer"}},
        "additionalProperties": False,
    }
)
# GET /allocations from 1.51: held=true lists only consumers holding a hold.
LIST_QUERY_V1_51 = Schema(
    {
        **LIST_QUERY_V1_46,
        "properties": {**LIST_QUERY_V1_46["properties"], "held": {"type": "string"}},
    }
)

# PATCH /allocations/{consumer_uuid} (1.50, placement-svc's own): amounts
# to add and to take away, by provider, against the consumer's allocations as
# they are; the owner as PUT takes it (needed for a consumer that is new).
_DELTA = _by_provider(min_providers=1)
_DELTA["patternProperties"] = {
    UUID_KEY: {
        "type": "object",
        "properties": {"resources": RESOURCES},
        "required": ["resources"],
        "additionalProperties": False,
    }
}
PATCH_V1_50 = Schema(
    {
        "type": "object",
        "properties": {
            "add": _DELTA,
            "remove": _DELTA,
            "consumer_generation": CONSUMER_GENERATION,
            "project_id": PROJECT_ID,
            "user_id": USER_ID,
            "consumer_type": CONSUMER_TYPE,
        },
        "anyOf": [{"required": ["add"]}, {"required": ["remove"]}],
        "additionalProperties": False,
    }
)


class Schemas(NamedTuple):
    put: Schema
    post: Schema | None  # None: POST /allocations is served from 1.13


_BY_VERSION = [
    (mv.BASE, Schemas(PUT_V1_0, None)),
    (mv.ALLOCATION_PROJECT_USER, Schemas(PUT_V1_8, None)),
    (mv.ALLOCATIONS_DICT, Schemas(PUT_V1_12, None)),
    (mv.POST_ALLOCATIONS, Schemas(PUT_V1_12, POST_V1_13)),
    (mv.CONSUMER_GENERATION, Schemas(PUT_V1_28, POST_V1_28)),
    (mv.MAPPINGS, Schemas(PUT_V1_34, POST_V1_34)),
    (mv.CONSUMER_TYPES, Schemas(PUT_V1_38, POST_V1_38)),
    (mv.HOLDS, Schemas(PUT_V1_51, POST_V1_51)),
]


def for_version(version) -> Schemas:
    return pick(_BY_VERSION, version)
