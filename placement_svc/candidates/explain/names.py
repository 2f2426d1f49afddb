"""The SQL of what an explanation or a capacity count names: providers'
names (a Found has uuids only) and, for near misses, each inventory's
total, reserved and allocation ratio (its room is in the Found already).
SQL only; nothing here is read for an empty answer's log line.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

import sqlalchemy as sa
from sqlalchemy.engine import Connection

from placement_svc.candidates.explain.cloud import Inventory
from placement_svc.db import tables

RP = tables.resource_providers
INV = tables.inventories


def provider_names(conn: Connection, ids: Iterable[int] | None = None) -> dict[int, str]:
    """provider id -> name: of ``ids``, or of every provider (None)."""
    query = sa.select(RP.c.id, RP.c.name)
    if ids is not None:
        wanted = sorted(set(ids))
        if not wanted:
            return {}
        query = query.where(RP.c.id.in_(wanted))
    return dict(conn.execute(query).all())


def inventories(conn: Connection, classes: Mapping[str, int]) -> dict[tuple[int, str], Inventory]:
    """(provider, class as the request names it) -> its inventory's total,
    reserved and allocation ratio, for every inventory of these classes
    (name -> id, as the search found them)."""
    if not classes:
        return {}
    names_of: dict[int, list[str]] = {}
    for name, rc_id in classes.items():
        names_of.setdefault(rc_id, []).append(name)
    rows = conn.execute(
        sa.select(
            INV.c.resource_provider_id,
            INV.c.resource_class_id,
            INV.c.total,
            INV.c.reserved,
            INV.c.allocation_ratio,
        ).where(INV.c.resource_class_id.in_(sorted(names_of)))
    ).all()
    return {
        (pid, name): Inventory(total, reserved, float(ratio))
        for pid, rc_id, total, reserved, ratio in rows
        for name in names_of[rc_id]
    }
