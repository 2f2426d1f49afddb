"""Holds (1.51, placement-svc's own): a consumer's allocations that expire
unless confirmed.

A hold is a row of ``allocation_holds``: the consumer and when its hold
expires, in microseconds since the epoch by the **database's** clock (every
API host reads and writes the same clock; with Galera each node's own,
which NTP keeps within milliseconds of the others). Its allocations are
ordinary allocation rows: they count against capacity like any other until
``expires_at`` passes, and from that moment they are gone for every read
and every write at once, whether or not anything has removed them yet:
every statement that sums or lists allocations excludes the consumers whose
hold has expired (``live``), against the clock of that statement. The rows
are removed later by the next write that names the consumer, or a bounded
sweep every allocation write makes (``sweep``); no background thread is
needed for any answer to be right.
"""

from __future__ import annotations

import functools
import logging
from typing import Any, NamedTuple

import sqlalchemy as sa
from sqlalchemy.engine import Connection
from sqlalchemy.ext.compiler import compiles
from sqlalchemy.sql.expression import FunctionElement

from placement_svc.db import tables

LOG = logging.getLogger("placement_svc.requests")
HOLD = tables.allocation_holds
ALLOC = tables.allocations
CONSUMER = tables.consumers

MAX_TTL = 86400  # a day, in seconds
# Expired holds an allocation write removes besides those of the consumers
# it names: enough to keep up with any rate of lapsing holds a cloud makes,
# few enough to cost a write nothing it would notice.
SWEEP_AT_MOST = 20
# How long an expired hold's row outlives its allocations, so that a confirm
# that comes late is told the hold expired rather than that nothing is held.
TOMBSTONE_SECONDS = 86400


class _NowMicroseconds(FunctionElement[int]):
    """The database's clock, in microseconds since the epoch (UTC)."""

    type = sa.BigInteger()
    inherit_cache = True
    name = "now_microseconds"


@compiles(_NowMicroseconds)
def _now_sqlite(element: Any, compiler: Any, **kw: Any) -> str:
    return "CAST((julianday('now') - 2440587.5) * 86400000000 AS INTEGER)"


@compiles(_NowMicroseconds, "postgresql")
def _now_postgresql(element: Any, compiler: Any, **kw: Any) -> str:
    return "CAST(EXTRACT(EPOCH FROM clock_timestamp()) * 1000000 AS BIGINT)"


@compiles(_NowMicroseconds, "mysql")
@compiles(_NowMicroseconds, "mariadb")
def _now_mysql(element: Any, compiler: Any, **kw: Any) -> str:
    return "CAST(UNIX_TIMESTAMP(NOW(6)) * 1000000 AS SIGNED)"


def now() -> sa.ColumnElement[int]:
    return _NowMicroseconds()


def expired_consumers() -> sa.Select:
    """The consumers whose hold has expired, by the clock of the statement
    that uses it."""
    return sa.select(HOLD.c.consumer_id).where(HOLD.c.expires_at <= now())


def live(allocations: sa.Table | Any = ALLOC) -> sa.ColumnElement[bool]:
    """A condition on allocation rows: not of a consumer whose hold has
    expired. Every read of usage or of allocations carries it."""
    return allocations.c.consumer_id.not_in(expired_consumers())


def state(conn: Connection, consumer_uuid: str, lock: bool = False) -> tuple[int | None, bool]:
    """(expires_at, expired) of the consumer's hold; (None, False) for none.
    ``lock``: the hold's row is held until the transaction ends (a confirm:
    a sweep waits for it, then finds the row gone)."""
    stmt = sa.select(HOLD.c.expires_at, (HOLD.c.expires_at <= now()).label("expired")).where(
        HOLD.c.consumer_id == consumer_uuid
    )
    row = conn.execute(stmt.with_for_update() if lock else stmt).first()
    if row is None:
        return None, False
    return row.expires_at, bool(row.expired)


# What a transaction did to holds, for the metrics: reported by the Database
# once it commits (db/engine.py), nothing for one rolled back.
EVENTS = "placement.hold_events"
CREATED, CONFIRMED, EXPIRED = "created", "confirmed", "expired"


def note(conn: Connection, event: str, count: int = 1) -> None:
    if count:
        events = conn.info.setdefault(EVENTS, {})
        events[event] = events.get(event, 0) + count


def hold(conn: Connection, consumer_uuid: str, ttl: int) -> int:
    """The consumer's hold expires ``ttl`` seconds from now (made, or
    moved); returns when."""
    expires = sa.select((now() + ttl * 1_000_000).label("at")).scalar_subquery()
    updated = conn.execute(
        sa.update(HOLD).where(HOLD.c.consumer_id == consumer_uuid).values(expires_at=expires)
    )
    if updated.rowcount == 0:
        conn.execute(
            sa.insert(HOLD).values(
                consumer_id=consumer_uuid, expires_at=expires, created_at=tables.utcnow()
            )
        )
        note(conn, CREATED)
    return conn.execute(
        sa.select(HOLD.c.expires_at).where(HOLD.c.consumer_id == consumer_uuid)
    ).scalar_one()


def release(conn: Connection, consumer_uuids: list[str]) -> int:
    """The consumers' holds are gone (confirmed, or their allocations
    replaced by permanent ones); returns how many there were."""
    if not consumer_uuids:
        return 0
    return conn.execute(_RELEASE, {"consumers": list(consumer_uuids)}).rowcount


