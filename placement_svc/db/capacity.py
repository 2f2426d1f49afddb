"""The capacity rules every allocation write is checked against.

Per provider and class: the inventory must exist; each amount must respect
min_unit, max_unit and step_size; and the provider's usage after the write
must fit (total - reserved) * allocation_ratio, unless the provider was
already over capacity and the write leaves it no worse (upstream lets such a
write through, so that shrinking an inventory never traps its consumers).
The figures come from one statement for all touched providers and classes.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

import sqlalchemy as sa
from sqlalchemy.engine import Connection

from placement_svc.db import tables
from placement_svc.db.exceptions import (
    AmountViolatesInventory,
    CapacityExceeded,
    InventoryMissing,
)
from placement_svc.db.providers import Provider

INV = tables.inventories
ALLOC = tables.allocations


@dataclass(frozen=True)
class Claim:
    """An amount of a class a consumer is to hold on a provider (0: to remove)."""

    consumer_uuid: str
    provider: Provider
    resource_class: str
    amount: int


def usage(
    conn: Connection, provider_ids: Iterable[int], rc_ids: Iterable[int]
) -> dict[tuple[int, int], int]:
    """{(provider id, class id): used} for the given providers and classes."""
    rows = conn.execute(
        sa.select(
            ALLOC.c.resource_provider_id,
            ALLOC.c.resource_class_id,
            sa.func.sum(ALLOC.c.used).label("used"),
        )
        .where(
            ALLOC.c.resource_provider_id.in_(set(provider_ids)),
            ALLOC.c.resource_class_id.in_(set(rc_ids)),
        )
        .group_by(ALLOC.c.resource_provider_id, ALLOC.c.resource_class_id)
    )
    return {(row.resource_provider_id, row.resource_class_id): int(row.used) for row in rows}


def _inventories(conn: Connection, provider_ids: set[int], rc_ids: set[int]) -> dict[tuple, Any]:
    rows = conn.execute(
        sa.select(INV).where(
            INV.c.resource_provider_id.in_(provider_ids), INV.c.resource_class_id.in_(rc_ids)
        )
    )
    return {(row.resource_provider_id, row.resource_class_id): row for row in rows}


def check(
    conn: Connection, claims: list[Claim], rc_ids: dict[str, int], before: dict[tuple, int]
) -> None:
    """Raise for the first claim (in request order) that does not fit:
    InventoryMissing, AmountViolatesInventory or CapacityExceeded.

    ``before`` is the usage as it was before the consumers' old allocations
    were removed; the usage read here is without them.
    """
    provider_ids = {c.provider.id for c in claims}
    class_ids = {rc_ids[c.resource_class] for c in claims}
    if not claims:
        return
    inventories = _inventories(conn, provider_ids, class_ids)
    used_now = usage(conn, provider_ids, class_ids)

    with_inventory = {provider_id for provider_id, _rc in inventories}
    missing = list(
        dict.fromkeys(c.provider.uuid for c in claims if c.provider.id not in with_inventory)
    )
    if missing:
        # Upstream names every class of the write, in the order a Python set
        # of their ids iterates: ids are upstream's, so the order is too.
        by_id = {rc_ids[c.resource_class]: c.resource_class for c in claims}
        raise InventoryMissing(tuple(by_id[rc_id] for rc_id in class_ids), tuple(missing))

    wanted: dict = defaultdict(int)
    for claim in claims:
        provider, name = claim.provider, claim.resource_class
        key = (provider.id, rc_ids[name])
        wanted[key] += claim.amount
        if claim.amount == 0:
            continue
        inv = inventories.get(key)
        if inv is None:
            raise InventoryMissing((name,), (provider.uuid,))
        if (
            claim.amount < inv.min_unit
            or claim.amount > inv.max_unit
            or claim.amount % inv.step_size != 0
        ):
            raise AmountViolatesInventory(provider.uuid, name)
        used = used_now.get(key, 0)
        capacity = (inv.total - inv.reserved) * inv.allocation_ratio
        if capacity < used + claim.amount or capacity < used + wanted[key]:
            previous = before.get(key)
            if previous is not None and used + wanted[key] <= previous:
                continue  # over capacity already, and no worse than before
            raise CapacityExceeded(provider.uuid, name)
