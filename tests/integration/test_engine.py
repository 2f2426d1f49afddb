"""The unit of work re-runs a whole transaction on retryable database errors only."""

from __future__ import annotations

import contextlib
import logging
import sqlite3

import httpx
import pytest
import sqlalchemy as sa
from sqlalchemy import event
from sqlalchemy.exc import IntegrityError, OperationalError

from placement_svc import app
from placement_svc.db.engine import Database, create_engine, normalize_url
from placement_svc.db.exceptions import (
    ConcurrentUpdate,
    DatabaseUnavailable,
    ProviderChanged,
    UnstorableValue,
)
from placement_svc.db.retries import is_retryable, not_ready_is_a_disconnect, retry_reason
from tests.support import fixtures


class _MySQLError(Exception):
    pass


def _operational(orig):
    return OperationalError("statement", {}, orig)


def test_sqlite_lock_mysql_deadlock_and_pg_serialization_are_retryable():
    assert is_retryable(_operational(sqlite3.OperationalError("database is locked")))
    assert is_retryable(_operational(_MySQLError(1213, "Deadlock found")))
    assert is_retryable(_operational(_MySQLError(2013, "Lost connection")))
    pg = Exception("could not serialize access")
    pg.sqlstate = "40001"
    assert is_retryable(_operational(pg))


def test_each_retry_has_a_reason_for_the_metrics():
    def pg(state):
        error = Exception("pg")
        error.sqlstate = state
        return _operational(error)

    assert retry_reason(_operational(sqlite3.OperationalError("database is locked"))) == "lock"
    assert retry_reason(_operational(_MySQLError(1205, "Lock wait timeout"))) == "lock"
    assert retry_reason(_operational(_MySQLError(1213, "Deadlock found"))) == "deadlock"
    assert retry_reason(_operational(_MySQLError(2006, "gone away"))) == "lost_connection"
    assert retry_reason(_operational(_MySQLError(2013, "Lost connection"))) == "lost_connection"
    assert retry_reason(pg("40P01")) == "deadlock"
    assert retry_reason(pg("40001")) == "serialization"
    invalidated = OperationalError("stmt", {}, Exception("closed"), connection_invalidated=True)
    assert retry_reason(invalidated) == "lost_connection"
    assert retry_reason(_operational(sqlite3.OperationalError("no such table: x"))) is None


def test_a_lost_savepoint_after_a_deadlock_inside_it_is_the_deadlock():
    """MariaDB rolls the whole transaction back on a deadlock inside a
    SAVEPOINT; SQLAlchemy's ROLLBACK TO SAVEPOINT then fails with 1305,
    raised while handling the deadlock: the whole transaction runs again."""
    deadlock = _operational(_MySQLError(1213, "Deadlock found"))
    try:
        try:
            raise deadlock
        except OperationalError:
            # As SQLAlchemy raises it: the driver's error, wrapped, while the
            # deadlock is being handled.
            driver_error = _MySQLError(1305, "SAVEPOINT sa_savepoint_1 does not exist")
            try:
                raise driver_error
            except _MySQLError as raw:
                raise _operational(raw) from raw
    except OperationalError as lost:
        assert retry_reason(lost) == "deadlock"
    # Without a retryable error behind it, 1305 is a bug to report, not to retry.
    assert retry_reason(_operational(_MySQLError(1305, "SAVEPOINT x does not exist"))) is None


def test_integrity_and_syntax_errors_are_not_retryable():
    assert not is_retryable(IntegrityError("stmt", {}, sqlite3.IntegrityError("UNIQUE")))
    assert not is_retryable(_operational(sqlite3.OperationalError("no such table: x")))
    assert not is_retryable(ValueError("nope"))


def test_write_reruns_the_whole_function_after_a_lock(sqlite_url):
    retried = []
    db = Database(create_engine(sqlite_url), max_retries=3, on_retry=retried.append)
    calls = []

    def work(conn):
        calls.append(1)
        conn.execute(sa.text("CREATE TABLE IF NOT EXISTS t (x INTEGER)"))
        conn.execute(sa.text("INSERT INTO t VALUES (1)"))
        if len(calls) < 3:
            raise _operational(sqlite3.OperationalError("database is locked"))
        return conn.execute(sa.text("SELECT count(*) FROM t")).scalar()

    # The failed attempts rolled back: only the last insert is there.
    assert db.write(work) == 1
    assert len(calls) == 3
    assert retried == ["lock", "lock"]  # one report per re-run


