"""What a provider's sub-resources hold, for many providers at once: one
statement each for inventories, traits, aggregates and usages, whatever the
number of providers (``include=`` on GET /resource_providers, 1.45).

Each answers in the order its single-provider read gives (inventories by
class name, traits by id, aggregates by uuid), keyed by provider id; a
provider with none is absent.

Of a few providers, the statements name them (an IN list); of more than
``LISTED_AT_MOST``, they read every provider's rows and keep those asked
for: a list of thousands (an operator's whole cloud) would otherwise be a
statement of thousands of parameters, compiled anew each time, and past
SQLite's 32,766 parameters not run at all. Rows are fetched all at once
(a row at a time costs SQLAlchemy a call each: a third of the time of a
10,000-provider read).
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

LISTED_AT_MOST = 500


def _of(column: sa.ColumnElement, ids: Collection[int]) -> tuple[list, set[int] | None]:
    """The WHERE of a read of ``ids``' rows, and the ids to keep of what it
    answers (None: all of it)."""
    if len(ids) <= LISTED_AT_MOST:
        return [column.in_(sorted(ids))], None
    return [], set(ids)


def inventories(conn: Connection, ids: Collection[int]) -> dict[int, list[Inventory]]:
    found: dict[int, list[Inventory]] = {}
    if not ids:
        return found
    where, keep = _of(INV.c.resource_provider_id, ids)
    rows = conn.execute(
        sa.select(
            INV.c.resource_provider_id,
            RC.c.name,
            *(INV.c[name] for name in inventories_store.FIELDS),
            INV.c.created_at,
            INV.c.updated_at,
        )
        .join(RC, RC.c.id == INV.c.resource_class_id)
        .where(*where)
        .order_by(INV.c.resource_provider_id, RC.c.name)
    ).all()
    for pid, *fields in rows:  # Inventory's fields, in its order
        if keep is None or pid in keep:
            found.setdefault(pid, []).append(Inventory(*fields))
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
    where, keep = _of(link.c.resource_provider_id, ids)
    rows = conn.execute(
        sa.select(link.c.resource_provider_id, value)
        .join_from(link, value.table, joined)
        .where(*where)
        .order_by(link.c.resource_provider_id, order)
    ).all()
    for pid, name in rows:
        if keep is None or pid in keep:
            found.setdefault(pid, []).append(name)
    return found


def used(conn: Connection, ids: Collection[int]) -> dict[int, dict[str, int]]:
    """provider -> class name -> amount allocated (classes with allocations only)."""
    found: dict[int, dict[str, int]] = {}
    if not ids:
        return found
    where, keep = _of(ALLOC.c.resource_provider_id, ids)
    rows = conn.execute(
        sa.select(ALLOC.c.resource_provider_id, RC.c.name, sa.func.sum(ALLOC.c.used))
        .join(RC, RC.c.id == ALLOC.c.resource_class_id)
        .where(*where, holds.live())
        .group_by(ALLOC.c.resource_provider_id, RC.c.name)
    ).all()
    for pid, name, amount in rows:
        if keep is None or pid in keep:
            found.setdefault(pid, {})[name] = int(amount)
    return found
