"""Schemas for the query of GET /usages (from 1.9)."""

from placement_svc import microversion as mv
from placement_svc.schemas.allocation import OWNER_ID as _ID
from placement_svc.schemas.common import TEXT, Param, Schema, pick

QUERY_V1_9 = Schema(
    {
        "type": "object",
        "properties": {"project_id": _ID, "user_id": _ID},
        "required": ["project_id"],
        "additionalProperties": False,
    }
)

# From 1.38: a consumer type name, or "all" / "unknown" (the pattern is
# upstream's, whose "^all" is unanchored at the end).
CONSUMER_TYPE = {
    "type": "string",
    "pattern": "^[A-Z0-9_]+$|^all|^unknown$",
    "minLength": 1,
    "maxLength": 255,
}

QUERY_V1_38 = Schema(
    {
        "type": "object",
        "properties": {"project_id": _ID, "user_id": _ID, "consumer_type": CONSUMER_TYPE},
        "required": ["project_id"],
        "additionalProperties": False,
    }
)

# What each parameter means (the OpenAPI document's words).
QUERY_WORDS = {
    "project_id": Param(TEXT, "The project whose usages to total (required)."),
    "user_id": Param(TEXT, "Only the usages of this user in the project."),
    "consumer_type": Param(
        TEXT,
        "Only the usages of consumers of this type; all for every type, shown apart; "
        "unknown for consumers without one.",
    ),
}

_BY_VERSION = [(mv.USAGES, QUERY_V1_9), (mv.CONSUMER_TYPES, QUERY_V1_38)]


def for_version(version) -> Schema:
    return pick(_BY_VERSION, version)