def test_write_gives_up_after_max_retries(sqlite_url):
    db = Database(create_engine(sqlite_url), max_retries=2)

    def always_locked(conn):
        raise _operational(sqlite3.OperationalError("database is locked"))

    with pytest.raises(DatabaseUnavailable) as gave_up:
        db.write(always_locked)
    assert gave_up.value.attempts == 3  # the first try and two retries


def test_a_provider_changed_under_a_write_is_retried_a_client_conflict_is_not():
    assert retry_reason(ProviderChanged("a")) == "generation_conflict"
    assert retry_reason(ConcurrentUpdate("a")) is None  # over a generation the client gave


def _failing(failures):
    """A unit of work that inserts a row, then raises the next of ``failures``
    (none left: returns the rows it sees); ``runs`` counts its runs."""
    pending = iter(failures)

    def work(conn):
        work.runs += 1
        conn.execute(sa.text("CREATE TABLE IF NOT EXISTS t (x INTEGER)"))
        conn.execute(sa.text("INSERT INTO t VALUES (1)"))
        failure = next(pending, None)
        if failure is not None:
            raise failure
        return conn.execute(sa.text("SELECT count(*) FROM t")).scalar()

    work.runs = 0
    return work


def test_one_policy_retries_a_generation_conflict_and_a_deadlock_alike_each_to_its_budget(
    sqlite_url,
):
    """Deadlocks draw on db_max_retries, generation conflicts on
    allocation_conflict_retry_count: counted apart, both reported to on_retry,
    each run whole in a new transaction."""
    retried = []
    db = Database(
        create_engine(sqlite_url),
        max_retries=2,
        on_retry=retried.append,
        conflict_retries=3,
    )
    deadlock = _operational(_MySQLError(1213, "Deadlock found"))
    changed = ProviderChanged("0" * 32)

    work = _failing([deadlock, changed, deadlock, changed, changed])
    assert db.write(work) == 1  # the failed runs rolled back
    assert work.runs == 6
    assert retried == [
        "deadlock",
        "generation_conflict",
        "deadlock",
        "generation_conflict",
        "generation_conflict",
    ]

    retried.clear()
    work = _failing([changed] * 4)
    with pytest.raises(ProviderChanged):  # the conflict itself: the client's 409
        db.write(work)
    assert (work.runs, retried) == (4, ["generation_conflict"] * 3)

    retried.clear()
    work = _failing([changed, deadlock, deadlock, deadlock])
    with pytest.raises(DatabaseUnavailable) as gave_up:
        db.write(work)
    assert (gave_up.value.attempts, gave_up.value.reason) == (4, "deadlock")
    assert retried == ["generation_conflict", "deadlock", "deadlock"]


def test_a_budget_of_no_conflict_retries_answers_the_first_conflict(sqlite_url):
    retried = []
    db = Database(create_engine(sqlite_url), on_retry=retried.append, conflict_retries=0)
    work = _failing([ProviderChanged("0" * 32)])
    with pytest.raises(ProviderChanged):
        db.write(work)
    assert (work.runs, retried) == (1, [])


def test_operator_urls_get_an_installed_driver(monkeypatch):
    installed = {"psycopg", "pymysql"}
    monkeypatch.setattr(
        "placement_svc.db.engine.importlib.util.find_spec",
        lambda name: object() if name in installed else None,
    )
    assert normalize_url("postgresql://u:p@h/db") == "postgresql+psycopg://u:p@h/db"
    assert normalize_url("postgresql+psycopg2://u:p@h/db") == "postgresql+psycopg://u:p@h/db"
    assert normalize_url("mysql://u:p@h/db?charset=utf8") == "mysql+pymysql://u:p@h/db?charset=utf8"
    assert normalize_url("mysql+mysqldb://u@h/db") == "mysql+pymysql://u@h/db"
    assert normalize_url("mysql+pymysql://u@h/db") == "mysql+pymysql://u@h/db"
    assert normalize_url("sqlite:///x.db") == "sqlite:///x.db"
    installed.add("psycopg2")
    assert normalize_url("postgresql://u:p@h/db") == "postgresql://u:p@h/db"
    assert normalize_url("postgresql+psycopg2://u@h/db") == "postgresql+psycopg2://u@h/db"


