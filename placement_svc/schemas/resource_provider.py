"""Schemas for /resource_providers, one per version range, each readable whole."""

import functools

from placement_svc import microversion as mv
from placement_svc.schemas.common import UUID

NAME = {"type": "string", "maxLength": 200}
PARENT = {"anyOf": [UUID, {"type": "null"}]}


def _body(properties: dict, required=("name",)) -> dict:
    return {
        "type": "object",
        "properties": properties,
        "required": list(required),
        "additionalProperties": False,
    }


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
_LIST_FILTERS = [
    (mv.BASE, {"name": _STRING, "uuid": _QUERY_UUID}),
    (mv.MEMBER_OF, {"member_of": _STRING}),
    (mv.RESOURCES_FILTER, {"resources": _STRING}),
    (mv.NESTED_PROVIDERS, {"in_tree": _QUERY_UUID}),
    (mv.PROVIDERS_REQUIRED, {"required": _STRING}),
]


@functools.lru_cache(maxsize=64)  # one per microversion; callers never mutate it
def list_query(version) -> dict:
    properties: dict = {}
    for since, added in _LIST_FILTERS:
        if version >= since:
            properties.update(added)
    return {"type": "object", "properties": properties, "additionalProperties": False}
