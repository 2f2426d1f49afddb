"""The capacity rules every allocation write is checked against.

Per provider and class: the inventory must exist; each amount must respect
min_unit, max_unit and step_size; and the provider's usage after the write
must fit (total - reserved) * allocation_ratio, unless the provider was
already over capacity and the write leaves it no worse (upstream lets such a
write through, so that shrinking an inventory never traps its consumers).
The figures come from one statement for all touched providers and classes,
and the classes' ids and inventories from another.
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
RC = tables.resource_classes


@dataclass(frozen=True)
class Claim:
    """An amount of a class a consumer is to hold on a provider (0: to remove)."""

    consumer_uuid: str
    provider: Provider
    resource_class: str
    amount: int


def _ids(name: str) -> sa.BindParameter:
    return sa.bindparam(name, expanding=True)


# The statements of every claim, built once (see providers._SELECT).
_USAGE = (
    sa.select(
        ALLOC.c.resource_provider_id,
        ALLOC.c.resource_class_id,
        sa.func.sum(ALLOC.c.used).label("used"),
    )
    .where(
        ALLOC.c.resource_provider_id.in_(_ids("provider_ids")),
        ALLOC.c.resource_class_id.in_(_ids("rc_ids")),
    )
    .group_by(ALLOC.c.resource_provider_id, ALLOC.c.resource_class_id)
)
_USAGE_OF_CONSUMERS = _USAGE.where(ALLOC.c.consumer_id.in_(_ids("consumer_uuids")))
_CLASSES_AND_INVENTORIES = (
    sa.select(
        RC.c.id.label("rc_id"),
        RC.c.name.label("rc_name"),
        INV.c.resource_provider_id,
        INV.c.total,
        INV.c.reserved,
        INV.c.min_unit,
        INV.c.max_unit,
        INV.c.step_size,
        INV.c.allocation_ratio,
    )
    .select_from(
        RC.outerjoin(
            INV,
            sa.and_(
                INV.c.resource_class_id == RC.c.id,
                INV.c.resource_provider_id.in_(_ids("provider_ids")),
            ),
        )
    )
    .where(RC.c.name.in_(_ids("names")))
)
_REMOVE = sa.delete(ALLOC).where(ALLOC.c.consumer_id.in_(_ids("consumer_uuids")))
_REMOVE_RETURNING = _REMOVE.returning(
    ALLOC.c.resource_provider_id, ALLOC.c.resource_class_id, ALLOC.c.used
)


def usage(
    conn: Connection, provider_ids: Iterable[int], rc_ids: Iterable[int]
) -> dict[tuple[int, int], int]:
    """{(provider id, class id): used} for the given providers and classes."""
    rows = conn.execute(
        _USAGE, {"provider_ids": sorted(set(provider_ids)), "rc_ids": sorted(set(rc_ids))}
    )
    return {(row.resource_provider_id, row.resource_class_id): int(row.used) for row in rows}


def classes_and_inventories(
    conn: Connection, provider_ids: list[int], names: Iterable[str]
) -> tuple[dict[str, int], dict[tuple[int, int], Any]]:
    """({class name: id}, {(provider id, class id): inventory row}) for the
    classes named that exist and those of their inventories the providers
    have, in one statement."""
    wanted = {name for name in names if "\x00" not in name}  # no stored name has a NUL
    if not wanted:
        return {}, {}
    rows = conn.execute(
        _CLASSES_AND_INVENTORIES,
        {"provider_ids": sorted(set(provider_ids)), "names": sorted(wanted)},
    )
    rc_ids: dict[str, int] = {}
    inventories: dict[tuple[int, int], Any] = {}
    for row in rows:
        rc_ids[row.rc_name] = row.rc_id
        if row.resource_provider_id is not None:
            inventories[(row.resource_provider_id, row.rc_id)] = row
    return rc_ids, inventories


def remove(
    conn: Connection, consumer_uuids: list[str], provider_ids: list[int], rc_ids: Iterable[int]
) -> dict[tuple[int, int], int]:
    """Delete the consumers' allocations; {(provider id, class id): amount
    removed} for the given providers and classes. One statement where the
    database returns what a DELETE removed (SQLite, PostgreSQL, MariaDB)."""
    if not consumer_uuids:
        return {}
    classes, providers = set(rc_ids), set(provider_ids)
    removed: dict[tuple[int, int], int] = defaultdict(int)
    if conn.dialect.delete_returning:
        for row in conn.execute(_REMOVE_RETURNING, {"consumer_uuids": consumer_uuids}):
            if row.resource_provider_id in providers and row.resource_class_id in classes:
                removed[(row.resource_provider_id, row.resource_class_id)] += row.used
        return dict(removed)
    if providers and classes:
        rows = conn.execute(
            _USAGE_OF_CONSUMERS,
            {
                "consumer_uuids": consumer_uuids,
                "provider_ids": sorted(providers),
                "rc_ids": sorted(classes),
            },
        )
        removed.update(
            {(row.resource_provider_id, row.resource_class_id): int(row.used) for row in rows}
        )
    conn.execute(_REMOVE, {"consumer_uuids": consumer_uuids})
    return dict(removed)


def check(
    conn: Connection,
    claims: list[Claim],
    rc_ids: dict[str, int],
    inventories: dict[tuple[int, int], Any],
    removed: dict[tuple[int, int], int],
) -> None:
    """Raise for the first claim (in request order) that does not fit:
    InventoryMissing, AmountViolatesInventory or CapacityExceeded.

    ``inventories`` are those of classes_and_inventories; ``removed`` what
    the consumers held before their old allocations were removed (remove):
    the usage read here is without them.
    """
    provider_ids = {c.provider.id for c in claims}
    class_ids = {rc_ids[c.resource_class] for c in claims}
    if not claims:
        return
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
            if key in removed or key in used_now:
                previous = used + removed.get(key, 0)
                if used + wanted[key] <= previous:
                    continue  # over capacity already, and no worse than before
            raise CapacityExceeded(provider.uuid, name)
