"""Name <-> id look-ups for resource classes and traits, one query per batch."""

from __future__ import annotations

from collections.abc import Iterable

import sqlalchemy as sa
from sqlalchemy.engine import Connection

from placement_svc.db import tables

RC = tables.resource_classes
TRAIT = tables.traits


def _ids(conn: Connection, table: sa.Table, names: Iterable[str]) -> dict[str, int]:
    # A NUL byte cannot be in a stored name (PostgreSQL refuses it in queries).
    wanted = {name for name in names if "\x00" not in name}
    if not wanted:
        return {}
    rows = conn.execute(_BY_NAMES[table.name], {"names": sorted(wanted)})
    return {row.name: row.id for row in rows}


# Built once (SQLAlchemy keys a statement by walking it, once per statement
# object): the names bound as one expanding parameter.
_BY_NAMES = {
    table.name: sa.select(table.c.name, table.c.id).where(
        table.c.name.in_(sa.bindparam("names", expanding=True))
    )
    for table in (RC, TRAIT)
}


def resource_class_ids(conn: Connection, names: Iterable[str]) -> dict[str, int]:
    return _ids(conn, RC, names)


def trait_ids(conn: Connection, names: Iterable[str]) -> dict[str, int]:
    return _ids(conn, TRAIT, names)


def resource_class_names(conn: Connection, ids: Iterable[int] | None = None) -> dict[int, str]:
    stmt = sa.select(RC.c.id, RC.c.name)
    if ids is not None:
        stmt = stmt.where(RC.c.id.in_(set(ids)))
    return {row.id: row.name for row in conn.execute(stmt)}
