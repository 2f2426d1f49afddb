"""GET /usages: what a project (and optionally one of its users) consumes.

Before 1.38 the answer is the used amount per class. From 1.38 it is grouped
by consumer type, each group with the number of distinct consumers in it;
consumers written without a type count as ``unknown``. Asking for type
``all`` puts everything in one group named ``all``; asking for ``unknown``
keeps only consumers without a type.
"""

from __future__ import annotations

import functools

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


def _scoped(stmt: sa.Select, with_user: bool) -> sa.Select:
    """Restrict a statement over allocations to the project (and, with
    ``with_user``, the user): the bound parameters ``project`` and ``user``."""
    joined = (
        ALLOC.join(CONSUMER, CONSUMER.c.uuid == ALLOC.c.consumer_id)
        .join(PROJECT, PROJECT.c.id == CONSUMER.c.project_id)
        .join(RC, RC.c.id == ALLOC.c.resource_class_id)
        .outerjoin(CONSUMER_TYPE, CONSUMER_TYPE.c.id == CONSUMER.c.consumer_type_id)
    )
    if with_user:
        joined = joined.join(USER, USER.c.id == CONSUMER.c.user_id)
        stmt = stmt.where(USER.c.external_id == sa.bindparam("user", type_=sa.String))
    project = PROJECT.c.external_id == sa.bindparam("project", type_=sa.String)
    return stmt.select_from(joined).where(project, holds.live())


_USED = sa.func.sum(ALLOC.c.used).label("used")
_CONSUMERS = sa.func.count(sa.distinct(ALLOC.c.consumer_id)).label("consumers")
# Which consumers a read by type keeps: every one, those of the type bound as
# ``type``, or those without a type.
_EVERY, _OF_TYPE, _UNTYPED = "every", "of type", "untyped"


@functools.lru_cache(maxsize=32)
def _statement(kind: str, with_user: bool, kept: str = _EVERY) -> sa.Select:
    """Each read of this module, built once per form (SQLAlchemy keys a
    statement by walking it whole, once per statement object): nova asks a
    project's usage before every boot when it counts quota from here."""
    where: list[sa.ColumnElement[bool]] = []
    if kept == _OF_TYPE:
        where.append(CONSUMER_TYPE.c.name == sa.bindparam("type", type_=sa.String))
    elif kept == _UNTYPED:
        where.append(CONSUMER.c.consumer_type_id.is_(None))
    if kind == "used by class":
        return _scoped(sa.select(RC.c.name, _USED), with_user).where(*where).group_by(RC.c.name)
    if kind == "consumers by type":
        return (
            _scoped(sa.select(CONSUMER_TYPE.c.name, _CONSUMERS), with_user)
            .where(*where)
            .group_by(CONSUMER_TYPE.c.name)
        )
    if kind == "used by class and type":
        return (
            _scoped(sa.select(RC.c.name.label("rc"), CONSUMER_TYPE.c.name, _USED), with_user)
            .where(*where)
            .group_by(RC.c.name, CONSUMER_TYPE.c.name)
        )
    assert kind == "consumers", kind
    return _scoped(sa.select(_CONSUMERS), with_user).where(*where)


def _bound(project_id: str, user_id: str | None, consumer_type: str | None = None) -> dict:
    bound = {"project": project_id}
    if user_id:
        bound["user"] = user_id
    if consumer_type:
        bound["type"] = consumer_type
    return bound


def by_class(conn: Connection, project_id: str, user_id: str | None = None) -> dict[str, int]:
    stmt = _statement("used by class", bool(user_id))
    return {row.name: int(row.used) for row in conn.execute(stmt, _bound(project_id, user_id))}


def by_type(
    conn: Connection, project_id: str, user_id: str | None = None, consumer_type: str | None = None
) -> dict[str, dict[str, int]]:
    """{type: {class: used, ..., "consumer_count": n}} (1.38)."""
    if consumer_type and "\x00" in consumer_type:
        return {}  # upstream's pattern lets "all<anything>" through; NUL names nothing
    if consumer_type in (ALL_TYPES, UNKNOWN_TYPE):
        return _one_group(conn, project_id, user_id, consumer_type)
    kept = _OF_TYPE if consumer_type else _EVERY
    bound = _bound(project_id, user_id, consumer_type)
    with_user = bool(user_id)
    counts = {
        row.name: row.consumers
        for row in conn.execute(_statement("consumers by type", with_user, kept), bound)
    }
    rows = conn.execute(_statement("used by class and type", with_user, kept), bound)
    usages: dict[str, dict[str, int]] = {}
    for row in rows:
        group = usages.setdefault(row.name or UNKNOWN_TYPE, {})
        group[row.rc] = int(row.used)
        group["consumer_count"] = int(counts[row.name])
    return usages


def _one_group(
    conn: Connection, project_id: str, user_id: str | None, key: str
) -> dict[str, dict[str, int]]:
    kept = _UNTYPED if key == UNKNOWN_TYPE else _EVERY
    bound = _bound(project_id, user_id)
    with_user = bool(user_id)
    used = {
        row.name: int(row.used)
        for row in conn.execute(_statement("used by class", with_user, kept), bound)
    }
    if not used:
        return {}
    count = conn.execute(_statement("consumers", with_user, kept), bound).scalar_one()
    return {key: {**used, "consumer_count": int(count)}}
