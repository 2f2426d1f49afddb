"""Engines and the unit of work.

Every request runs its database work as one function inside one transaction
(``Database.read`` / ``Database.write``; a read on PostgreSQL, and through
PyMySQL, runs its statements outside one, which under READ COMMITTED sees
the same: see Database._run). When the database answers with a
deadlock, a lock timeout, "database is locked" or a lost connection, or a
provider changed under an allocation write, the whole function runs again in
a fresh transaction, never half of it inside a stale snapshot (db/retries.py
says which failures, and how many times). A database out of reach (refusing
connections, a Galera node not ready) is tried once more. SQLite writers
take the write lock at BEGIN (BEGIN IMMEDIATE) and wait for it, so several
worker processes on one SQLite file queue instead of failing. A value the
database refuses is reported as UnstorableValue; retries in vain, a database
out of reach or no pooled connection free in time as DatabaseUnavailable (a
503), after one WARNING line saying why.
"""

from __future__ import annotations

import importlib.util
import logging
import time
from collections.abc import Callable
from typing import Any, TypeVar

import sqlalchemy as sa
from sqlalchemy import event
from sqlalchemy.engine import Connection, Engine, make_url
from sqlalchemy.exc import DataError
from sqlalchemy.exc import TimeoutError as PoolTimeout

from placement_svc.db import holds, tables
from placement_svc.db.exceptions import DatabaseUnavailable, UnstorableValue
from placement_svc.db.retries import (
    GAVE_UP,
    GENERATION_CONFLICT,
    POOL_TIMEOUT,
    UNREACHABLE,
    Retries,
    message,
    not_ready_is_a_disconnect,
)

LOG = logging.getLogger(__name__)
T = TypeVar("T")


def normalize_url(url: str) -> str:
    """Pick an installed driver when the URL names only the database.

    Operators' files say ``postgresql://`` or ``postgresql+psycopg2://``
    (psycopg2), ``mysql://`` or ``mysql+mysqldb://`` (mysqlclient), as
    upstream's oslo.db reads them; when those drivers are missing and
    psycopg / PyMySQL are present, use those instead of failing: they speak
    to the same servers.
    """
    parsed = make_url(url)
    if parsed.drivername in ("postgresql", "postgresql+psycopg2"):
        if not importlib.util.find_spec("psycopg2") and importlib.util.find_spec("psycopg"):
            parsed = parsed.set(drivername="postgresql+psycopg")
    elif parsed.drivername in ("mysql", "mysql+mysqldb"):
        if not importlib.util.find_spec("MySQLdb") and importlib.util.find_spec("pymysql"):
            parsed = parsed.set(drivername="mysql+pymysql")
    return parsed.render_as_string(hide_password=False)


def create_engine(url: str, db_conf: Any = None) -> Engine:
    """An engine for ``url`` configured from ``[placement_database]`` (``db_conf``,
    that group of the oslo.config options; None: the defaults)."""
    url = normalize_url(url)
    backend = make_url(url).get_backend_name()
    if backend == "sqlite":
        return _sqlite_engine(url, db_conf)
    # The pool neither pings every connection it hands out nor rolls back
    # every one it takes back: lean_pool does each only when needed.
    kwargs: dict[str, Any] = {
        "pool_pre_ping": False,
        "pool_reset_on_return": None,
        "isolation_level": "READ COMMITTED",
    }
    # A server that takes the connection and never answers (a host gone from
    # the network, a node hung) would hold the request until gunicorn kills
    # the worker: bounded, it is out of reach, answered 503. The URL's own
    # connect_timeout wins.
    parsed = make_url(url)
    connect_args: dict[str, Any] = {}
    kwargs["connect_args"] = connect_args
    if "connect_timeout" not in parsed.query:
        connect_args["connect_timeout"] = CONNECT_TIMEOUT
    # PyMySQL bounds only the TCP connect by connect_timeout, and reads the
    # server's greeting and the login under read_timeout: bounded too, for
    # the handshake alone (see _handshake_only), unless the URL sets it.
    greeting_bounded = (
        parsed.get_dialect().driver == "pymysql" and "read_timeout" not in parsed.query
    )
    if greeting_bounded:
        connect_args["read_timeout"] = _seconds(parsed.query.get("connect_timeout"))
    if db_conf is not None:
        kwargs.update(
            pool_recycle=db_conf.connection_recycle_time,
            pool_size=db_conf.max_pool_size,
            max_overflow=db_conf.max_overflow,
            pool_timeout=db_conf.pool_timeout,
        )
    engine = sa.create_engine(url, **kwargs)
    lean_pool(engine)
    if greeting_bounded:
        event.listen(engine, "connect", _handshake_only, insert=True)
    note_world_changes(engine)
    not_ready_is_a_disconnect(engine)
    if backend == "mysql":
        sql_mode = db_conf.mysql_sql_mode if db_conf is not None else "TRADITIONAL"
        sync_wait = db_conf.mysql_wsrep_sync_wait if db_conf is not None else None
        # Room for a chunk of a provider list's records (providers._Chunks):
        # MySQL's own default is 1 KB, MariaDB's 1 MB.
        settings: list[tuple[str, tuple[Any, ...]]] = [(_GROUP_CONCAT_ROOM, ())]
        if sql_mode:
            settings.append(("SET SESSION sql_mode = %s", (sql_mode,)))
        if sync_wait is not None:
            settings.append(("SET SESSION wsrep_sync_wait = %s", (sync_wait,)))

        @event.listens_for(engine, "connect")
        def _set_session(dbapi_conn: Any, _record: Any) -> None:
            with dbapi_conn.cursor() as cursor:
                for statement, values in settings:
                    cursor.execute(statement, values or None)

        if parsed.get_dialect().driver == "pymysql":
            reads_outside_transactions(engine)
    return engine


