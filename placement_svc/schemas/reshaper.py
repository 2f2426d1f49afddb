"""Schemas for POST /reshaper (from 1.30).

The body names the complete new inventory of each provider it reshapes and
the complete new allocations of each consumer it moves, in the form POST
/allocations takes (consumer generations required; mappings from 1.34;
consumer types from 1.38).
"""

from placement_svc import microversion as mv
from placement_svc.schemas import allocation
from placement_svc.schemas.common import Schema, pick
from placement_svc.schemas.inventory import RECORD

# One provider's new inventory, as PUT /resource_providers/{uuid}/inventories
# takes it. Classes are not restricted here: an unknown one is a 400 later.
PROVIDER_INVENTORY = {
    "type": "object",
    "properties": {
        "resource_provider_generation": {"type": "integer"},
        "inventories": {
            "type": "object",
            "patternProperties": {allocation.RESOURCE_CLASS_KEY: RECORD},
        },
    },
    "required": ["resource_provider_generation", "inventories"],
    "additionalProperties": False,
}

INVENTORIES = {
    "type": "object",
    "minProperties": 1,
    "patternProperties": {allocation.UUID_KEY: PROVIDER_INVENTORY},
    "additionalProperties": False,
}


def _body(consumer: dict) -> Schema:
    return Schema(
        {
            "type": "object",
            "properties": {
                "inventories": INVENTORIES,
                "allocations": allocation.by_consumer(consumer, min_consumers=0),
            },
            "required": ["inventories", "allocations"],
            "additionalProperties": False,
        }
    )


POST_V1_30 = _body(allocation.CONSUMER_V1_28)
POST_V1_34 = _body(allocation.CONSUMER_V1_34)
POST_V1_38 = _body(allocation.CONSUMER_V1_38)

_BY_VERSION = [
    (mv.RESHAPER, POST_V1_30),
    (mv.MAPPINGS, POST_V1_34),
    (mv.CONSUMER_TYPES, POST_V1_38),
]


def for_version(version) -> Schema:
    return pick(_BY_VERSION, version)