_RELEASE = sa.delete(HOLD).where(HOLD.c.consumer_id.in_(sa.bindparam("consumers", expanding=True)))


def sweep_allocations_of(conn: Connection, condition: sa.ColumnElement[bool]) -> Swept:
    """Sweep the expired holds that have allocations matching ``condition``
    (of a provider, of a class): before a row they point at is deleted."""
    lapsed = list(
        conn.execute(
            sa.select(ALLOC.c.consumer_id)
            .where(condition, ALLOC.c.consumer_id.in_(expired_consumers()))
            .distinct()
        ).scalars()
    )
    return sweep(conn, lapsed, at_most=0) if lapsed else Swept([], frozenset())


_HOLDING = sa.exists().where(ALLOC.c.consumer_id == HOLD.c.consumer_id)
_EXPIRED = HOLD.c.expires_at <= now()


@functools.lru_cache(maxsize=4)
def _sweep_statement(named: bool, others: bool) -> sa.Select:
    """``sweep``'s read of the hold rows it takes, built once per form (the
    consumers named: the expanding parameter ``named``; how many rows at
    most: ``taken``): SQLAlchemy keys a statement by walking it whole, once
    per statement object, and every allocation write runs this one. The
    limit is written into the statement's text as it runs, as SQLAlchemy
    writes a limit given as a number: a hand-back sweeps without one
    (sys.maxsize), past what PostgreSQL's INTEGER parameter holds.

    The rows are held (FOR UPDATE) until the transaction ends, and read
    again once had: a confirm holding one (it holds the hold's row before
    the consumer's, as every writer here does) has deleted it by then, or
    an extension moved its expiry; either way it is no longer taken."""
    is_named = (
        HOLD.c.consumer_id.in_(sa.bindparam("named", expanding=True)) if named else sa.false()
    )
    old = HOLD.c.expires_at <= now() - TOMBSTONE_SECONDS * 1_000_000
    wanted = sa.or_(is_named, sa.and_(_EXPIRED, sa.or_(_HOLDING, old))) if others else is_named
    return (
        sa.select(HOLD.c.consumer_id, _EXPIRED.label("expired"), _HOLDING.label("holding"))
        .where(wanted)
        .order_by(sa.case((is_named, 0), else_=1), HOLD.c.expires_at)
        .limit(sa.bindparam("taken", type_=sa.Integer, literal_execute=True))
        .with_for_update()
    )


_STILL = expired_consumers().where(HOLD.c.consumer_id.in_(sa.bindparam("lapsed", expanding=True)))
_FREE_ALLOCATIONS = sa.delete(ALLOC).where(ALLOC.c.consumer_id.in_(_STILL))
_FREE_CONSUMERS = sa.delete(CONSUMER).where(CONSUMER.c.uuid.in_(_STILL))
_GONE = sa.delete(HOLD).where(
    HOLD.c.consumer_id.in_(sa.bindparam("gone", expanding=True)), _EXPIRED, ~_HOLDING
)


class Swept(NamedTuple):
    """What a sweep found: the consumers whose allocations it freed, and
    those of the consumers named whose hold has not expired."""

    freed: list[str]
    held: frozenset[str]


def sweep(conn: Connection, consumer_uuids: list[str], at_most: int = SWEEP_AT_MOST) -> Swept:
    """Remove the allocations (and the consumer: a held consumer's
    allocations are all the hold's) of expired holds: those of
    ``consumer_uuids``, and up to ``at_most`` others. One statement when
    there is nothing to remove (every allocation write runs it).

    The hold row of a consumer the caller names goes too (the caller is
    about to write it); the others' stay, expired, as a tombstone: a confirm
    that comes late is told the hold expired (409), not that the consumer
    is unknown. Tombstones older than TOMBSTONE_SECONDS go with the sweep.
    """
    named = list(dict.fromkeys(consumer_uuids))
    bound: dict[str, Any] = {"taken": len(named) + at_most}
    if named:
        bound["named"] = named
    rows = conn.execute(_sweep_statement(bool(named), bool(at_most)), bound).all()
    named_set = set(named)
    # The named consumers' rows, and at most ``at_most`` others (the first in
    # order of expiry: the rows come named first).
    others = [r for r in rows if r.consumer_id not in named_set][:at_most]
    rows = [r for r in rows if r.consumer_id in named_set] + others
    held = frozenset(r.consumer_id for r in rows if r.consumer_id in named_set and not r.expired)
    lapsed = [r.consumer_id for r in rows if r.expired and r.holding]
    gone = [
        r.consumer_id for r in rows if r.expired and (r.consumer_id in named_set or not r.holding)
    ]
    if lapsed:
        # Each statement takes only what is still expired when it runs: another
        # writer may have swept one of them meanwhile and made the consumer
        # again, with a hold that has not expired (or none), whose rows stay.
        conn.execute(_FREE_ALLOCATIONS, {"lapsed": lapsed})
        conn.execute(_FREE_CONSUMERS, {"lapsed": lapsed})
    if gone:  # the named consumers' expired holds, and old tombstones
        conn.execute(_GONE, {"gone": gone})
    for consumer_uuid in lapsed:
        LOG.info("Hold of consumer %s expired: its allocations are freed", consumer_uuid)
    note(conn, EXPIRED, len(lapsed))
    return Swept(lapsed, held)