# An execution option: the connection's transaction is a read, run outside
# a transaction where the backend allows it (Database._run sets it).
READ = "placement_read"
_BEGINS = "begins"
# PyMySQL's view of the server's status flags (in every OK packet).
_IN_TRANS = 0x0001
_AUTOCOMMIT = 0x0002


def reads_outside_transactions(engine: Engine) -> None:
    """PyMySQL connections in autocommit mode, and a read run without BEGIN
    and COMMIT: one round trip less for every read (in_tree= on MariaDB:
    its statement and then a COMMIT, 0.11 ms back to back and more after an
    idle moment). Under READ COMMITTED each statement of a read sees what
    was committed when it began, in a transaction or not, as on PostgreSQL
    (Database._run). Every other transaction (a write, a migration, a test's
    engine.begin()) starts with BEGIN, which costs that round trip instead:
    without autocommit the server began one with the first statement.

    PyMySQL sends COMMIT and ROLLBACK whatever the server's state, so the
    dialect's commit and rollback send them only in a transaction: not in
    autocommit mode, or since a BEGIN (the server's status flags come with
    every OK packet, BEGIN's, COMMIT's and a write's; a SELECT's rows end
    without them, and in autocommit mode a SELECT leaves none open)."""
    dialect = engine.dialect

    @event.listens_for(engine, "connect")
    def _autocommit(dbapi_conn: Any, _record: Any) -> None:
        dbapi_conn.autocommit(True)

    @event.listens_for(engine, "begin")
    def _begin(conn: Connection) -> None:
        # Read by do_begin just after, for this transaction: set each time.
        conn.connection.info[_BEGINS] = not conn.get_execution_options().get(READ, False)

    def do_begin(dbapi_conn: Any) -> None:
        if dbapi_conn.info.get(_BEGINS, True):
            dbapi_conn.begin()

    def do_commit(dbapi_conn: Any) -> None:
        if _in_transaction(dbapi_conn):
            dbapi_conn.commit()

    def do_rollback(dbapi_conn: Any) -> None:
        if _in_transaction(dbapi_conn):
            dbapi_conn.rollback()

    # This engine's dialect alone: SQLAlchemy runs a transaction's begin,
    # commit and rollback through these, and wraps their failures as it
    # wraps a statement's (a lost connection is a disconnect).
    dialect.do_begin = do_begin  # type: ignore[method-assign,assignment]
    dialect.do_commit = do_commit  # type: ignore[method-assign,assignment]
    dialect.do_rollback = do_rollback  # type: ignore[method-assign,assignment]


def _in_transaction(dbapi_conn: Any) -> bool:
    status = dbapi_conn.server_status or 0
    return not status & _AUTOCOMMIT or bool(status & _IN_TRANS)


# A connection back from the pool within this long of its last use is
# handed out without a ping: it answered a moment ago. One that has since
# been lost (a failover, a restarted server) fails its first statement
# instead, and the whole transaction runs again on a new connection
# (retry_reason's "lost_connection"), as after any connection lost mid-way.
PING_AFTER = 1.0
_OPEN = "transaction_open"
_RETURNED = "returned_at"


