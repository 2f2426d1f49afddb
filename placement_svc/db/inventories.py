"""Inventories of a provider, and the usage figures checked against them."""

from __future__ import annotations

import datetime
import logging
import math
import sys
from dataclasses import dataclass

import sqlalchemy as sa
from sqlalchemy.engine import Connection

from placement_svc.db import holds, names, tables
from placement_svc.db.exceptions import InventoryInUse, UnknownResourceClass, UnstorableValue
from placement_svc.db.providers import Provider, bump_generation

LOG = logging.getLogger(__name__)
INV = tables.inventories
ALLOC = tables.allocations
RC = tables.resource_classes

MAX_INT = tables.MAX_INT
FIELDS = ("total", "reserved", "min_unit", "max_unit", "step_size", "allocation_ratio")
DEFAULTS = {
    "reserved": 0,
    "min_unit": 1,
    "max_unit": MAX_INT,
    "step_size": 1,
    "allocation_ratio": 1.0,
}


@dataclass(frozen=True)
class Inventory:
    resource_class: str
    total: int
    reserved: int
    min_unit: int
    max_unit: int
    step_size: int
    allocation_ratio: float
    created_at: datetime.datetime | None = None
    updated_at: datetime.datetime | None = None

    @property
    def capacity(self) -> int:
        """int((total - reserved) * allocation_ratio), as upstream. The schema
        sets no lower bound on the ratio, and one far below zero (-1e308)
        overflows the product to -inf, which int() refuses: such a capacity
        is as negative as a float can say, which is all a rule asks of it."""
        product = (self.total - self.reserved) * self.allocation_ratio
        if math.isinf(product):
            return int(math.copysign(sys.float_info.max, product))
        return int(product)

    @property
    def modified(self) -> datetime.datetime | None:
        return self.updated_at or self.created_at

    def fields(self) -> dict:
        """FIELDS, by name (written out: a list of thousands asks each)."""
        return {
            "total": self.total,
            "reserved": self.reserved,
            "min_unit": self.min_unit,
            "max_unit": self.max_unit,
            "step_size": self.step_size,
            "allocation_ratio": self.allocation_ratio,
        }


def with_defaults(resource_class: str, data: dict) -> Inventory:
    """An inventory record from a body's fields. An allocation_ratio of NaN
    or -Infinity (JSON as Python reads it, and the schema's "number" and
    maximum let both through) is refused as unstorable: MySQL refuses both,
    SQLite turns NaN into NULL, and no capacity rule can compare with NaN."""
    values = {**DEFAULTS, **{k: v for k, v in data.items() if k in FIELDS}}
    ratio = float(values["allocation_ratio"])
    if not math.isfinite(ratio):
        raise UnstorableValue(f"allocation_ratio {ratio} is not a finite number")
    values["allocation_ratio"] = ratio
    return Inventory(resource_class=resource_class, **values)


def list_for(conn: Connection, provider_id: int) -> list[Inventory]:
    return [record(row) for row in conn.execute(_LIST_FOR, {"provider_id": provider_id})]


# Reads nova's periodic tasks make of every provider, built once: SQLAlchemy
# keys a statement by walking it, once per statement object.
_LIST_FOR = (
    sa.select(INV, RC.c.name.label("rc_name"))
    .join(RC, RC.c.id == INV.c.resource_class_id)
    .where(INV.c.resource_provider_id == sa.bindparam("provider_id"))
    .order_by(RC.c.name)
)


def record(row: sa.Row) -> Inventory:
    """An inventory row read with its class's name as ``rc_name``."""
    return Inventory(
        resource_class=row.rc_name,
        **{name: getattr(row, name) for name in FIELDS},
        created_at=row.created_at,
        updated_at=row.updated_at,
    )


def usage_by_class(conn: Connection, provider_id: int) -> dict[int, int]:
    rows = conn.execute(_USAGE_BY_CLASS, {"provider_id": provider_id})
    return {row.resource_class_id: int(row.used) for row in rows}


_USAGE_BY_CLASS = (
    sa.select(ALLOC.c.resource_class_id, sa.func.sum(ALLOC.c.used).label("used"))
    .where(ALLOC.c.resource_provider_id == sa.bindparam("provider_id"), holds.live())
    .group_by(ALLOC.c.resource_class_id)
)


def replace(
    conn: Connection,
    provider: Provider,
    wanted: list[Inventory],
    seen_generation: int | None = None,
    bump: bool = True,
) -> int:
    """Make the provider's inventory exactly ``wanted``; returns the new generation.

    Removing a class that has allocations is refused (InventoryInUse);
    shrinking below current usage is allowed with a warning, as upstream
    allows it. The generation must still be ``seen_generation`` (default:
    as read), or ConcurrentUpdate. ``bump=False``: the caller has moved the
    generation already (a tree write moves each provider's once).
    """
    rc_ids = names.resource_class_ids(conn, (inv.resource_class for inv in wanted))
    unknown = tuple(inv.resource_class for inv in wanted if inv.resource_class not in rc_ids)
    if unknown:
        raise UnknownResourceClass(unknown)
    # The inventories with what is used of each, in one statement (there are
    # allocations only of a class the provider has inventory of).
    in_use = (
        sa.select(sa.func.coalesce(sa.func.sum(ALLOC.c.used), 0))
        .where(
            ALLOC.c.resource_provider_id == INV.c.resource_provider_id,
            ALLOC.c.resource_class_id == INV.c.resource_class_id,
            holds.live(),
        )
        .scalar_subquery()
    )
    rows = conn.execute(
        sa.select(INV, in_use.label("used")).where(INV.c.resource_provider_id == provider.id)
    ).all()
    current = {row.resource_class_id: row for row in rows}
    used = {row.resource_class_id: int(row.used) for row in rows if row.used}
    wanted_ids = {rc_ids[inv.resource_class]: inv for inv in wanted}
    removed = [rc_id for rc_id in current if rc_id not in wanted_ids]
    busy = [rc_id for rc_id in removed if used.get(rc_id)]
    if busy:
        class_names = names.resource_class_names(conn, busy)
        raise InventoryInUse(provider.uuid, tuple(class_names[rc_id] for rc_id in sorted(busy)))
    generation = bump_generation(conn, provider, seen_generation) if bump else provider.generation
    if removed:
        conn.execute(
            sa.delete(INV).where(
                INV.c.resource_provider_id == provider.id, INV.c.resource_class_id.in_(removed)
            )
        )
    now = tables.utcnow()
    for rc_id, inv in wanted_ids.items():
        if rc_id in current:
            row = current[rc_id]
            if any(getattr(row, f) != getattr(inv, f) for f in FIELDS):
                conn.execute(
                    sa.update(INV).where(INV.c.id == row.id).values(**inv.fields(), updated_at=now)
                )
        else:
            conn.execute(
                sa.insert(INV).values(
                    resource_provider_id=provider.id, resource_class_id=rc_id, **inv.fields()
                )
            )
        if used.get(rc_id, 0) > inv.capacity:
            LOG.warning(
                "Resource provider %s is now over-capacity for %s",
                provider.uuid,
                inv.resource_class,
            )
    return generation
