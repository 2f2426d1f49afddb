"""The pool's two round trips saved (db/engine.py's lean_pool), and what
keeps that safe, on PostgreSQL and MariaDB.

What is proven: a connection idle longer than PING_AFTER and killed by the
server meanwhile is replaced when it is handed out; one lost sooner fails
its first statement and the unit of work runs again on a new connection,
answering as if nothing happened; a connection whose transaction ended with
COMMIT goes back to the pool without another ROLLBACK (MariaDB counts them),
and one left in a transaction is rolled back on its way back.
"""

from __future__ import annotations

import pytest
import sqlalchemy as sa

from placement_svc.db import engine as db_engine
from placement_svc.db.engine import Database, create_engine
from tests.support import databases

servers = pytest.mark.parametrize("backend", databases.server_backends(), indirect=True)


def session_id(conn) -> int:
    query = (
        "SELECT pg_backend_pid()" if conn.dialect.name == "postgresql" else "SELECT CONNECTION_ID()"
    )
    return conn.exec_driver_sql(query).scalar()


def kill(url: str, session: int) -> None:
    admin = sa.create_engine(url, poolclass=sa.pool.NullPool, isolation_level="AUTOCOMMIT")
    with admin.connect() as conn:
        if conn.dialect.name == "postgresql":
            conn.exec_driver_sql(f"SELECT pg_terminate_backend({session})")
        else:
            conn.exec_driver_sql(f"KILL {session}")
    admin.dispose()


@pytest.fixture
def engine(test_db):
    engine = create_engine(test_db.url, db_conf=None)
    engine.pool._pool.maxsize = 1  # one connection, handed out again and again
    yield engine
    engine.dispose()


@servers
def test_a_connection_killed_while_idle_is_replaced_when_handed_out(engine, test_db, monkeypatch):
    monkeypatch.setattr(db_engine, "PING_AFTER", 0.0)  # every connection has been idle long
    with engine.connect() as conn:
        first = session_id(conn)
    kill(test_db.url, first)
    with engine.connect() as conn:
        assert conn.exec_driver_sql("SELECT 1").scalar() == 1
        assert session_id(conn) != first


@servers
def test_a_connection_lost_within_a_second_costs_one_run_again(engine, test_db, monkeypatch):
    monkeypatch.setattr(db_engine, "PING_AFTER", 3600.0)  # never pinged
    with engine.connect() as conn:
        first = session_id(conn)
    kill(test_db.url, first)
    runs = []

    def work(conn):
        runs.append(session_id(conn))
        return conn.exec_driver_sql("SELECT 41 + 1").scalar()

    assert Database(engine).read(work) == 42
    assert len(runs) == 1 and runs[0] != first  # the lost one failed before `work` saw it...
    with engine.connect() as conn:
        assert session_id(conn) == runs[0]  # ...and the new one is kept


@pytest.mark.parametrize("backend", ["mysql"], indirect=True)
def test_a_committed_connection_goes_back_without_another_rollback(engine):
    def rollbacks(conn) -> int:
        return int(conn.exec_driver_sql("SHOW SESSION STATUS LIKE 'Com_rollback'").one()[1])

    with engine.connect() as conn:
        before = rollbacks(conn)
        conn.commit()
    for _ in range(3):
        with engine.begin() as conn:
            conn.exec_driver_sql("SELECT 1")
    with engine.connect() as conn:
        assert rollbacks(conn) == before
        conn.commit()
    raw = engine.raw_connection()  # a transaction maybe left open on the way back...
    cursor = raw.cursor()
    cursor.execute("BEGIN")
    cursor.execute("SELECT 1")
    cursor.close()
    raw.close()
    with engine.connect() as conn:  # ...is rolled back
        assert rollbacks(conn) == before + 1
        conn.commit()
    raw = engine.raw_connection()  # in autocommit mode a SELECT leaves none open:
    cursor = raw.cursor()
    cursor.execute("SELECT 1")
    cursor.close()
    raw.close()
    with engine.connect() as conn:  # nothing to roll back
        assert rollbacks(conn) == before + 1


