"""Schemas for inventories (the same at every version)."""

from typing import NamedTuple

from placement_svc import microversion as mv
from placement_svc.schemas.common import Schema, pick

MAX_INT = 2147483647
# The largest single-precision float; allocation_ratio is stored as a float.
SQL_FLOAT_MAX = 3.40282e38

_COUNT = {"type": "integer", "maximum": MAX_INT, "minimum": 1}
FIELDS = {
    "total": _COUNT,
    "reserved": {"type": "integer", "maximum": MAX_INT, "minimum": 0},
    "min_unit": _COUNT,
    "max_unit": _COUNT,
    "step_size": _COUNT,
    "allocation_ratio": {"type": "number", "maximum": SQL_FLOAT_MAX},
}
GENERATION = {"type": "integer"}
RESOURCE_CLASS = {"type": "string", "pattern": "^[A-Z0-9_]+$"}

# One inventory record inside PUT .../inventories (and POST /reshaper)
RECORD = {
    "type": "object",
    "properties": {"resource_provider_generation": GENERATION, **FIELDS},
    "required": ["total"],
    "additionalProperties": False,
}

# POST .../inventories
CREATE = Schema(
    {
        "type": "object",
        "properties": {
            "resource_class": RESOURCE_CLASS,
            "resource_provider_generation": GENERATION,
            **FIELDS,
        },
        "required": ["total", "resource_class"],
        "additionalProperties": False,
    }
)

# PUT .../inventories/{resource_class}
UPDATE_ONE = Schema(
    {
        "type": "object",
        "properties": {"resource_provider_generation": GENERATION, **FIELDS},
        "required": ["total", "resource_provider_generation"],
        "additionalProperties": False,
    }
)

# PUT .../inventories
REPLACE_ALL = Schema(
    {
        "type": "object",
        "properties": {
            "resource_provider_generation": GENERATION,
            # Any key is taken as a class name (an unknown one is refused by name
            # when looked up, as upstream does), every record checked alike.
            "inventories": {"type": "object", "additionalProperties": RECORD},
        },
        "required": ["resource_provider_generation", "inventories"],
        "additionalProperties": False,
    }
)


class Schemas(NamedTuple):
    create: Schema
    update_one: Schema
    replace_all: Schema


_BY_VERSION = [(mv.BASE, Schemas(CREATE, UPDATE_ONE, REPLACE_ALL))]


def for_version(version) -> Schemas:
    return pick(_BY_VERSION, version)
