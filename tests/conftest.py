"""The database matrix, once for every test directory.

A test that takes ``backend`` runs once per backend of the matrix
(PLACEMENT_TEST_BACKENDS, see tests/functional/databases.py); one that takes
``test_db`` gets this process's database of that backend, emptied but for
the standard resource classes and traits. A server that cannot be reached
skips the test, or fails it under CI=true. To run on a subset only (say the
backends with a server), parametrize ``backend`` indirectly::

    @pytest.mark.parametrize("backend", databases.server_backends(), indirect=True)
"""

from __future__ import annotations

import pytest

from tests.functional import databases


@pytest.fixture(params=databases.wanted_backends())
def backend(request) -> str:
    """One backend name of the matrix: sqlite, postgresql or mysql."""
    return request.param


@pytest.fixture
def test_db(backend) -> databases.TestDatabase:
    """This process's database of ``backend``, emptied for this test."""
    return databases.fresh(backend)
