"""What the unit of work reports to any handler is answered once, in app.py:
a value the database refuses is a 400, retries in vain a 503, whatever the
handler, in upstream's error format with the request id."""

from __future__ import annotations

import json

import httpx
import pytest

from placement_svc import app, conf
from placement_svc.db.exceptions import DatabaseUnavailable, UnstorableValue


class _RefusingDatabase:
    """A Database whose every transaction ends with ``fact``."""

    engine = None  # nothing to watch: the metrics leave the pool alone
    on_retry = None

    def __init__(self, fact: Exception):
        self.fact = fact

    def read(self, fn):
        raise self.fact

    def write(self, fn):
        raise self.fact


def _client(fact: Exception) -> httpx.Client:
    cfg = conf.make_conf(config_files=[], quickstart_if_unconfigured=False)
    cfg.set_override("auth_strategy", "noauth2", group="api")
    return httpx.Client(
        transport=httpx.WSGITransport(app=app.create_app(cfg, _RefusingDatabase(fact))),
        base_url="http://placement.test",
        headers={"x-auth-token": "admin", "openstack-api-version": "placement latest"},
    )


@pytest.mark.parametrize(
    ("fact", "status", "message", "retry_after"),
    [
        (
            UnstorableValue("NUL"),
            400,
            "The request contains a value the database cannot store.",
            None,
        ),
        (DatabaseUnavailable(21), 503, "The database is busy; please retry the request.", "1"),
        (
            DatabaseUnavailable(2, unreachable=True),
            503,
            "The database cannot be reached; please retry later.",
            "5",
        ),
    ],
)
@pytest.mark.parametrize(
    ("method", "path", "body"),
    [
        ("GET", "/resource_classes", None),
        ("PUT", "/traits/CUSTOM_X", None),
        ("GET", "/resource_providers/8b5e2b8e-1f8e-4c43-9a7c-4d7c1f0f6e11/inventories", None),
        ("DELETE", "/allocations/8b5e2b8e-1f8e-4c43-9a7c-4d7c1f0f6e11", None),
    ],
)
def test_every_handler_gets_the_same_answer(fact, status, message, retry_after, method, path, body):
    answer = _client(fact).request(method, path, json=body)
    assert answer.status_code == status
    assert answer.headers.get("retry-after") == retry_after
    error = json.loads(answer.text)["errors"][0]
    assert error["code"] == "placement.undefined_code"
    assert error["detail"].endswith(f"\n\n {message}  ")
    assert error["request_id"]
