"""What every MySQL/MariaDB connection is told when it opens: the SQL mode and,
for a Galera cluster, wsrep_sync_wait ([placement_database] options); and
that the handshake's short read timeout ends with the handshake."""

from __future__ import annotations

import pytest
import sqlalchemy as sa

from placement_svc import conf as placement_conf
from placement_svc.db.engine import create_engine
from tests.support import databases

pytestmark = [
    pytest.mark.skipif(
        "mysql" not in databases.wanted_backends(), reason="MariaDB/MySQL not in the matrix"
    ),
    # The server of the matrix, reached without the backend fixture (tests/conftest.py).
    pytest.mark.database,
]


def _session(**options):
    conf = placement_conf.make_conf([], config_files=[])
    for name, value in options.items():
        conf.set_override(name, value, group="placement_database")
    engine = create_engine(databases.server_url("mysql"), conf.placement_database)
    try:
        with engine.connect() as conn:
            query = sa.text("SELECT @@SESSION.wsrep_sync_wait, @@SESSION.sql_mode")
            return conn.execute(query).one()
    finally:
        engine.dispose()


def test_wsrep_sync_wait_is_left_alone_unless_set():
    server_default = _session()[0]
    assert _session(mysql_wsrep_sync_wait=1)[0] == 1
    assert _session(mysql_wsrep_sync_wait=7)[0] == 7
    assert server_default == 0


def test_sql_mode_and_wsrep_sync_wait_are_both_set():
    sync_wait, sql_mode = _session(mysql_wsrep_sync_wait=1, mysql_sql_mode="ANSI_QUOTES")
    assert (sync_wait, sql_mode) == (1, "ANSI_QUOTES")


def test_a_statement_may_take_longer_than_the_handshake_timeout(monkeypatch):
    # PyMySQL's greeting and login are read under a short read_timeout
    # (CONNECT_TIMEOUT); once connected, a statement waits as long as it takes.
    from placement_svc.db import engine as engine_module

    monkeypatch.setattr(engine_module, "CONNECT_TIMEOUT", 1)
    engine = create_engine(databases.server_url("mysql"))
    try:
        with engine.connect() as conn:
            assert conn.execute(sa.text("SELECT SLEEP(2)")).scalar() == 0
    finally:
        engine.dispose()
