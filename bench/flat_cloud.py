"""What bench/candidates.py's flat cloud is made of and bench/scale.py
writes the same: its aggregates' uuids. Standard library only, so that
candidates.py stays runnable against any endpoint without placement-svc,
and neither script imports the other's module for it."""

from __future__ import annotations

import uuid

AGGREGATES = [str(uuid.uuid5(uuid.NAMESPACE_URL, f"bench-aggregate-{n}")) for n in range(10)]
