"""Runs the gabbi YAML suites in gabbits/ in-process, once per database backend.

Each YAML file becomes one pytest collector per backend (node ids like
``gabbits/traits.yaml::postgresql::list_traits``) whose tests run in order.
Before a file's first test its database is emptied (a fresh database for
every file) and a new application is built over it; the file's
``fixtures:`` names classes in ``tests.support.fixtures``.
"""

from __future__ import annotations

import types
import unittest

import pytest
from gabbi import handlers, suitemaker, utils

from tests.support import databases, fixtures


def pytest_collect_file(parent, file_path):
    if file_path.suffix == ".yaml" and file_path.parent.name == "gabbits":
        return GabbiFile.from_parent(parent, path=file_path)
    return None


class GabbiFile(pytest.File):
    def collect(self):
        for backend in databases.wanted_backends():
            yield GabbiBackend.from_parent(self, name=backend, backend=backend)


class _AppSlot:
    """A WSGI app whose target the fixture swaps per file (gabbi binds it early)."""

    def __init__(self):
        self.app = None

    def __call__(self, environ, start_response):
        return self.app(environ, start_response)


class GabbiBackend(pytest.Collector):
    def __init__(self, *, backend: str, **kwargs):
        super().__init__(**kwargs)
        self.backend = backend
        self.slot = _AppSlot()
        self.suite = None

    def collect(self):
        with open(self.path, encoding="utf-8") as handle:
            suite_dict = utils.load_yaml(handle=handle)
        base_name = f"{self.backend}_{self.path.stem.replace('-', '_')}"
        fixture_module = types.SimpleNamespace(**fixtures.for_backend(self.backend, self.slot))
        self.suite = suitemaker.test_suite_from_dict(
            unittest.TestLoader(),
            base_name,
            suite_dict,
            str(self.path.parent),
            "placement.test",
            None,
            fixture_module,
            lambda: self.slot,
            handlers=[handler() for handler in handlers.RESPONSE_HANDLERS],
        )
        for case in self.suite:
            short = case.test_data["name"]
            yield GabbiItem.from_parent(self, name=short, case=case)

    def setup(self):
        databases.require(self.backend)  # skipped when unreachable, failed under CI
        result = unittest.TestResult()
        self.suite.start(result)
        if result.errors or result.failures:
            raise RuntimeError(result.errors or result.failures)

    def teardown(self):
        if self.suite is not None and getattr(self.suite, "used_fixtures", None):
            self.suite.stop()


class GabbiItem(pytest.Item):
    def __init__(self, *, case, **kwargs):
        super().__init__(**kwargs)
        self.case = case
        # Every file runs over its backend's database (GabbiBackend.setup); here,
        # not in tests/conftest.py, which `pytest gabbits` does not load.
        self.add_marker(pytest.mark.database)

    def runtest(self):
        result = unittest.TestResult()
        self.case.run(result)
        problems = result.errors + result.failures
        if problems:
            raise GabbiFailure(problems[0][1])
        if result.unexpectedSuccesses:
            raise GabbiFailure("unexpected success of a test marked xfail")
        if result.expectedFailures:
            pytest.xfail("gabbi xfail")
        if result.skipped:
            pytest.skip(result.skipped[0][1])

    def repr_failure(self, excinfo):
        if isinstance(excinfo.value, GabbiFailure):
            return str(excinfo.value)
        return super().repr_failure(excinfo)

    def reportinfo(self):
        return self.path, None, f"{self.parent.backend}: {self.name}"


class GabbiFailure(Exception):
    pass