@pytest.mark.parametrize("backend", ["postgresql"], indirect=True)
def test_a_read_on_postgresql_runs_outside_a_transaction_and_a_write_after_it_inside(engine):
    """A read's statements each see what was committed when they began, as
    under READ COMMITTED in a transaction, without a BEGIN and a COMMIT; the
    one pooled connection goes back to transactions for the write that
    takes it next, which is whole or nothing."""
    db = Database(engine)
    seen = []

    def read(conn):
        seen.append(conn.connection.dbapi_connection.autocommit)
        # Outside a transaction, each statement is its own: its start is now().
        return conn.exec_driver_sql("SELECT now() = statement_timestamp()").scalar()

    def write(conn):
        seen.append(conn.connection.dbapi_connection.autocommit)
        conn.exec_driver_sql("CREATE TABLE half_written (id int)")
        conn.exec_driver_sql("INSERT INTO half_written VALUES (1)")
        raise RuntimeError("the write fails after two statements")

    def count_tables(conn):
        return conn.exec_driver_sql(
            "SELECT count(*) FROM pg_tables WHERE tablename = 'half_written'"
        ).scalar()

    assert db.read(read) is True
    with pytest.raises(RuntimeError):
        db.write(write)
    assert db.read(count_tables) == 0  # rolled back whole: it ran in a transaction
    assert db.read(read) is True
    assert seen == [True, False, True]


@pytest.mark.parametrize("backend", ["postgresql"], indirect=True)
def test_a_transaction_shows_now_at_its_start_to_every_statement(engine):
    """The check above can fail: in a write's transaction, a later
    statement's start is after now(), the transaction's."""

    def write(conn):
        conn.exec_driver_sql("SELECT pg_sleep(0.01)")
        return conn.exec_driver_sql("SELECT now() = statement_timestamp()").scalar()

    assert Database(engine).write(write) is False


@pytest.mark.parametrize("backend", ["mysql"], indirect=True)
def test_a_read_on_mariadb_sends_no_begin_or_commit_and_a_write_after_it_is_whole(engine):
    """Through PyMySQL a read runs in autocommit mode, its statements alone
    (no BEGIN, no COMMIT: MariaDB counts both); the write that takes the one
    pooled connection next begins a transaction, whole or nothing, and a
    read after it is outside one again."""
    db = Database(engine)
    with engine.begin() as conn:
        conn.exec_driver_sql("CREATE TABLE half_written (id INT) ENGINE=InnoDB")

    def counted(conn) -> tuple[int, int, int]:
        status = dict(
            conn.exec_driver_sql(
                "SHOW SESSION STATUS WHERE Variable_name IN "
                "('Com_begin', 'Com_commit', 'Com_rollback')"
            ).all()
        )
        in_transaction = conn.exec_driver_sql("SELECT @@in_transaction").scalar()
        return (
            int(status["Com_begin"]) + int(status["Com_commit"]),
            int(status["Com_rollback"]),
            in_transaction,
        )

    def write(conn):
        conn.exec_driver_sql("INSERT INTO half_written VALUES (1)")
        assert conn.exec_driver_sql("SELECT @@in_transaction").scalar() == 1
        conn.exec_driver_sql("INSERT INTO half_written VALUES (2)")
        raise RuntimeError("the write fails after two statements")

    def rows(conn) -> int:
        return conn.exec_driver_sql("SELECT count(*) FROM half_written").scalar()

    try:
        first = db.read(counted)
        assert first[2] == 0  # no transaction open during the read
        assert db.read(counted)[:2] == first[:2]  # the read between sent neither
        with pytest.raises(RuntimeError):
            db.write(write)
        assert db.read(rows) == 0  # rolled back whole: it ran in a transaction
        after = db.read(counted)
        # the write's BEGIN, and its ROLLBACK; the reads since: nothing
        assert (after[0] - first[0], after[1] - first[1], after[2]) == (1, 1, 0)
    finally:
        with engine.begin() as conn:
            conn.exec_driver_sql("DROP TABLE half_written")
