"""Schemas for /traits."""

from placement_svc.schemas.common import CUSTOM_TRAIT_NAME, TRAIT_NAME

# PUT /traits/{name}: the name itself must be a custom trait.
CUSTOM_TRAIT = CUSTOM_TRAIT_NAME

# PUT /resource_providers/{uuid}/traits
PROVIDER_TRAITS = {
    "type": "object",
    "properties": {
        "traits": {"type": "array", "items": TRAIT_NAME},
        "resource_provider_generation": {"type": "integer"},
    },
    "required": ["traits", "resource_provider_generation"],
    "additionalProperties": False,
}

# GET /traits query string
LIST_QUERY = {
    "type": "object",
    "properties": {"name": {"type": "string"}, "associated": {"type": "string"}},
    "additionalProperties": False,
}
