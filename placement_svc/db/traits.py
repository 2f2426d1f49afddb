"""Traits: standard ones from os-traits, custom ones CUSTOM_*."""

from __future__ import annotations

import os_traits
import sqlalchemy as sa
from sqlalchemy.engine import Connection
from sqlalchemy.exc import IntegrityError

from placement_svc.db import tables
from placement_svc.db.records import Named, get_named, storable

T = tables.traits
RPT = tables.resource_provider_traits


class NotFound(Exception):
    pass


class InUse(Exception):
    pass


def is_standard(name: str) -> bool:
    return not name.startswith("CUSTOM_") and os_traits.is_valid_trait(name)


def _record(row) -> Named:
    return Named(row.id, row.name, row.created_at, row.updated_at)


def list_filtered(
    conn: Connection,
    names: list[str] | None = None,
    prefix: str | None = None,
    associated: bool | None = None,
) -> list[Named]:
    """Traits by name list, name prefix and whether any provider has them.

    SQL narrows the rows; the exact comparison happens here, because the
    backends disagree at the edges (SQLite's LIKE ignores case, MariaDB's
    ``=`` ignores trailing spaces) and names must match byte for byte on all
    of them. Sorted here too, so every backend lists in the same order.
    """
    if prefix is not None and not storable(prefix):
        return []
    query = sa.select(T)
    if names is not None:
        names = [name for name in names if storable(name)]
        query = query.where(T.c.name.in_(names))
    if prefix is not None:
        escaped = prefix.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")
        query = query.where(T.c.name.like(escaped + "%", escape="\\"))
    if associated is not None:
        used = sa.exists().where(RPT.c.trait_id == T.c.id)
        query = query.where(used if associated else ~used)
    wanted = set(names) if names is not None else None
    found = [
        _record(r)
        for r in conn.execute(query)
        if (wanted is None or r.name in wanted) and r.name.startswith(prefix or "")
    ]
    return sorted(found, key=lambda t: t.name)


def get(conn: Connection, name: str) -> Named:
    found = get_named(conn, T, name)
    if found is None:
        raise NotFound(name)
    return found


def ensure(conn: Connection, name: str) -> tuple[Named, bool]:
    """The trait, created if missing; the flag says whether it was created."""
    try:
        return get(conn, name), False
    except NotFound:
        pass
    try:
        with conn.begin_nested():
            conn.execute(sa.insert(T).values(name=name))
    except IntegrityError:
        return get(conn, name), False  # a concurrent writer created it
    return get(conn, name), True


def delete(conn: Connection, trait: Named) -> None:
    used = conn.execute(sa.select(RPT.c.trait_id).where(RPT.c.trait_id == trait.id).limit(1))
    if used.first():
        raise InUse(trait.name)
    conn.execute(sa.delete(T).where(T.c.id == trait.id))


def sync_standard(conn: Connection) -> int:
    """Insert the os-traits traits this database lacks; returns how many."""
    present = {r.name for r in conn.execute(sa.select(T.c.name))}
    now = tables.utcnow()
    missing = [
        {"name": name, "created_at": now}
        for name in sorted(os_traits.get_traits())
        if name not in present
    ]
    if missing:
        conn.execute(sa.insert(T), missing)
    return len(missing)