def test_a_value_the_database_refuses_is_reported_as_unstorable(sqlite_url):
    from sqlalchemy.exc import DataError

    db = Database(create_engine(sqlite_url))

    def refused(conn):
        raise DataError("stmt", {}, ValueError("A string literal cannot contain NUL"))

    with pytest.raises(UnstorableValue) as refusal:
        db.read(refused)
    assert "NUL" in refusal.value.reason


def test_a_database_that_cannot_be_reached_is_unavailable_after_one_more_try(tmp_path):
    retried = []
    url = f"sqlite:///{tmp_path}/no/such/dir/t.db"  # a file SQLite cannot open
    db = Database(create_engine(url), max_retries=20, on_retry=retried.append)
    calls = []
    with pytest.raises(DatabaseUnavailable) as gave_up:
        db.read(calls.append)
    assert (gave_up.value.attempts, gave_up.value.unreachable) == (2, True)
    assert retried == ["unreachable"]
    assert calls == []  # the work never ran


# -- a database out of reach, a pool without a free connection, Galera -------

NOT_READY = "WSREP has not yet prepared node for application use"


class _DriverError(sqlite3.OperationalError):
    """What PyMySQL raises for a MariaDB error number, as the SQLite driver's
    own kind of error, so that SQLAlchemy wraps it as the driver's: an
    OperationalError with ``orig.args == (number, message)``."""


def _warnings(caplog) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING]


def _fail_statements(monkeypatch, engine, error, times=None, starting="SELECT"):
    """Make the driver raise ``error`` for statements starting with
    ``starting`` (``times`` times, None: always); returns the count raised."""
    raised = []
    real = engine.dialect.do_execute

    def do_execute(cursor, statement, parameters, context=None):
        if statement.startswith(starting) and (times is None or len(raised) < times):
            raised.append(statement)
            raise error
        return real(cursor, statement, parameters, context)

    monkeypatch.setattr(engine.dialect, "do_execute", do_execute)
    return raised


def _invalidations(engine) -> list[BaseException | None]:
    seen: list[BaseException | None] = []
    event.listen(engine, "invalidate", lambda _dbapi, _record, exc: seen.append(exc))
    return seen


def test_a_galera_node_not_ready_is_its_own_reason_even_on_a_dropped_connection():
    assert retry_reason(_operational(_MySQLError(1047, NOT_READY))) == "not_ready"
    # Some releases word it as the error number's own text.
    assert retry_reason(_operational(_MySQLError(1047, "Unknown command"))) == "not_ready"
    dropped = OperationalError(
        "stmt", {}, _MySQLError(1047, NOT_READY), connection_invalidated=True
    )
    assert retry_reason(dropped) == "not_ready"
    # Errors during COMMIT other than a deadlock (a write set too large) fail again.
    assert retry_reason(_operational(_MySQLError(1180, "Got error 90 during COMMIT"))) is None


def test_a_galera_node_not_ready_is_tried_once_more_on_a_new_connection_then_503(
    sqlite_url, monkeypatch, caplog
):
    engine = create_engine(sqlite_url)
    not_ready_is_a_disconnect(engine)  # create_engine's for PostgreSQL and MySQL
    raised = _fail_statements(monkeypatch, engine, _DriverError(1047, NOT_READY))
    dropped = _invalidations(engine)
    retried = []
    db = Database(engine, max_retries=20, on_retry=retried.append)
    with pytest.raises(DatabaseUnavailable) as gave_up:
        db.read(lambda conn: conn.exec_driver_sql("SELECT 1").scalar())
    assert (gave_up.value.attempts, gave_up.value.unreachable) == (2, True)
    assert gave_up.value.reason == "not_ready"
    assert retried == ["not_ready"]  # once more, not twenty times
    assert len(raised) == 2
    # Each connection that met the node was thrown away, not put back in the pool.
    assert len(dropped) == 2
    [warning] = _warnings(caplog)
    assert "not ready" in warning and NOT_READY in warning
    assert "\n" not in warning


