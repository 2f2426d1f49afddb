"""Aggregate membership of providers."""

from __future__ import annotations

import sqlalchemy as sa
from sqlalchemy.engine import Connection
from sqlalchemy.exc import IntegrityError

from placement_svc.db import links, tables
from placement_svc.db.records import inserted_id, statement_savepoint

AGG = tables.placement_aggregates
RPA = tables.resource_provider_aggregates


def for_provider(conn: Connection, provider_id: int) -> list[str]:
    return [row.uuid for row in conn.execute(_FOR_PROVIDER, {"provider_id": provider_id})]


# Built once (SQLAlchemy keys a statement by walking it, once per object).
_FOR_PROVIDER = (
    sa.select(AGG.c.uuid)
    .join(RPA, RPA.c.aggregate_id == AGG.c.id)
    .where(RPA.c.resource_provider_id == sa.bindparam("provider_id"))
    .order_by(AGG.c.uuid)
)


def _ensure_ids(conn: Connection, uuids: list[str]) -> dict[str, int]:
    """Aggregate ids for ``uuids``, creating the aggregates that are new."""
    found = {row.uuid: row.id for row in conn.execute(sa.select(AGG).where(AGG.c.uuid.in_(uuids)))}
    for uuid in uuids:
        if uuid in found:
            continue
        try:
            with statement_savepoint(conn):
                found[uuid] = inserted_id(conn.execute(sa.insert(AGG).values(uuid=uuid)))
        except IntegrityError:  # created concurrently
            found[uuid] = conn.execute(sa.select(AGG.c.id).where(AGG.c.uuid == uuid)).scalar_one()
    return found


def replace(conn: Connection, provider_id: int, uuids: list[str]) -> None:
    """Make the provider a member of exactly ``uuids``."""
    ids = _ensure_ids(conn, list(uuids)) if uuids else {}
    links.replace(conn, RPA, "aggregate_id", provider_id, set(ids.values()))
