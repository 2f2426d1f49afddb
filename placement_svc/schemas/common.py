"""Named parts the per-family schemas are composed from."""

CUSTOM_NAME_PATTERN = "^CUSTOM_[A-Z0-9_]+$"

# A resource class name as written by clients; 255 is the column's length.
CUSTOM_RESOURCE_CLASS = {"type": "string", "pattern": CUSTOM_NAME_PATTERN, "maxLength": 255}

TRAIT_NAME = {"type": "string", "minLength": 1, "maxLength": 255}
CUSTOM_TRAIT_NAME = {**TRAIT_NAME, "pattern": CUSTOM_NAME_PATTERN}

UUID = {"type": "string", "format": "uuid"}
