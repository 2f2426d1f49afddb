"""Link tables between a provider and other rows (its traits, its aggregates)."""

from __future__ import annotations

import sqlalchemy as sa
from sqlalchemy.engine import Connection

from placement_svc.db import tables


def replace(
    conn: Connection, table: sa.Table, column: str, provider_id: int, wanted: set[int]
) -> bool:
    """Make the provider linked to exactly ``wanted`` ids through ``table.<column>``;
    returns True when that changed anything."""
    other = table.c[column]
    mine = table.c.resource_provider_id == provider_id
    current = {row[0] for row in conn.execute(sa.select(other).where(mine))}
    gone = current - wanted
    if gone:
        conn.execute(sa.delete(table).where(mine, other.in_(gone)))
    new = wanted - current
    if new:
        now = tables.utcnow()
        conn.execute(
            sa.insert(table),
            [{"resource_provider_id": provider_id, column: i, "created_at": now} for i in new],
        )
    return bool(gone or new)
