"""The database counts changes to the cloud's shape (db/shape_changes.py).

What is proven, on every backend: a change written past placement-svc (a
plain SQLAlchemy engine, as upstream Placement or an operator in SQL would
write) moves the world generation, so the next candidates read of a process
that keeps the shape sees it at once; two sessions write the shape at the
same time without one waiting for the other (no single row every shape
write locks; PostgreSQL and MariaDB, SQLite writes one at a time anyway);
``db hand-back`` leaves no trigger nor table of ours, and ``db sync`` makes
them again.
"""

from __future__ import annotations

import uuid

import pytest
import sqlalchemy as sa

from placement_svc.candidates import world
from placement_svc.db import migration, shape_changes
from placement_svc.db.engine import create_engine
from tests.support import databases


def plain(url: str) -> sa.engine.Engine:
    """An engine without placement-svc's hooks: a writer from outside."""
    return sa.create_engine(url, poolclass=sa.pool.NullPool)


def session_id(conn) -> int:
    query = (
        "SELECT pg_backend_pid()" if conn.dialect.name == "postgresql" else "SELECT CONNECTION_ID()"
    )
    found = conn.exec_driver_sql(query).scalar()
    conn.commit()
    return found


def triggers(conn) -> set[str]:
    if conn.dialect.name == "sqlite":
        query = "SELECT name FROM sqlite_master WHERE type = 'trigger'"
    else:
        query = (
            "SELECT trigger_name FROM information_schema.triggers "
            "WHERE event_object_schema = "
            + ("current_schema()" if conn.dialect.name == "postgresql" else "DATABASE()")
        )
    return {row[0] for row in conn.exec_driver_sql(query)}


def test_a_write_from_outside_is_seen_by_the_next_read_of_the_shape(test_db):
    worlds = world.Worlds()
    outside = plain(test_db.url)
    try:
        with test_db.engine.connect() as conn:
            before = worlds.current(conn)
        name = f"CUSTOM_OUTSIDE_{uuid.uuid4().hex[:8].upper()}"
        with outside.begin() as conn:
            conn.exec_driver_sql(f"INSERT INTO traits (name) VALUES ('{name}')")
        with test_db.engine.connect() as conn:
            after = worlds.current(conn)
        assert after is not before and after.generation != before.generation
        assert name in after.all_traits and name not in before.all_traits
        assert worlds.loads == 2
        with outside.begin() as conn:  # a claim's generation bump, as upstream's
            conn.exec_driver_sql(
                "UPDATE resource_providers SET generation = generation + 1 WHERE id = -1"
            )
        with test_db.engine.connect() as conn:
            assert worlds.current(conn) is after
    finally:
        outside.dispose()


@pytest.mark.parametrize("backend", ["postgresql", "mysql"], indirect=True)
def test_two_sessions_change_the_shape_at_once_without_waiting(test_db):
    """Each in a transaction it has not committed: the second would wait
    for the first (and time out) if both counted in one row."""
    engine = plain(test_db.url)
    held = []
    try:
        first = engine.connect()
        held.append(first)
        while True:  # another session whose row is another (ids meet modulo STRIPES rarely)
            second = engine.connect()
            held.append(second)
            if (
                session_id(first) % shape_changes.STRIPES
                != session_id(second) % shape_changes.STRIPES
            ):
                break
        if test_db.backend == "postgresql":
            second.exec_driver_sql("SET lock_timeout = '3s'")
        else:
            second.exec_driver_sql("SET SESSION innodb_lock_wait_timeout = 3")
        second.commit()
        names = [f"CUSTOM_AT_ONCE_{n}_{uuid.uuid4().hex[:8].upper()}" for n in (1, 2)]
        with first.begin():
            first.exec_driver_sql(f"INSERT INTO traits (name) VALUES ('{names[0]}')")
            with second.begin():
                second.exec_driver_sql(f"INSERT INTO traits (name) VALUES ('{names[1]}')")
        with engine.connect() as conn:
            found = conn.exec_driver_sql(
                f"SELECT COUNT(*) FROM traits WHERE name IN ('{names[0]}', '{names[1]}')"
            ).scalar()
        assert found == 2
    finally:
        for conn in held:
            conn.close()
        engine.dispose()


def test_hand_back_drops_the_triggers_and_sync_makes_them_again(backend, tmp_path):
    with databases.empty_database_url(backend, tmp_path) as url:
        engine = create_engine(url)
        try:
            migration.sync(engine)
            with engine.connect() as conn:
                expected = {name for name, _ in shape_changes.trigger_names(conn.dialect.name)}
                assert triggers(conn) == expected
                assert conn.execute(shape_changes.SUM).scalar() is not None
            assert migration.hand_back(engine) == [
                "world_changes and its triggers",
                "world_generation",
                "allocation_holds (0 expired holds freed, 0 kept as allocations)",
            ]
            with engine.connect() as conn:
                assert triggers(conn) == set()
                assert "world_changes" not in sa.inspect(conn).get_table_names()
            with engine.begin() as conn:  # a shape write as upstream makes it, untroubled
                conn.exec_driver_sql("INSERT INTO traits (name) VALUES ('CUSTOM_AFTER')")
            migration.sync(engine)
            with engine.connect() as conn:
                assert triggers(conn) == expected
        finally:
            engine.dispose()


def test_revision_0003_stopped_halfway_is_finished_by_the_next_sync(backend, tmp_path):
    """As MySQL leaves it when CREATE TRIGGER is refused (error 1419, binary
    logging on and no SUPER): the table made and committed, no trigger, the
    schema still at 0002. The next ``db sync`` finishes."""
    with databases.empty_database_url(backend, tmp_path) as url:
        engine = create_engine(url)
        try:
            migration.sync(engine)
            with engine.begin() as conn:
                shape_changes.drop(conn)
                conn.exec_driver_sql("UPDATE alembic_version SET version_num = '0002'")
            migration.sync(engine)
            assert migration.current(engine) == migration.head()
            with engine.connect() as conn:
                expected = {name for name, _ in shape_changes.trigger_names(conn.dialect.name)}
                assert triggers(conn) == expected
                # kept for the previous release's processes (rolling upgrades)
                assert "world_generation" in sa.inspect(conn).get_table_names()
        finally:
            engine.dispose()
