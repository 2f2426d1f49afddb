"""Units of work on traits: custom ones (CUSTOM_*) are the client's, standard
ones (os-traits) read-only."""

from __future__ import annotations

from sqlalchemy.engine import Connection

from placement_svc.db import traits as store
from placement_svc.ops.exceptions import StandardTrait

# Reads and a create with no rule beyond the data layer's.
list_filtered = store.list_filtered
get = store.get
ensure = store.ensure


def delete(conn: Connection, name: str) -> None:
    """The trait must exist (404), be custom (400) and be unused (409).

    Upstream calls any name without the CUSTOM_ prefix standard here.
    """
    trait = store.get(conn, name)
    if not name.startswith("CUSTOM_"):
        raise StandardTrait(name)
    store.delete(conn, trait)
