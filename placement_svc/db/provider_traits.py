"""Traits of providers."""

from __future__ import annotations

import sqlalchemy as sa
from sqlalchemy.engine import Connection

from placement_svc.db import links, tables
from placement_svc.db.records import Named

TRAIT = tables.traits
RPT = tables.resource_provider_traits


def for_provider(
    conn: Connection, provider_id: int, order: sa.ColumnElement = TRAIT.c.id
) -> list[Named]:
    """The provider's traits, in trait id order unless told otherwise.

    Id order is upstream's on SQLite and MySQL, which read the link table's
    (provider, trait) index. PostgreSQL upstream gives the link rows' heap
    order (the order they were added, a PUT adding its new ones in the
    iteration order of a Python set of ids): no rule reproduces that.
    """
    statement = _BY_ID_ORDER if order is TRAIT.c.id else _for_provider(order)
    rows = conn.execute(statement, {"provider_id": provider_id})
    return [Named(r.id, r.name, r.created_at, r.updated_at) for r in rows]


def _for_provider(order: sa.ColumnElement) -> sa.Select:
    return (
        sa.select(TRAIT)
        .join(RPT, RPT.c.trait_id == TRAIT.c.id)
        .where(RPT.c.resource_provider_id == sa.bindparam("provider_id"))
        .order_by(order)
    )


# The commonest, built once (SQLAlchemy keys a statement by walking it, once per object).
_BY_ID_ORDER = _for_provider(TRAIT.c.id)


def replace(conn: Connection, provider_id: int, trait_ids: set[int]) -> bool:
    """Make the provider's traits exactly ``trait_ids``; True when that changed anything."""
    return links.replace(conn, RPT, "trait_id", provider_id, set(trait_ids))
