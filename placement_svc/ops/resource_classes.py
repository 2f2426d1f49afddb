"""Units of work on resource classes: custom ones (CUSTOM_*) are the client's,
standard ones (os-resource-classes) read-only."""

from __future__ import annotations

from sqlalchemy.engine import Connection

from placement_svc.db import resource_classes as store
from placement_svc.db.exceptions import ResourceClassExists, ResourceClassNotFound
from placement_svc.db.records import Named
from placement_svc.ops.exceptions import StandardResourceClass

# Reads and a create with no rule beyond the data layer's.
list_all = store.list_all
get = store.get
create = store.create


def rename(conn: Connection, name: str, new_name: str) -> Named:
    """PUT before 1.7: the class must exist (404) and be custom (400)."""
    rc = store.get(conn, name)
    if store.is_standard(rc):
        raise StandardResourceClass(name)
    return store.rename(conn, rc, new_name)


def ensure(conn: Connection, name: str) -> tuple[Named, bool]:
    """PUT from 1.7: the class, created if missing; the flag says whether it was."""
    try:
        return store.get(conn, name), False
    except ResourceClassNotFound:
        pass
    try:
        return store.create(conn, name), True
    except ResourceClassExists:  # created meanwhile by another writer
        return store.get(conn, name), False


def delete(conn: Connection, name: str) -> None:
    """The class must exist (404), be custom (400) and be unused (409)."""
    rc = store.get(conn, name)
    if store.is_standard(rc):
        raise StandardResourceClass(name)
    store.delete(conn, rc)