def lean_pool(engine: Engine) -> None:
    """Two round trips fewer for each unit of work: a connection is rolled
    back on its way back to the pool unless it ended with a COMMIT or
    ROLLBACK and ran nothing since (a unit of work ends with one of those,
    so its connection comes back clean: PyMySQL would send ROLLBACK again), and
    pinged on its way out only if it has been idle longer than PING_AFTER
    (SQLAlchemy's pool_pre_ping pings every time)."""

    @event.listens_for(engine, "before_cursor_execute")
    def _began(conn: Connection, *_args: Any) -> None:
        conn.info[_OPEN] = True  # a statement after COMMIT opens another

    def _ended(conn: Connection, *_args: Any) -> None:
        if not conn.invalidated:
            conn.info[_OPEN] = False

    # Before the DBAPI's commit or rollback: one that then fails goes
    # through handle_error, which marks the connection open again.
    event.listen(engine, "commit", _ended)
    event.listen(engine, "rollback", _ended)

    @event.listens_for(engine, "handle_error")
    def _failed(context: Any) -> None:
        if context.connection is not None and not context.connection.invalidated:
            context.connection.info[_OPEN] = True

    @event.listens_for(engine, "reset")
    def _reset(dbapi_conn: Any, record: Any, state: Any) -> None:
        # A new connection's setup may have left a transaction open: unknown
        # counts as open.
        if record.info.get(_OPEN, True) or state.terminate_only:
            engine.dialect.do_rollback(dbapi_conn)
            record.info[_OPEN] = False
        record.info[_RETURNED] = time.monotonic()

    @event.listens_for(engine, "checkout")
    def _checkout(dbapi_conn: Any, record: Any, _proxy: Any) -> None:
        # Open until a COMMIT or ROLLBACK says otherwise: whoever takes it
        # (raw DBAPI use included) may leave a transaction behind.
        record.info[_OPEN] = True
        returned = record.info.get(_RETURNED)
        if returned is not None and time.monotonic() - returned < PING_AFTER:
            return
        try:
            engine.dialect.do_ping(dbapi_conn)
        except Exception as exc:  # noqa: BLE001 - any failure: the pool connects anew
            raise sa.exc.DisconnectionError(f"connection lost while idle: {exc}") from exc


_GROUP_CONCAT_ROOM = (
    "SET SESSION group_concat_max_len = GREATEST(@@SESSION.group_concat_max_len, 1048576)"
)


def _seconds(given: Any) -> int:
    """A URL's connect_timeout (the last, if repeated) as a number, or
    CONNECT_TIMEOUT for none or one that is not a whole number (the driver
    says what is wrong with that)."""
    if isinstance(given, tuple):
        given = given[-1] if given else None
    try:
        return int(given) if given is not None else CONNECT_TIMEOUT
    except ValueError:
        return CONNECT_TIMEOUT


def _handshake_only(dbapi_conn: Any, _record: Any) -> None:
    """A new PyMySQL connection, past its handshake: its statements wait for
    their answers as long as they take again (read_timeout was for the
    handshake alone; PyMySQL applies it afresh before each read)."""
    if hasattr(dbapi_conn, "_read_timeout"):
        dbapi_conn._read_timeout = None


def _sqlite_engine(url: str, db_conf: Any) -> Engine:
    busy = db_conf.sqlite_busy_timeout if db_conf is not None else 30
    engine = sa.create_engine(
        url,
        connect_args={"timeout": busy, "check_same_thread": False},
        # One connection per thread; SQLite files are opened cheaply.
        poolclass=sa.pool.QueuePool if ":memory:" not in url else sa.pool.StaticPool,
    )
    note_world_changes(engine)

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


_CHANGED = "world_changed"


def note_world_changes(engine: Engine) -> None:
    """Note on the connection, at its first statement that may change the
    shape of the cloud (tables.changes_world), that its transaction has: what
    it reads of the shape before committing is its own, not for others. (The
    database itself counts the change, with triggers: shape_changes.py.)
    A savepoint rolled back forgets nothing: one more read of the shape."""

    @event.listens_for(engine, "after_execute")
    def _after(conn: Connection, stmt: Any, multiparams: Any, params: Any, *_rest: Any) -> None:
        if (
            isinstance(stmt, sa.sql.dml.UpdateBase)
            and not conn.info.get(_CHANGED)
            and tables.changes_world(stmt, multiparams, params)
        ):
            conn.info[_CHANGED] = True

    def _forget(conn: Connection, *_args: Any) -> None:
        # A connection lost mid-transaction is rolled back with no DBAPI
        # connection behind it: its info cannot be reached (SQLAlchemy raises
        # PendingRollbackError, which would hide the lost connection, the
        # reason to run the transaction again) and need not be: the next
        # transaction's "begin" forgets.
        if not conn.invalidated:
            conn.info[_CHANGED] = False

    for name in ("begin", "commit", "rollback"):
        event.listen(engine, name, _forget)


def changed_world(conn: Connection) -> bool:
    """Whether this connection's transaction has changed the shape of the
    cloud (and not committed yet): what it reads of it is its own."""
    return bool(conn.info.get(_CHANGED))


