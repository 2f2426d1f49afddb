"""Request schemas for /resource_classes."""

from placement_svc import microversion as mv
from placement_svc.schemas.common import CUSTOM_RESOURCE_CLASS, Schema, pick

# POST /resource_classes (1.2+), PUT /resource_classes/{name} (1.2-1.6) and,
# from 1.7, the name in the URL of a bodiless PUT.
NAME_BODY = Schema(
    {
        "type": "object",
        "properties": {"name": CUSTOM_RESOURCE_CLASS},
        "required": ["name"],
        "additionalProperties": False,
    }
)

_BY_VERSION = [(mv.RESOURCE_CLASSES, NAME_BODY)]


def for_version(version) -> Schema:
    return pick(_BY_VERSION, version)
