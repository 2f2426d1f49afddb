"""What a provider's sub-resources hold, for many providers at once: one
statement each for inventories, traits, aggregates and usages, whatever the
number of providers (``include=`` on GET /resource_providers, 1.45).

Each answers in the order its single-provider read gives (inventories by
class name, traits by id, aggregates by uuid), keyed by provider id; a
provider with none is absent.
"""

from __future__ import annotations

from collections.abc import Collection

import sqlalchemy as sa
from sqlalchemy.engine import Connection

from placement_svc.db import holds, tables
from placement_svc.db import inventories as inventories_store
from placement_svc.db.inventories import Inventory

INV = tables.inventories
RC = tables.resource_classes
ALLOC = tables.allocations
TRAIT = tables.traits
RPT = tables.resource_provider_traits
AGG = tables.placement_aggregates
RPA = tables.resource_provider_aggregates


def inventories(conn: Connection, ids: Collection[int]) -> dict[int, list[Inventory]]:
    found: dict[int, list[Inventory]] = {}
    if not ids:
        return found
    rows = conn.execute(
        sa.select(INV, RC.c.name.label("rc_name"))
        .join(RC, RC.c.id == INV.c.resource_class_id)
        .where(INV.c.resource_provider_id.in_(sorted(ids)))
        .order_by(INV.c.resource_provider_id, RC.c.name)
    )
    for row in rows:
        found.setdefault(row.resource_provider_id, []).append(inventories_store.record(row))
    return found


def traits(conn: Connection, ids: Collection[int]) -> dict[int, list[str]]:
    return _listed(conn, ids, RPT, TRAIT.c.name, TRAIT.c.id == RPT.c.trait_id, TRAIT.c.id)


def aggregates(conn: Connection, ids: Collection[int]) -> dict[int, list[str]]:
    return _listed(conn, ids, RPA, AGG.c.uuid, AGG.c.id == RPA.c.aggregate_id, AGG.c.uuid)


def _listed(
    conn: Connection,
    ids: Collection[int],
    link: sa.Table,
    value: sa.ColumnElement,
    joined: sa.ColumnElement[bool],
    order: sa.ColumnElement,
) -> dict[int, list[str]]:
    """provider -> ``value`` of each row linked to it through ``link``."""
    found: dict[int, list[str]] = {}
    if not ids:
        return found
    rows = conn.execute(
        sa.select(link.c.resource_provider_id, value)
        .join_from(link, value.table, joined)
        .where(link.c.resource_provider_id.in_(sorted(ids)))
        .order_by(link.c.resource_provider_id, order)
    )
    for pid, name in rows:
        found.setdefault(pid, []).append(name)
    return found


def used(conn: Connection, ids: Collection[int]) -> dict[int, dict[str, int]]:
    """provider -> class name -> amount allocated (classes with allocations only)."""
    found: dict[int, dict[str, int]] = {}
    if not ids:
        return found
    rows = conn.execute(
        sa.select(ALLOC.c.resource_provider_id, RC.c.name, sa.func.sum(ALLOC.c.used))
        .join(RC, RC.c.id == ALLOC.c.resource_class_id)
        .where(ALLOC.c.resource_provider_id.in_(sorted(ids)), holds.live())
        .group_by(ALLOC.c.resource_provider_id, RC.c.name)
    )
    for pid, name, amount in rows:
        found.setdefault(pid, {})[name] = int(amount)
    return found
