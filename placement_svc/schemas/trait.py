"""Schemas for /traits and /resource_providers/{uuid}/traits (1.6+)."""

from typing import NamedTuple

from placement_svc import microversion as mv
from placement_svc.schemas.common import CUSTOM_TRAIT_NAME, TEXT, TRAIT_NAME, Param, Schema, pick

# PUT /traits/{name}: the name itself must be a custom trait.
CUSTOM_TRAIT = Schema(CUSTOM_TRAIT_NAME)

# PUT /resource_providers/{uuid}/traits
PROVIDER_TRAITS = Schema(
    {
        "type": "object",
        "properties": {
            "traits": {"type": "array", "items": TRAIT_NAME},
            "resource_provider_generation": {"type": "integer"},
        },
        "required": ["traits", "resource_provider_generation"],
        "additionalProperties": False,
    }
)

# GET /traits query string
LIST_QUERY = Schema(
    {
        "type": "object",
        "properties": {"name": {"type": "string"}, "associated": {"type": "string"}},
        "additionalProperties": False,
    }
)

# What each parameter of LIST_QUERY means (the OpenAPI document's words).
QUERY_WORDS = {
    "name": Param(
        TEXT, "in:<name>,<name>,... for those traits, or startswith:<prefix> for those that do."
    ),
    "associated": Param(
        {"type": "string", "enum": ["true", "false"]},
        "true: only traits some provider has; false: only those none has.",
    ),
}


class Schemas(NamedTuple):
    custom_trait: Schema
    provider_traits: Schema
    list_query: Schema


_BY_VERSION = [(mv.TRAITS, Schemas(CUSTOM_TRAIT, PROVIDER_TRAITS, LIST_QUERY))]


def for_version(version) -> Schemas:
    return pick(_BY_VERSION, version)
