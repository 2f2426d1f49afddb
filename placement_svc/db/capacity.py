"""What the capacity rules (ops/capacity.py) check an allocation write against.

The classes' ids with the touched providers' inventories of them, in one
statement; their usage, in another; the consumers' old allocations removed
with what they held, in one more where the database returns what a DELETE
removed (two on MySQL). Each statement is built once and is the same
whatever the number of providers, classes and consumers.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable
from typing import Any

import sqlalchemy as sa
from sqlalchemy.engine import Connection

from placement_svc.db import holds, tables

INV = tables.inventories
ALLOC = tables.allocations
RC = tables.resource_classes


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
        holds.live(),  # a hold that has expired holds nothing (1.51)
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
