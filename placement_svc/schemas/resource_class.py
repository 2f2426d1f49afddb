"""Request schemas for /resource_classes."""

from placement_svc.schemas.common import CUSTOM_RESOURCE_CLASS

# POST /resource_classes (1.2+) and PUT /resource_classes/{name} (1.2-1.6).
NAME_BODY = {
    "type": "object",
    "properties": {"name": CUSTOM_RESOURCE_CLASS},
    "required": ["name"],
    "additionalProperties": False,
}
