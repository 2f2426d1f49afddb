"""Resource classes: standard ones from os-resource-classes, custom ones CUSTOM_*."""

from __future__ import annotations

import os_resource_classes
import sqlalchemy as sa
from sqlalchemy.engine import Connection
from sqlalchemy.exc import IntegrityError

from placement_svc.db import holds, tables
from placement_svc.db.exceptions import (
    ResourceClassExists,
    ResourceClassIdsExhausted,
    ResourceClassInUse,
    ResourceClassNotFound,
)
from placement_svc.db.records import Named, get_named

T = tables.resource_classes
STANDARDS = frozenset(os_resource_classes.STANDARDS)

CREATE_ATTEMPTS = 100


def is_standard(rc: Named) -> bool:
    """Standard classes have the ids below the first custom one."""
    return rc.id < tables.MIN_CUSTOM_RESOURCE_CLASS_ID


def _record(row: sa.Row) -> Named:
    return Named(row.id, row.name, row.created_at, row.updated_at)


def list_all(conn: Connection) -> list[Named]:
    rows = conn.execute(sa.select(T).order_by(T.c.id))
    return [_record(r) for r in rows]


def get(conn: Connection, name: str) -> Named:
    found = get_named(conn, T, name)
    if found is None:
        raise ResourceClassNotFound(name)
    return found


def create(conn: Connection, name: str) -> Named:
    """Insert a custom class with the next free id at or above 10000.

    Two writers may pick the same id; the loser takes the next one, as
    upstream does, and gives up (``ResourceClassIdsExhausted``) only after many tries.
    """
    for _attempt in range(CREATE_ATTEMPTS):
        if conn.execute(sa.select(T.c.id).where(T.c.name == name)).first():
            raise ResourceClassExists(name)
        next_id = conn.execute(
            sa.select(sa.func.max(T.c.id)).where(T.c.id >= tables.MIN_CUSTOM_RESOURCE_CLASS_ID)
        ).scalar()
        next_id = tables.MIN_CUSTOM_RESOURCE_CLASS_ID if next_id is None else next_id + 1
        try:
            with conn.begin_nested():
                conn.execute(sa.insert(T).values(id=next_id, name=name))
        except IntegrityError:
            continue  # the name (checked again above) or the id was taken meanwhile
        return get(conn, name)
    raise ResourceClassIdsExhausted(name)


def rename(conn: Connection, old: Named, new_name: str) -> Named:
    if new_name != old.name and conn.execute(sa.select(T.c.id).where(T.c.name == new_name)).first():
        raise ResourceClassExists(new_name)
    try:
        with conn.begin_nested():
            conn.execute(
                sa.update(T)
                .where(T.c.id == old.id)
                .values(name=new_name, updated_at=tables.utcnow())
            )
    except IntegrityError:  # another writer took the new name meanwhile
        raise ResourceClassExists(new_name) from None
    return get(conn, new_name)


def in_use(conn: Connection, rc_id: int) -> bool:
    for table in (tables.inventories, tables.allocations):
        # An expired hold's allocations hold nothing (1.51).
        live = holds.live() if table is tables.allocations else sa.true()
        found = conn.execute(
            sa.select(table.c.id).where(table.c.resource_class_id == rc_id, live).limit(1)
        ).first()
        if found:
            return True
    return False


def delete(conn: Connection, rc: Named) -> None:
    if in_use(conn, rc.id):
        raise ResourceClassInUse(rc.name)
    # Expired holds' allocations hold nothing, but their rows point at it.
    holds.sweep_allocations_of(conn, tables.allocations.c.resource_class_id == rc.id)
    conn.execute(sa.delete(T).where(T.c.id == rc.id))


def sync_standard(conn: Connection) -> int:
    """Insert the standard classes this database lacks; returns how many.

    A standard class's id is its position in os-resource-classes' list, as
    upstream numbers them, so ids agree across deployments.
    """
    present = {r.name for r in conn.execute(sa.select(T.c.name))}
    missing = [
        {"id": index, "name": name, "created_at": tables.utcnow()}
        for index, name in enumerate(os_resource_classes.STANDARDS)
        if name not in present
    ]
    if missing and conn.dialect.name in ("mysql", "mariadb") and missing[0]["id"] == 0:
        # VCPU's id is 0. In a table upstream made, the id column counts by
        # itself (AUTO_INCREMENT), and MySQL takes an inserted 0 as "the next
        # one" unless told otherwise for the statement, as upstream does.
        mode = conn.exec_driver_sql("SELECT @@SESSION.sql_mode").scalar()
        conn.exec_driver_sql(
            "SET SESSION sql_mode = CONCAT_WS(',', @@SESSION.sql_mode, 'NO_AUTO_VALUE_ON_ZERO')"
        )
        try:
            conn.execute(sa.insert(T), missing)
        finally:
            conn.exec_driver_sql("SET SESSION sql_mode = %s", (mode,))
    elif missing:
        conn.execute(sa.insert(T), missing)
    return len(missing)
