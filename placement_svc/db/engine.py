"""Engines and the unit of work.

Every request runs its database work as one function inside one transaction
(``Database.read`` / ``Database.write``). When the database answers with a
deadlock, a lock timeout, "database is locked" or a lost connection, the
whole function runs again in a fresh transaction, never half of it inside a
stale snapshot. SQLite writers take the write lock at BEGIN (BEGIN
IMMEDIATE) and wait for it, so several worker processes on one SQLite file
queue instead of failing. A value the database refuses is reported as
UnstorableValue, retries in vain as DatabaseUnavailable.
"""

from __future__ import annotations

import importlib.util
import logging
import random
import time
from collections.abc import Callable
from typing import Any, TypeVar

import sqlalchemy as sa
from sqlalchemy import event
from sqlalchemy.engine import Connection, Engine, make_url
from sqlalchemy.exc import DataError, DBAPIError, OperationalError

from placement_svc.db import tables
from placement_svc.db.exceptions import DatabaseUnavailable, UnstorableValue

LOG = logging.getLogger(__name__)
T = TypeVar("T")


def normalize_url(url: str) -> str:
    """Pick an installed driver when the URL names only the database.

    Operators' files say ``postgresql://`` (psycopg2) or ``mysql://``
    (mysqlclient); when those drivers are missing and psycopg / PyMySQL are
    present, use those instead of failing.
    """
    parsed = make_url(url)
    if parsed.drivername == "postgresql" and not importlib.util.find_spec("psycopg2"):
        if importlib.util.find_spec("psycopg"):
            parsed = parsed.set(drivername="postgresql+psycopg")
    elif parsed.drivername == "mysql" and not importlib.util.find_spec("MySQLdb"):
        if importlib.util.find_spec("pymysql"):
            parsed = parsed.set(drivername="mysql+pymysql")
    return parsed.render_as_string(hide_password=False)


def create_engine(url: str, db_conf: Any = None) -> Engine:
    """An engine for ``url`` configured from ``[placement_database]`` (``db_conf``,
    that group of the oslo.config options; None: the defaults)."""
    url = normalize_url(url)
    backend = make_url(url).get_backend_name()
    if backend == "sqlite":
        return _sqlite_engine(url, db_conf)
    kwargs: dict[str, Any] = {"pool_pre_ping": True, "isolation_level": "READ COMMITTED"}
    if db_conf is not None:
        kwargs.update(
            pool_recycle=db_conf.connection_recycle_time,
            pool_size=db_conf.max_pool_size,
            max_overflow=db_conf.max_overflow,
            pool_timeout=db_conf.pool_timeout,
        )
    engine = sa.create_engine(url, **kwargs)
    count_world_changes(engine)
    if backend == "mysql":
        sql_mode = db_conf.mysql_sql_mode if db_conf is not None else "TRADITIONAL"
        sync_wait = db_conf.mysql_wsrep_sync_wait if db_conf is not None else None
        settings = []
        if sql_mode:
            settings.append(("SET SESSION sql_mode = %s", (sql_mode,)))
        if sync_wait is not None:
            settings.append(("SET SESSION wsrep_sync_wait = %s", (sync_wait,)))
        if settings:

            @event.listens_for(engine, "connect")
            def _set_session(dbapi_conn: Any, _record: Any) -> None:
                with dbapi_conn.cursor() as cursor:
                    for statement, values in settings:
                        cursor.execute(statement, values)

    return engine


def _sqlite_engine(url: str, db_conf: Any) -> Engine:
    busy = db_conf.sqlite_busy_timeout if db_conf is not None else 30
    engine = sa.create_engine(
        url,
        connect_args={"timeout": busy, "check_same_thread": False},
        # One connection per thread; SQLite files are opened cheaply.
        poolclass=sa.pool.QueuePool if ":memory:" not in url else sa.pool.StaticPool,
    )
    count_world_changes(engine)

    @event.listens_for(engine, "connect")
    def _on_connect(dbapi_conn: Any, _record: Any) -> None:
        # Let SQLAlchemy, not pysqlite, decide when transactions begin.
        dbapi_conn.isolation_level = None
        cursor = dbapi_conn.cursor()
        cursor.execute("PRAGMA foreign_keys = ON")
        if ":memory:" not in url:
            cursor.execute("PRAGMA journal_mode = WAL")
        cursor.execute(f"PRAGMA busy_timeout = {int(busy * 1000)}")
        cursor.close()

    @event.listens_for(engine, "begin")
    def _on_begin(conn: Connection) -> None:
        mode = conn.info.get("sqlite_begin", "DEFERRED")
        conn.exec_driver_sql(f"BEGIN {mode}")

    return engine


_COUNTED = "world_generation_counted"
_BUMP = (
    sa.update(tables.world_generation)
    .where(tables.world_generation.c.id == 1)
    .values(generation=tables.world_generation.c.generation + 1)
)


def count_world_changes(engine: Engine) -> None:
    """Add one to the world generation in every transaction that changes the
    shape of the cloud (tables.changes_world), once per transaction, right
    after its first such statement: whatever writes (the API, a test, a bench
    loading rows), whoever reads the generation next knows the shape moved.
    A savepoint rolled back may have taken the increment with it: the next
    change counts again."""

    @event.listens_for(engine, "after_execute")
    def _after(conn: Connection, stmt: Any, multiparams: Any, params: Any, *_rest: Any) -> None:
        if (
            isinstance(stmt, sa.sql.dml.UpdateBase)
            and stmt.table is not tables.world_generation
            and not conn.info.get(_COUNTED)
            and tables.changes_world(stmt, multiparams, params)
        ):
            conn.info[_COUNTED] = True
            conn.execute(_BUMP)

    def _forget(conn: Connection, *_args: Any) -> None:
        # A connection lost mid-transaction is rolled back with no DBAPI
        # connection behind it: its info cannot be reached (SQLAlchemy raises
        # PendingRollbackError, which would hide the lost connection, the
        # reason to run the transaction again) and need not be: the next
        # transaction's "begin" forgets.
        if not conn.invalidated:
            conn.info[_COUNTED] = False

    for name in ("begin", "commit", "rollback", "rollback_savepoint"):
        event.listen(engine, name, _forget)


