"""The database matrix: SQLite always; PostgreSQL and MariaDB/MySQL when reachable.

Server URLs come from PLACEMENT_TEST_POSTGRESQL_URL and PLACEMENT_TEST_MYSQL_URL
(defaults: PostgreSQL on 127.0.0.1:5432 with trust auth, MariaDB on
127.0.0.1:3306 as root with an empty password, both database ``test``).
Each test process creates its own uniquely named database on each server,
migrates it once, empties it between test files and drops it at exit.
Under CI=true a server that cannot be reached fails the run instead of
being skipped. PLACEMENT_TEST_BACKENDS=sqlite,postgresql limits the matrix.
Tests ask for these through the ``backend`` and ``test_db`` fixtures of
tests/conftest.py.
"""

from __future__ import annotations

import atexit
import contextlib
import os
import tempfile
import uuid
from typing import NoReturn

import pytest
import sqlalchemy as sa
from sqlalchemy.engine import make_url

from placement_svc.db import migration, tables
from placement_svc.db.engine import Database, create_engine

DEFAULT_URLS = {
    "postgresql": "postgresql+psycopg://postgres@127.0.0.1:5432/test",
    "mysql": "mysql+pymysql://root@127.0.0.1:3306/test",
}
ALL_BACKENDS = ("sqlite", "postgresql", "mysql")


def in_ci() -> bool:
    return os.environ.get("CI", "").lower() in ("1", "true", "yes")


def wanted_backends() -> list[str]:
    names = os.environ.get("PLACEMENT_TEST_BACKENDS")
    if not names:
        return list(ALL_BACKENDS)
    chosen = [n.strip() for n in names.split(",") if n.strip()]
    unknown = set(chosen) - set(ALL_BACKENDS)
    if unknown:
        raise ValueError(f"unknown backends in PLACEMENT_TEST_BACKENDS: {sorted(unknown)}")
    return chosen


def server_backends() -> list[str]:
    """The wanted backends with a server of their own (all but SQLite)."""
    return [backend for backend in wanted_backends() if backend != "sqlite"]


def server_url(backend: str) -> str:
    return os.environ.get(f"PLACEMENT_TEST_{backend.upper()}_URL", DEFAULT_URLS[backend])


class Unavailable(Exception):
    pass


class TestDatabase:
    """One migrated database of a backend, reusable across test files."""

    __test__ = False  # not a pytest test class

    def __init__(self, backend: str):
        self.backend = backend
        self._admin = None
        self.name = f"placement_test_{uuid.uuid4().hex[:12]}"
        if backend == "sqlite":
            self._dir = tempfile.mkdtemp(prefix="placement-test-")
            self.url = f"sqlite:///{self._dir}/{self.name}.db"
        else:
            self.url = self._create_server_database(backend)
        self.engine = create_engine(self.url)
        migration.upgrade(self.engine)
        self.db = Database(self.engine)
        atexit.register(self.drop)

    def _create_server_database(self, backend: str) -> str:
        base = make_url(server_url(backend))
        try:
            self._admin = sa.create_engine(base, isolation_level="AUTOCOMMIT")
            with self._admin.connect() as conn:
                conn.exec_driver_sql(f"CREATE DATABASE {self.name}")
        except Exception as exc:  # noqa: BLE001 - any failure means "not reachable"
            raise Unavailable(f"{backend} at {base.render_as_string()}: {exc}") from exc
        return base.set(database=self.name).render_as_string(hide_password=False)

    def reset(self) -> None:
        """Empty every table and put the standard names back: a fresh database."""
        with self.engine.begin() as conn:
            conn.execute(
                tables.resource_providers.update().values(
                    parent_provider_id=None, root_provider_id=None
                )
            )
            for table in (tables.allocation_holds, *tables.ALL_TABLES):
                conn.execute(table.delete())
        migration.sync_standard_names(self.engine)

    def drop(self) -> None:
        self.engine.dispose()
        if self._admin is not None:
            force = " WITH (FORCE)" if self.backend == "postgresql" else ""
            with self._admin.connect() as conn:
                conn.exec_driver_sql(f"DROP DATABASE IF EXISTS {self.name}{force}")
            self._admin.dispose()
            self._admin = None


_DATABASES: dict[str, TestDatabase | Unavailable] = {}


def get(backend: str) -> TestDatabase:
    """This process's database for ``backend``; raises Unavailable when unreachable."""
    found = _DATABASES.get(backend)
    if found is None:
        try:
            found = TestDatabase(backend)
        except Unavailable as exc:
            found = exc
        _DATABASES[backend] = found
    if isinstance(found, Unavailable):
        raise found
    return found


def require(backend: str) -> TestDatabase:
    """This process's database for ``backend``, for a test that needs it:
    skipped when the backend is not wanted or its server is unreachable, a
    failure under CI=true, where a missing server must not pass unseen."""
    if backend not in wanted_backends():
        pytest.skip(f"{backend} not in PLACEMENT_TEST_BACKENDS")
    try:
        return get(backend)
    except Unavailable as exc:
        unreachable(exc)


def fresh(backend: str) -> TestDatabase:
    """``require(backend)``, emptied: only the standard names in it."""
    test_db = require(backend)
    test_db.reset()
    return test_db


def unreachable(exc: Exception) -> NoReturn:
    """Skip the test over a server that cannot be reached; fail it under CI=true."""
    if in_ci():
        pytest.fail(f"CI=true requires this database: {exc}", pytrace=False)
    pytest.skip(f"database not reachable (set CI=true to require it): {exc}")


@contextlib.contextmanager
def empty_database_url(backend: str, directory):
    """The URL of a new database without a schema, dropped afterwards: for
    tests of what creates the schema (a SQLite file in ``directory``)."""
    if backend == "sqlite":
        yield f"sqlite:///{directory}/placement.db"
        return
    base = make_url(server_url(backend))
    name = f"placement_cli_{uuid.uuid4().hex[:12]}"
    admin = sa.create_engine(base, isolation_level="AUTOCOMMIT")
    try:
        with admin.connect() as conn:
            conn.exec_driver_sql(f"CREATE DATABASE {name}")
    except Exception as exc:  # noqa: BLE001 - any failure means "not reachable"
        admin.dispose()
        unreachable(Unavailable(f"{backend} at {base.render_as_string()}: {exc}"))
    try:
        yield base.set(database=name).render_as_string(hide_password=False)
    finally:
        with admin.connect() as conn:
            conn.exec_driver_sql(f"DROP DATABASE IF EXISTS {name}")
        admin.dispose()
