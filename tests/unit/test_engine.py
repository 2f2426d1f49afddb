"""The unit of work re-runs a whole transaction on retryable database errors only."""

from __future__ import annotations

import sqlite3

import pytest
import sqlalchemy as sa
from sqlalchemy.exc import IntegrityError, OperationalError

from placement_svc.db.engine import (
    Database,
    create_engine,
    is_retryable,
    normalize_url,
    retry_reason,
)
from placement_svc.db.exceptions import DatabaseUnavailable, UnstorableValue


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


def test_write_reruns_the_whole_function_after_a_lock(tmp_path):
    retried = []
    db = Database(
        create_engine(f"sqlite:///{tmp_path}/t.db"), max_retries=3, on_retry=retried.append
    )
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


def test_write_gives_up_after_max_retries(tmp_path):
    db = Database(create_engine(f"sqlite:///{tmp_path}/t.db"), max_retries=2)

    def always_locked(conn):
        raise _operational(sqlite3.OperationalError("database is locked"))

    with pytest.raises(DatabaseUnavailable) as gave_up:
        db.write(always_locked)
    assert gave_up.value.attempts == 3  # the first try and two retries


def test_operator_urls_get_an_installed_driver(monkeypatch):
    installed = {"psycopg", "pymysql"}
    monkeypatch.setattr(
        "placement_svc.db.engine.importlib.util.find_spec",
        lambda name: object() if name in installed else None,
    )
    assert normalize_url("postgresql://u:p@h/db") == "postgresql+psycopg://u:p@h/db"
    assert normalize_url("mysql://u:p@h/db?charset=utf8") == "mysql+pymysql://u:p@h/db?charset=utf8"
    assert normalize_url("mysql+pymysql://u@h/db") == "mysql+pymysql://u@h/db"
    assert normalize_url("sqlite:///x.db") == "sqlite:///x.db"
    installed.add("psycopg2")
    assert normalize_url("postgresql://u:p@h/db") == "postgresql://u:p@h/db"


def test_a_value_the_database_refuses_is_reported_as_unstorable(tmp_path):
    from sqlalchemy.exc import DataError

    db = Database(create_engine(f"sqlite:///{tmp_path}/t.db"))

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


def _lose_connections(monkeypatch, engine):
    """Make SQLAlchemy take every driver error for a dropped connection."""
    monkeypatch.setattr(engine.dialect, "is_disconnect", lambda *_args: True)


def test_a_connection_lost_mid_transaction_runs_it_again(tmp_path, monkeypatch):
    """The lost connection is rolled back without a connection behind it;
    nothing on that path may hide the reason to run again (a world-change
    counter once raised PendingRollbackError there: a 500)."""
    engine = create_engine(f"sqlite:///{tmp_path}/t.db")
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