def changed_world(conn: Connection) -> bool:
    """Whether this connection's transaction has changed the shape of the
    cloud (and not committed yet): what it reads of it is its own."""
    return bool(conn.info.get(_COUNTED))


# Why a transaction is run again: deadlock, serialization, lock (a lock wait
# that timed out, SQLite's "database is locked"), lost_connection, or
# unreachable (no connection could be made; see Database._run).
# MySQL/MariaDB error codes: deadlock, lock wait timeout, server gone, lost
# connection; PostgreSQL SQLSTATEs: serialization failure, deadlock.
_MYSQL_REASONS = {1213: "deadlock", 1205: "lock", 2006: "lost_connection", 2013: "lost_connection"}
_PG_REASONS = {"40001": "serialization", "40P01": "deadlock"}
_MYSQL_NO_SAVEPOINT = 1305  # "SAVEPOINT ... does not exist"


def is_retryable(exc: BaseException) -> bool:
    """True for failures where re-running the whole transaction may succeed."""
    return retry_reason(exc) is not None


def retry_reason(exc: BaseException) -> str | None:
    """Why re-running the whole transaction may succeed (see _MYSQL_REASONS),
    or None when it would fail again."""
    if isinstance(exc, DBAPIError) and exc.connection_invalidated:
        return "lost_connection"
    if not isinstance(exc, OperationalError | DBAPIError):
        return None
    orig = getattr(exc, "orig", None)
    if orig is None:
        return None
    # MySQL's error number first: PyMySQL's errors carry a SQLSTATE too, and
    # a MariaDB deadlock's (40001) would read as PostgreSQL's serialization.
    args = getattr(orig, "args", ())
    if args and isinstance(args[0], int) and args[0] in _MYSQL_REASONS:
        return _MYSQL_REASONS[args[0]]
    state = getattr(orig, "sqlstate", None) or getattr(orig, "pgcode", None)
    if state in _PG_REASONS:
        return _PG_REASONS[state]
    if args and args[0] == _MYSQL_NO_SAVEPOINT:
        # A deadlock inside a SAVEPOINT makes MariaDB roll back the whole
        # transaction, savepoint included; leaving the savepoint then fails
        # with 1305 while the deadlock is being handled: the deadlock is why.
        behind = exc.__context__
        for _link in range(8):
            if behind is None:
                break
            if isinstance(behind, DBAPIError) and (reason := retry_reason(behind)):
                return reason
            behind = behind.__context__
    text = str(orig).lower()
    if "database is locked" in text or "database table is locked" in text:
        return "lock"
    return None


# Times a unit of work tries again to connect to a database that refused
# its connection, before the request fails with 503.
CONNECT_RETRIES = 1


class Database:
    """An engine plus the transaction discipline every request follows."""

    def __init__(
        self,
        engine: Engine,
        max_retries: int = 20,
        on_retry: Callable[[str], None] | None = None,
    ):
        self.engine = engine
        self.max_retries = max_retries
        self.backend = engine.dialect.name
        # Told the reason (see retry_reason) each time a unit of work runs again.
        self.on_retry = on_retry

    def read(self, fn: Callable[[Connection], T]) -> T:
        return self._run(fn, write=False)

    def write(self, fn: Callable[[Connection], T]) -> T:
        return self._run(fn, write=True)

    def _run(self, fn: Callable[[Connection], T], write: bool) -> T:
        attempt = 0
        while True:
            connected = False
            try:
                with self.engine.connect() as conn:
                    connected = True
                    if self.backend == "sqlite":
                        conn.info["sqlite_begin"] = "IMMEDIATE" if write else "DEFERRED"
                    with conn.begin():
                        return fn(conn)
            except DataError as exc:
                # A value the database refuses (a NUL byte in a string, a number out
                # of range): the client's input, so a 400, never a 500.
                LOG.info("database refused a value: %s", exc.orig)
                raise UnstorableValue(str(exc.orig)) from exc
            except DBAPIError as exc:
                reason = retry_reason(exc)
                if reason is None and not connected:
                    # Refused, unresolvable, or a file that cannot be opened: try
                    # once more (a failover may be under way), then give up
                    # rather than keep the request waiting on retries.
                    if attempt >= min(self.max_retries, CONNECT_RETRIES):
                        LOG.warning("cannot connect to the database: %s", exc.orig)
                        raise DatabaseUnavailable(attempt + 1, unreachable=True) from exc
                    reason = "unreachable"
                if reason is None:
                    raise
                if attempt >= self.max_retries:
                    LOG.warning("giving up after %d retries: %s", attempt, exc)
                    raise DatabaseUnavailable(attempt + 1) from exc
                if self.on_retry is not None:
                    self.on_retry(reason)
                attempt += 1
                LOG.info("retrying transaction (attempt %d) after: %s", attempt, exc.orig)
                time.sleep(min(0.5, 0.01 * 2**attempt) * random.random())

    def dispose(self) -> None:
        self.engine.dispose()
