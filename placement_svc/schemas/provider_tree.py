"""Schemas for PUT /resource_provider_trees/{root_uuid} (1.49, placement-svc's
own): a whole tree of providers, with each one's inventories, traits and
aggregates, in one body. GET answers the same shape (schemas/responses.py)."""

from placement_svc.schemas.aggregate import REPLACE_V1_1 as AGGREGATE_UUIDS
from placement_svc.schemas.common import TRAIT_NAME, UUID, Schema
from placement_svc.schemas.inventory import FIELDS as INVENTORY_FIELDS
from placement_svc.schemas.resource_provider import NAME

# At most this many providers in one tree write: a compute host with a child
# per NUMA node, NIC, GPU or accelerator has tens; the bound keeps one request
# from holding a worker (and a transaction) for minutes.
MAX_PROVIDERS = 1000

INVENTORY = {
    "type": "object",
    "properties": INVENTORY_FIELDS,
    "required": ["total"],
    "additionalProperties": False,
}

PROVIDER = {
    "type": "object",
    "properties": {
        "uuid": UUID,
        "name": {**NAME, "minLength": 1},
        "parent_provider_uuid": {"anyOf": [UUID, {"type": "null"}]},
        "generation": {"type": ["integer", "null"]},
        # Any key is taken as a class name, checked when looked up (as PUT
        # .../inventories does): an unknown standard class is named in a 400.
        "inventories": {"type": "object", "additionalProperties": INVENTORY},
        "traits": {"type": "array", "items": TRAIT_NAME, "uniqueItems": True},
        "aggregates": dict(AGGREGATE_UUIDS),
    },
    "required": ["name", "parent_provider_uuid"],
    "additionalProperties": False,
}

TREE = Schema(
    {
        "type": "object",
        "properties": {
            "root": UUID,
            "providers": {
                "type": "array",
                "minItems": 1,
                "maxItems": MAX_PROVIDERS,
                "items": PROVIDER,
            },
        },
        "required": ["root", "providers"],
        "additionalProperties": False,
    }
)