# Seconds one attempt to connect to PostgreSQL or MySQL may take, the
# server's greeting and the login included, unless the URL sets its own
# (?connect_timeout=N): both attempts end well within gunicorn's 30 s
# worker timeout, which would otherwise kill the worker mid-request.
CONNECT_TIMEOUT = 5


class Database:
    """An engine plus the transaction discipline every request follows."""

    def __init__(
        self,
        engine: Engine,
        max_retries: int = 20,
        on_retry: Callable[[str], None] | None = None,
        conflict_retries: int = 10,
    ):
        self.engine = engine
        # The budgets of db/retries.py: [placement_database] db_max_retries
        # and [placement] allocation_conflict_retry_count.
        self.max_retries = max_retries
        self.conflict_retries = conflict_retries
        self.backend = engine.dialect.name
        # Told the reason (see retry_reason) each time a unit of work runs again.
        self.on_retry = on_retry
        # What committed transactions did to holds (1.51): {event: count}.
        self.on_holds: Callable[[dict[str, int]], None] | None = None

    def read(self, fn: Callable[[Connection], T]) -> T:
        return self._run(fn, write=False)

    def write(self, fn: Callable[[Connection], T]) -> T:
        return self._run(fn, write=True)

    def _run(self, fn: Callable[[Connection], T], write: bool) -> T:
        """``fn`` in one transaction, run whole again while db/retries.py
        says the failure is worth it and its budget allows.

        A request that fails anyway fails with DatabaseUnavailable, after one
        WARNING line saying why: the database's failures that went on past
        max_retries (busy; a connection lost each time); a database out of
        reach (OUT_OF_REACH) once more after CONNECT_RETRIES; every pooled
        connection still checked out after pool_timeout seconds, at once: the
        request has waited that long already, waiting again would double
        what its client waits (and outlast gunicorn's worker timeout, which
        kills the worker mid-answer), and what holds the connections (a
        database that does not answer) is no quicker the second time. A
        generation conflict past conflict_retries is raised as it is (the
        client's 409), after its WARNING line."""
        retries = Retries(self.max_retries, self.conflict_retries)
        while True:
            connected = False
            try:
                with self.engine.connect() as conn:
                    connected = True
                    if self.backend == "sqlite":
                        conn.info["sqlite_begin"] = "IMMEDIATE" if write else "DEFERRED"
                    elif self.backend == "postgresql" and not write:
                        # Each statement of a read sees what was committed when it
                        # began (READ COMMITTED), in a transaction or not: outside
                        # one it costs no BEGIN and no COMMIT, two round trips of
                        # the three a one-statement read made (0.25 ms). The pool
                        # gives the connection back to transactions on its return.
                        conn.execution_options(isolation_level="AUTOCOMMIT")
                    elif self.backend == "mysql" and not write:
                        # The same through PyMySQL (reads_outside_transactions);
                        # other drivers ignore it.
                        conn.execution_options(**{READ: True})
                    conn.info.pop(holds.EVENTS, None)  # a run rolled back made none
                    with conn.begin():
                        result = fn(conn)
                    events = conn.info.pop(holds.EVENTS, None)
                    if events and self.on_holds is not None:
                        self.on_holds(events)  # committed
                    return result
            except DataError as exc:
                # A value the database refuses (a NUL byte in a string, a number out
                # of range): the client's input, so a 400, never a 500.
                LOG.info("database refused a value: %s", exc.orig)
                raise UnstorableValue(str(exc.orig)) from exc
            except PoolTimeout as exc:  # not a DBAPIError: no driver involved
                LOG.warning(
                    "gave up on the database (attempts: %d), no pooled connection came free "
                    "within pool_timeout: %s",
                    retries.attempts,
                    message(exc),
                )
                raise DatabaseUnavailable(retries.attempts, True, POOL_TIMEOUT) from exc
            except Exception as exc:  # retries.reason decides; None: raised as is
                reason = retries.reason(exc, connected)
                if reason is None:
                    raise
                conflict = reason == GENERATION_CONFLICT
                if not retries.allow(reason):
                    LOG.warning(
                        "gave up on the %s (attempts: %d), %s: %s",
                        "write" if conflict else "database",
                        retries.attempts,
                        GAVE_UP[reason],
                        message(exc),
                    )
                    if conflict:
                        raise
                    raise DatabaseUnavailable(
                        retries.attempts, reason in UNREACHABLE, reason
                    ) from exc
                if self.on_retry is not None:
                    self.on_retry(reason)
                LOG.log(
                    logging.DEBUG if conflict else logging.INFO,
                    "retrying transaction (attempt %d) after: %s",
                    retries.retried,
                    message(exc),
                )
                time.sleep(retries.pause(reason))

    def dispose(self) -> None:
        self.engine.dispose()
