"""UUID spelling rules shared by schemas and query parsers (no web or DB imports)."""

from __future__ import annotations

import uuid as uuidlib


def is_uuid_like(value) -> bool:
    """What upstream accepts as a uuid: any spelling uuid.UUID reads back the same
    (with or without dashes, braces or a urn:uuid: prefix, any case)."""
    if not isinstance(value, str):
        return False
    try:
        parsed = uuidlib.UUID(value)
    except ValueError:
        return False
    bare = value.lower()
    for noise in ("urn:", "uuid:", "{", "}", "-"):
        bare = bare.replace(noise, "")
    return parsed.hex == bare
