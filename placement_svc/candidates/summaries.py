"""The SQL only provider summaries need: from 1.27 a summary lists every
class its provider has inventory of, not only the requested ones.

The requested classes' capacity and usage come with the search (found.room
and found.full); this reads the rest, for the providers the answer
summarises only, so a request that summarises few providers reads little.
"""

from __future__ import annotations

import sqlalchemy as sa
from sqlalchemy.engine import Connection

from placement_svc.db import filters, tables

INV = tables.inventories
ALLOC = tables.allocations


def other_inventories(
    conn: Connection, provider_ids: set[int], requested: set[str]
) -> dict[int, dict[str, tuple[int, int]]]:
    """provider -> class -> (capacity, used) of the classes not requested, for
    provider summaries from 1.27 (the requested ones are in found already).

    First whether any provider at all has inventory of another class (one
    index probe: often none has); then those inventories, then their used
    amounts if there are any.
    """
    if not provider_ids:
        return {}
    rc = tables.resource_classes
    other_class = INV.c.resource_class_id.not_in(
        sa.select(rc.c.id).where(rc.c.name.in_(sorted(requested)))
    )
    if conn.execute(sa.select(INV.c.id).where(other_class).limit(1)).first() is None:
        return {}
    rows = conn.execute(
        sa.select(
            INV.c.resource_provider_id,
            INV.c.resource_class_id,
            rc.c.name,
            INV.c.total,
            INV.c.reserved,
            INV.c.allocation_ratio,
        )
        .join(rc, rc.c.id == INV.c.resource_class_id)
        .where(filters.ids_in(INV.c.resource_provider_id, provider_ids), other_class),
        execution_options=filters.NO_STATEMENT_CACHE,
    ).all()
    if not rows:
        return {}
    used = {
        (pid, rc_id): int(amount)
        for pid, rc_id, amount in conn.execute(
            sa.select(
                ALLOC.c.resource_provider_id,
                ALLOC.c.resource_class_id,
                sa.func.sum(ALLOC.c.used),
            )
            .where(
                filters.ids_in(ALLOC.c.resource_provider_id, {row[0] for row in rows}),
                ALLOC.c.resource_class_id.in_(sorted({row[1] for row in rows})),
            )
            .group_by(ALLOC.c.resource_provider_id, ALLOC.c.resource_class_id),
            execution_options=filters.NO_STATEMENT_CACHE,
        ).all()
    }
    result: dict[int, dict[str, tuple[int, int]]] = {}
    for pid, rc_id, name, total, reserved, ratio in rows:
        result.setdefault(pid, {})[name] = (
            int((total - reserved) * ratio),
            used.get((pid, rc_id), 0),
        )
    return result
