"""Traits of providers."""

from __future__ import annotations

import datetime

import sqlalchemy as sa
from sqlalchemy.engine import Connection

from placement_svc.db import tables
from placement_svc.db.records import Named

TRAIT = tables.traits
RPT = tables.resource_provider_traits


def for_provider(conn: Connection, provider_id: int) -> list[Named]:
    rows = conn.execute(
        sa.select(TRAIT)
        .join(RPT, RPT.c.trait_id == TRAIT.c.id)
        .where(RPT.c.resource_provider_id == provider_id)
        .order_by(TRAIT.c.name)
    )
    return [Named(r.id, r.name, r.created_at, r.updated_at) for r in rows]


def replace(conn: Connection, provider_id: int, trait_ids: set[int]) -> bool:
    """Make the provider's traits exactly ``trait_ids``; True when that changed anything."""
    current = {
        row.trait_id
        for row in conn.execute(
            sa.select(RPT.c.trait_id).where(RPT.c.resource_provider_id == provider_id)
        )
    }
    gone = current - trait_ids
    if gone:
        conn.execute(
            sa.delete(RPT).where(
                RPT.c.resource_provider_id == provider_id, RPT.c.trait_id.in_(gone)
            )
        )
    new = trait_ids - current
    if new:
        now = datetime.datetime.now(datetime.timezone.utc).replace(tzinfo=None)
        conn.execute(
            sa.insert(RPT),
            [{"resource_provider_id": provider_id, "trait_id": t, "created_at": now} for t in new],
        )
    return bool(gone or new)
