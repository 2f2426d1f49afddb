"""Units of work on usages: a provider's, and a project's (GET /usages)."""

from __future__ import annotations

from sqlalchemy.engine import Connection

from placement_svc import microversion as mv
from placement_svc.db import inventories, names, providers
from placement_svc.db import usages as store


def for_provider(conn: Connection, uuid: str) -> tuple[int, dict[str, int]]:
    """The provider's generation and the amount used of each class it has
    inventory of (0 for one without allocations)."""
    provider = providers.get(conn, uuid)
    used = inventories.usage_by_class(conn, provider.id)
    classes = [inv.resource_class for inv in inventories.list_for(conn, provider.id)]
    ids = names.resource_class_ids(conn, classes)
    return provider.generation, {name: used.get(ids[name], 0) for name in classes}


def totals(
    conn: Connection,
    version,
    project_id: str,
    user_id: str | None = None,
    consumer_type: str | None = None,
) -> dict:
    """A project's (and user's) usage: per class, grouped by consumer type from 1.38."""
    if version >= mv.CONSUMER_TYPES:
        return store.by_type(conn, project_id, user_id, consumer_type)
    return store.by_class(conn, project_id, user_id)
