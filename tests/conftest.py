"""The database matrix, once for every test directory.

A test that takes ``backend`` runs once per backend of the matrix
(PLACEMENT_TEST_BACKENDS, see tests/support/databases.py); one that takes
``test_db`` gets this process's database of that backend, emptied but for
the standard resource classes and traits. A server that cannot be reached
skips the test, or fails it under CI=true. To run on a subset only (say the
backends with a server), parametrize ``backend`` indirectly::

    @pytest.mark.parametrize("backend", databases.server_backends(), indirect=True)
"""

from __future__ import annotations

import os
import pathlib

import pytest

from tests.support import databases


@pytest.fixture(params=databases.wanted_backends())
def backend(request) -> str:
    """One backend name of the matrix: sqlite, postgresql or mysql."""
    return request.param


@pytest.fixture
def test_db(backend) -> databases.TestDatabase:
    """This process's database of ``backend``, emptied for this test."""
    return databases.fresh(backend)


@pytest.fixture
def sqlite_file(tmp_path) -> pathlib.Path:
    """A SQLite database file under tmp_path, not created yet: for a test
    that opens a database of its own there, or has a command or a server it
    starts do so."""
    return tmp_path / "placement.db"


@pytest.fixture
def sqlite_url(sqlite_file) -> str:
    """``sqlite_file``'s URL."""
    return f"sqlite:///{sqlite_file}"


@pytest.fixture
def quickstart_dir(tmp_path):
    """A directory to run ``placement-svc`` in without a configuration file,
    where it keeps its quick-start SQLite database (placement.sqlite). The
    test is skipped on a machine whose /etc/placement/placement.conf the
    command would read instead."""
    if os.path.exists("/etc/placement/placement.conf"):
        pytest.skip("this machine has an /etc/placement/placement.conf")
    return tmp_path


# The fixtures that open a database or start a database server: ``backend`` and
# ``test_db`` here (and every fixture built on them, such as tests/integration's
# ``db``), ``sqlite_file``, ``sqlite_url`` and ``quickstart_dir`` here (a SQLite
# file of the test's own), tests/galera's ``galera`` cluster,
# test_database_outage's private ``postgresql`` cluster, test_secrets'
# ``postgresql_url``. A test that uses one, directly or through another fixture,
# is marked ``database`` below, so that ``-m "not database"`` runs the tests that
# need no database. (gabbi's tests are marked by tests/functional/gabbi_plugin.py.)
DATABASE_FIXTURES = frozenset(
    {
        "backend",
        "test_db",
        "sqlite_file",
        "sqlite_url",
        "quickstart_dir",
        "galera",
        "postgresql",
        "postgresql_url",
    }
)


def pytest_collection_modifyitems(items):
    for item in items:
        if DATABASE_FIXTURES.intersection(getattr(item, "fixturenames", ())):
            item.add_marker(pytest.mark.database)
