"""Schemas for /resource_providers, one per version range, each readable whole."""

from typing import NamedTuple

from placement_svc import microversion as mv
from placement_svc.schemas.common import TEXT, UUID, UUID_VALUE, Param, Schema, pick

NAME = {"type": "string", "maxLength": 200}
PARENT = {"anyOf": [UUID, {"type": "null"}]}


def _body(properties: dict, required=("name",)) -> Schema:
    return Schema(
        {
            "type": "object",
            "properties": properties,
            "required": list(required),
            "additionalProperties": False,
        }
    )


# POST /resource_providers
CREATE_V1_0 = _body({"name": NAME, "uuid": UUID})
CREATE_V1_14 = _body({"name": NAME, "uuid": UUID, "parent_provider_uuid": PARENT})

# PUT /resource_providers/{uuid}
UPDATE_V1_0 = _body({"name": NAME})
UPDATE_V1_14 = _body({"name": NAME, "parent_provider_uuid": PARENT})

# GET /resource_providers query strings: each version adds filters.
_STRING = {"type": "string"}
# Upstream checks query uuids with jsonschema's own "uuid" format, which wants
# the dashed form (bodies use oslo's looser check): the pattern adds that.
_HEX = "[0-9a-fA-F]"
_QUERY_UUID = {
    **UUID,
    "pattern": f"^{_HEX}{{8}}-{_HEX}{{4}}-{_HEX}{{4}}-{_HEX}{{4}}-{_HEX}{{12}}$",
}


def _query(properties: dict) -> Schema:
    return Schema({"type": "object", "properties": properties, "additionalProperties": False})


_BY_NAME = {"name": _STRING, "uuid": _QUERY_UUID}
LIST_QUERY_V1_0 = _query(_BY_NAME)
LIST_QUERY_V1_3 = _query({**_BY_NAME, "member_of": _STRING})
LIST_QUERY_V1_4 = _query({**_BY_NAME, "member_of": _STRING, "resources": _STRING})
LIST_QUERY_V1_14 = _query(
    {**_BY_NAME, "member_of": _STRING, "resources": _STRING, "in_tree": _QUERY_UUID}
)
LIST_QUERY_V1_18 = _query(
    {
        **_BY_NAME,
        "member_of": _STRING,
        "resources": _STRING,
        "in_tree": _QUERY_UUID,
        "required": _STRING,
    }
)

# 1.45 (placement-svc's own): include=inventories,traits,aggregates,usages
LIST_QUERY_V1_45 = _query(
    {
        **_BY_NAME,
        "member_of": _STRING,
        "resources": _STRING,
        "in_tree": _QUERY_UUID,
        "required": _STRING,
        "include": _STRING,
    }
)


class Schemas(NamedTuple):
    create: Schema
    update: Schema
    list_query: Schema


_BY_VERSION = [
    (mv.BASE, Schemas(CREATE_V1_0, UPDATE_V1_0, LIST_QUERY_V1_0)),
    (mv.MEMBER_OF, Schemas(CREATE_V1_0, UPDATE_V1_0, LIST_QUERY_V1_3)),
    (mv.RESOURCES_FILTER, Schemas(CREATE_V1_0, UPDATE_V1_0, LIST_QUERY_V1_4)),
    (mv.NESTED_PROVIDERS, Schemas(CREATE_V1_14, UPDATE_V1_14, LIST_QUERY_V1_14)),
    (mv.PROVIDERS_REQUIRED, Schemas(CREATE_V1_14, UPDATE_V1_14, LIST_QUERY_V1_18)),
    (mv.PROVIDER_INCLUDE, Schemas(CREATE_V1_14, UPDATE_V1_14, LIST_QUERY_V1_45)),
]


def for_version(version) -> Schemas:
    return pick(_BY_VERSION, version)


def link_rels(version) -> list[str]:
    """The relations of a provider's links after "self", in order, as
    upstream lists them at ``version``: the handlers render them and the
    OpenAPI response schema (schemas/responses.py) names them."""
    rels = ["inventories", "usages"]
    if version >= mv.AGGREGATES:
        rels.append("aggregates")
    if version >= mv.TRAITS:
        rels.append("traits")
    if version >= mv.ALLOCATIONS_LINK:
        rels.append("allocations")
    return rels


# What each parameter of the list query means (the OpenAPI document's words;
# tests/unit/test_openapi.py checks every key of the schemas above has them).
QUERY_WORDS = {
    "name": Param(TEXT, "Only the provider of this name."),
    "uuid": Param(UUID_VALUE, "Only the provider of this uuid."),
    "member_of": Param(
        TEXT,
        "Only providers in the aggregate: <uuid>, or in:<uuid>,<uuid> for any of "
        "several; repeated (from 1.24), all of them; !<uuid> or !in:... (from 1.32) "
        "for none of them.",
    ),
    "resources": Param(
        TEXT, "Only providers with room for every CLASS:AMOUNT of a comma-separated list."
    ),
    "in_tree": Param(UUID_VALUE, "Only providers in the tree of the provider of this uuid."),
    "required": Param(
        TEXT,
        "Only providers with every trait of a comma-separated list; !TRAIT (from 1.22) "
        "for one they must not have; in:A,B (from 1.39) for any of several; repeatable.",
    ),
    "include": Param(
        TEXT,
        "Embed the providers' inventories, traits, aggregates and usages "
        "(a comma-separated list of those words) in the answer.",
    ),
}
