"""Link tables between a provider and other rows (its traits, its aggregates)."""

from __future__ import annotations

import functools

import sqlalchemy as sa
from sqlalchemy.engine import Connection

from placement_svc.db import tables


@functools.lru_cache(maxsize=8)
def _statements(table: sa.Table, column: str) -> tuple[sa.Select, sa.Delete]:
    """The read of a provider's links and the delete of some, built once per
    link table (SQLAlchemy keys a statement by walking it, once per object)."""
    other = table.c[column]
    mine = table.c.resource_provider_id == sa.bindparam("provider_id")
    return (
        sa.select(other).where(mine),
        sa.delete(table).where(mine, other.in_(sa.bindparam("gone", expanding=True))),
    )


def replace(
    conn: Connection, table: sa.Table, column: str, provider_id: int, wanted: set[int]
) -> bool:
    """Make the provider linked to exactly ``wanted`` ids through ``table.<column>``;
    returns True when that changed anything."""
    read, delete = _statements(table, column)
    current = {row[0] for row in conn.execute(read, {"provider_id": provider_id})}
    gone = current - wanted
    if gone:
        conn.execute(delete, {"provider_id": provider_id, "gone": sorted(gone)})
    new = wanted - current
    if new:
        now = tables.utcnow()
        conn.execute(
            sa.insert(table),
            [{"resource_provider_id": provider_id, column: i, "created_at": now} for i in new],
        )
    return bool(gone or new)