def test_a_galera_node_ready_again_on_the_second_try_answers(sqlite_url, monkeypatch, caplog):
    engine = create_engine(sqlite_url)
    not_ready_is_a_disconnect(engine)
    _fail_statements(monkeypatch, engine, _DriverError(1047, NOT_READY), times=1)
    retried = []
    db = Database(engine, on_retry=retried.append)
    assert db.read(lambda conn: conn.exec_driver_sql("SELECT 7").scalar()) == 7
    assert retried == ["not_ready"]
    assert _warnings(caplog) == []


def test_a_deadlock_raised_by_the_commit_reruns_the_whole_transaction(sqlite_url, monkeypatch):
    """Galera reports a certification failure (a conflicting write on
    another node) as a deadlock, 1213, when the COMMIT is sent, after every
    statement succeeded: the whole function runs again, and the first
    attempt's writes, rolled back, are not there twice."""
    engine = create_engine(sqlite_url)
    with engine.begin() as conn:
        conn.exec_driver_sql("CREATE TABLE t (x INTEGER)")
    real_commit = engine.dialect.do_commit
    commits = []

    def do_commit(dbapi_connection):
        commits.append(1)
        if len(commits) == 1:
            raise _DriverError(1213, "Deadlock found when trying to get lock; try restarting")
        real_commit(dbapi_connection)

    monkeypatch.setattr(engine.dialect, "do_commit", do_commit)
    retried = []
    db = Database(engine, on_retry=retried.append)
    calls = []

    def work(conn):
        calls.append(1)
        conn.exec_driver_sql("INSERT INTO t VALUES (1)")
        return len(calls)

    assert db.write(work) == 2
    assert retried == ["deadlock"]
    assert len(commits) == 2
    with engine.connect() as conn:
        assert conn.exec_driver_sql("SELECT count(*) FROM t").scalar() == 1


def test_a_pool_timeout_is_unavailable_at_once(sqlite_url, caplog):
    """No pooled connection came free within pool_timeout: a 503 (not a 500:
    SQLAlchemy's TimeoutError is no DBAPIError), without waiting again."""
    engine = sa.create_engine(sqlite_url, pool_size=1, max_overflow=0, pool_timeout=0.2)
    retried = []
    db = Database(engine, on_retry=retried.append)
    calls = []
    with engine.connect():  # the pool's only connection, held
        with pytest.raises(DatabaseUnavailable) as gave_up:
            db.read(calls.append)
    assert (gave_up.value.attempts, gave_up.value.unreachable) == (1, True)
    assert gave_up.value.reason == "pool_timeout"
    assert calls == [] and retried == []
    [warning] = _warnings(caplog)
    assert "no pooled connection came free" in warning
    assert "sqlalche.me" not in warning
    assert db.read(lambda conn: conn.exec_driver_sql("SELECT 1").scalar()) == 1


def _lose_connections(monkeypatch, engine):
    """Make SQLAlchemy take every driver error for a dropped connection."""
    monkeypatch.setattr(engine.dialect, "is_disconnect", lambda *_args: True)


def test_a_connection_lost_mid_transaction_runs_it_again(sqlite_url, monkeypatch):
    """The lost connection is rolled back without a connection behind it;
    nothing on that path may hide the reason to run again (a world-change
    counter once raised PendingRollbackError there: a 500)."""
    engine = create_engine(sqlite_url)
    with engine.begin() as conn:
        conn.exec_driver_sql("CREATE TABLE t (x INTEGER)")
    _lose_connections(monkeypatch, engine)
    _fail_statements(
        monkeypatch, engine, sqlite3.OperationalError("server closed"), times=1, starting="SELECT"
    )
    retried = []
    db = Database(engine, on_retry=retried.append)

    def work(conn):
        conn.exec_driver_sql("INSERT INTO t VALUES (1)")
        return conn.exec_driver_sql("SELECT count(*) FROM t").scalar()

    assert db.write(work) == 1
    assert retried == ["lost_connection"]


