"""Schemas for PUT /resource_providers/{uuid}/aggregates."""

from placement_svc import microversion as mv
from placement_svc.schemas.common import UUID, Schema, pick

_UUIDS = {"type": "array", "items": UUID, "uniqueItems": True}

# 1.1 - 1.18: a bare list of aggregate uuids.
REPLACE_V1_1 = Schema(_UUIDS)

# 1.19+: the list with the provider generation it was read at.
REPLACE_V1_19 = Schema(
    {
        "type": "object",
        "properties": {"aggregates": _UUIDS, "resource_provider_generation": {"type": "integer"}},
        "required": ["aggregates", "resource_provider_generation"],
        "additionalProperties": False,
    }
)

_BY_VERSION = [(mv.AGGREGATES, REPLACE_V1_1), (mv.AGGREGATE_GENERATION, REPLACE_V1_19)]


def for_version(version) -> Schema:
    return pick(_BY_VERSION, version)
