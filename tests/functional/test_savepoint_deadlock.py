"""A deadlock inside a SAVEPOINT on MariaDB re-runs the whole transaction.

MariaDB answers a deadlock by rolling back the whole transaction, the
savepoint with it; SQLAlchemy's ROLLBACK TO SAVEPOINT then fails with 1305
("SAVEPOINT ... does not exist") while the deadlock is being handled. That
1305 reached the client as a 500 (consumers._ensure_row opens a savepoint
for every new project, user or consumer type). Here a real deadlock is made
inside a savepoint: the unit of work must run again, once, and succeed.
"""

from __future__ import annotations

import threading
import time

import pytest
import sqlalchemy as sa

from tests.support import databases

MYSQL = [backend for backend in databases.server_backends() if backend == "mysql"]


@pytest.mark.parametrize("backend", MYSQL, indirect=True)
def test_a_deadlock_inside_a_savepoint_reruns_the_whole_transaction(test_db):
    engine, db = test_db.engine, test_db.db
    with engine.begin() as conn:
        conn.exec_driver_sql(
            "CREATE TABLE savepoint_race (id INT PRIMARY KEY, v INT) ENGINE=InnoDB"
        )
        conn.execute(
            sa.text("INSERT INTO savepoint_race VALUES (:id, 0)"), [{"id": i} for i in range(1, 51)]
        )
    retried: list[str] = []
    db.on_retry = retried.append
    holds_one = threading.Event()
    holds_two = threading.Event()

    def other_writer():
        # The bigger transaction: InnoDB makes the smaller one the victim.
        with engine.begin() as conn:
            conn.exec_driver_sql("UPDATE savepoint_race SET v = v + 1 WHERE id = 1 OR id > 2")
            holds_one.set()
            holds_two.wait(10)
            time.sleep(0.3)  # the unit of work is waiting on row 1 by now
            conn.exec_driver_sql("UPDATE savepoint_race SET v = v + 1 WHERE id = 2")

    attempts = []

    def work(conn):
        attempts.append(1)
        conn.exec_driver_sql("UPDATE savepoint_race SET v = v + 10 WHERE id = 2")
        holds_two.set()
        with conn.begin_nested():
            conn.exec_driver_sql("UPDATE savepoint_race SET v = v + 10 WHERE id = 1")
        return True

    writer = threading.Thread(target=other_writer)
    writer.start()
    # Else the unit of work may take row 1 first, and there is no deadlock.
    assert holds_one.wait(10)
    try:
        assert db.write(work) is True
        writer.join(30)
        with engine.connect() as conn:
            rows = conn.exec_driver_sql("SELECT id, v FROM savepoint_race WHERE id <= 2").all()
    finally:
        writer.join(30)
        db.on_retry = None
        with engine.begin() as conn:
            conn.exec_driver_sql("DROP TABLE savepoint_race")
    assert retried == ["deadlock"] and len(attempts) == 2
    assert dict(rows) == {1: 11, 2: 11}  # both writers' updates, each once