def test_a_connection_lost_with_no_retry_left_is_unavailable(sqlite_url, monkeypatch, caplog):
    engine = create_engine(sqlite_url)
    _lose_connections(monkeypatch, engine)
    _fail_statements(monkeypatch, engine, sqlite3.OperationalError("server closed\nmore"))
    db = Database(engine, max_retries=0)
    with pytest.raises(DatabaseUnavailable) as gave_up:
        db.read(lambda conn: conn.exec_driver_sql("SELECT 1").scalar())
    assert (gave_up.value.attempts, gave_up.value.unreachable) == (1, True)
    assert gave_up.value.reason == "lost_connection"
    [warning] = _warnings(caplog)
    assert "connection to the database was lost" in warning
    assert warning.endswith(": server closed")  # the driver's first line only


def test_a_connection_dropped_during_its_handshake_is_unreachable(monkeypatch):
    """MySQL's 2013 ("Lost connection ... reading initial communication
    packet") before any connection was made is a database out of reach:
    one more try, not twenty."""

    def refuse():
        raise _DriverError(2013, "Lost connection to server at 'handshake'")

    engine = sa.create_engine("sqlite://", creator=refuse)
    retried = []
    db = Database(engine, max_retries=20, on_retry=retried.append)
    with pytest.raises(DatabaseUnavailable) as gave_up:
        db.read(lambda conn: None)
    assert (gave_up.value.attempts, gave_up.value.reason) == (2, "unreachable")
    assert retried == ["unreachable"]


def test_server_engines_neither_ping_nor_reset_every_connection():
    """lean_pool does each when needed (tests/functional/test_pool.py
    shows it on the servers)."""
    for url in ("postgresql+psycopg://u@h/db", "mysql+pymysql://u@h/db"):
        assert not create_engine(url).pool._pre_ping


def _served(db) -> httpx.Client:
    return fixtures.api_client(app.create_app(fixtures.make_conf(), db))


def _not_ready(_tmp_path, url, monkeypatch):
    engine = create_engine(url)
    not_ready_is_a_disconnect(engine)
    _fail_statements(monkeypatch, engine, _DriverError(1047, NOT_READY), starting="")
    return Database(engine), contextlib.nullcontext()


def _lost(_tmp_path, url, monkeypatch):
    engine = create_engine(url)
    _lose_connections(monkeypatch, engine)
    error = sqlite3.OperationalError("server closed the connection to 10.0.0.9")
    _fail_statements(monkeypatch, engine, error, starting="")
    return Database(engine, max_retries=0), contextlib.nullcontext()


def _pool_full(_tmp_path, url, _monkeypatch):
    engine = sa.create_engine(url, pool_size=1, max_overflow=0, pool_timeout=0.1)
    return Database(engine), engine.connect()


def _unreachable(tmp_path, _url, _monkeypatch):
    engine = create_engine(f"sqlite:///{tmp_path}/no/such/dir/t.db")
    return Database(engine), contextlib.nullcontext()


@pytest.mark.parametrize(
    ("make", "message"),
    [
        (_not_ready, "The database node is not ready for use (not synced with its cluster)"),
        (_lost, "The connection to the database was lost"),
        (_pool_full, "No database connection came free in time"),
        (_unreachable, "The database cannot be reached"),
    ],
    ids=["galera-not-ready", "lost-connection", "pool-timeout", "unreachable"],
)
def test_each_way_out_of_reach_is_a_503_naming_it(tmp_path, sqlite_url, monkeypatch, make, message):
    """From the driver's error to the answer, through the whole application:
    503, Retry-After 5, upstream's JSON error with the request id, the cause
    in one line of our own, never the driver's words."""
    db, holding = make(tmp_path, sqlite_url, monkeypatch)
    with holding:
        answer = _served(db).get("/resource_classes")
    assert answer.status_code == 503
    assert answer.headers["retry-after"] == "5"
    [error] = answer.json()["errors"]
    assert error["detail"].endswith(f"\n\n {message}; please retry later.  ")
    assert error["request_id"] == answer.headers["x-openstack-request-id"]
    for driver_words in ("WSREP", "10.0.0.9", "QueuePool", "unable to open"):
        assert driver_words not in answer.text
