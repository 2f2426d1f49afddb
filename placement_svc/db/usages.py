"""GET /usages: what a project (and optionally one of its users) consumes.

Before 1.38 the answer is the used amount per class. From 1.38 it is grouped
by consumer type, each group with the number of distinct consumers in it;
consumers written without a type count as ``unknown``. Asking for type
``all`` puts everything in one group named ``all``; asking for ``unknown``
keeps only consumers without a type.
"""

from __future__ import annotations

import sqlalchemy as sa
from sqlalchemy.engine import Connection

from placement_svc.db import holds, tables
from placement_svc.db.consumers import UNKNOWN_TYPE

ALLOC = tables.allocations
CONSUMER = tables.consumers
PROJECT = tables.projects
USER = tables.users
CONSUMER_TYPE = tables.consumer_types
RC = tables.resource_classes

ALL_TYPES = "all"


def _scoped(stmt: sa.Select, project_id: str, user_id: str | None) -> sa.Select:
    """Restrict a statement over allocations to the project (and user)."""
    joined = (
        ALLOC.join(CONSUMER, CONSUMER.c.uuid == ALLOC.c.consumer_id)
        .join(PROJECT, PROJECT.c.id == CONSUMER.c.project_id)
        .join(RC, RC.c.id == ALLOC.c.resource_class_id)
        .outerjoin(CONSUMER_TYPE, CONSUMER_TYPE.c.id == CONSUMER.c.consumer_type_id)
    )
    if user_id:
        joined = joined.join(USER, USER.c.id == CONSUMER.c.user_id)
        stmt = stmt.where(USER.c.external_id == user_id)
    return stmt.select_from(joined).where(PROJECT.c.external_id == project_id, holds.live())


_USED = sa.func.sum(ALLOC.c.used).label("used")
_CONSUMERS = sa.func.count(sa.distinct(ALLOC.c.consumer_id)).label("consumers")


def by_class(conn: Connection, project_id: str, user_id: str | None = None) -> dict[str, int]:
    stmt = _scoped(sa.select(RC.c.name, _USED), project_id, user_id).group_by(RC.c.name)
    return {row.name: int(row.used) for row in conn.execute(stmt)}


def by_type(
    conn: Connection, project_id: str, user_id: str | None = None, consumer_type: str | None = None
) -> dict[str, dict[str, int]]:
    """{type: {class: used, ..., "consumer_count": n}} (1.38)."""
    if consumer_type and "\x00" in consumer_type:
        return {}  # upstream's pattern lets "all<anything>" through; NUL names nothing
    if consumer_type in (ALL_TYPES, UNKNOWN_TYPE):
        return _one_group(conn, project_id, user_id, consumer_type)
    where = [CONSUMER_TYPE.c.name == consumer_type] if consumer_type else []
    counts = {
        row.name: row.consumers
        for row in conn.execute(
            _scoped(sa.select(CONSUMER_TYPE.c.name, _CONSUMERS), project_id, user_id)
            .where(*where)
            .group_by(CONSUMER_TYPE.c.name)
        )
    }
    rows = conn.execute(
        _scoped(sa.select(RC.c.name.label("rc"), CONSUMER_TYPE.c.name, _USED), project_id, user_id)
        .where(*where)
        .group_by(RC.c.name, CONSUMER_TYPE.c.name)
    )
    usages: dict[str, dict[str, int]] = {}
    for row in rows:
        group = usages.setdefault(row.name or UNKNOWN_TYPE, {})
        group[row.rc] = int(row.used)
        group["consumer_count"] = int(counts[row.name])
    return usages


def _one_group(
    conn: Connection, project_id: str, user_id: str | None, key: str
) -> dict[str, dict[str, int]]:
    where = [CONSUMER.c.consumer_type_id.is_(None)] if key == UNKNOWN_TYPE else []
    used = {
        row.name: int(row.used)
        for row in conn.execute(
            _scoped(sa.select(RC.c.name, _USED), project_id, user_id)
            .where(*where)
            .group_by(RC.c.name)
        )
    }
    if not used:
        return {}
    count = conn.execute(
        _scoped(sa.select(_CONSUMERS), project_id, user_id).where(*where)
    ).scalar_one()
    return {key: {**used, "consumer_count": int(count)}}
