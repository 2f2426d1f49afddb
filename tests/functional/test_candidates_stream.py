"""A large GET /allocation_candidates answer is streamed, and only made after
its transaction has ended.

Through the whole WSGI application, on every database backend, with
answering.WHOLE_UP_TO lowered so that a wide host's answer (a few hundred
candidates) is streamed: the application returns with every SQL statement
run and its connection back in the pool; reading the body then runs none
and takes none; the body has no Content-Length and is byte for byte the
body sent whole (with its Content-Length) when the bound is not lowered;
the answer's metrics are counted once the last piece is made.
"""

from __future__ import annotations

import json
import uuid

import falcon.testing
import pytest
from sqlalchemy import event

from placement_svc import app
from placement_svc.db.engine import Database, create_engine
from placement_svc.http import answering
from tests.support import fixtures

DEVICES = 6
QUERY = (
    "&".join(f"resources{g}=CUSTOM_DEVICE:1" for g in range(1, 4))
    + "&resources=VCPU:1&group_policy=isolate"
)
CANDIDATES = 2 * DEVICES * (DEVICES - 1) * (DEVICES - 2)  # two wide hosts


def provider(client, name, parent=None, inventory=None) -> str:
    rp_uuid = str(uuid.uuid5(uuid.NAMESPACE_URL, name))
    body = {"name": name, "uuid": rp_uuid}
    if parent:
        body["parent_provider_uuid"] = parent
    answer = client.post("/resource_providers", json=body)
    assert answer.status_code == 200, answer.text
    inventories = {rc: {"total": total} for rc, total in (inventory or {}).items()}
    answer = client.put(
        f"/resource_providers/{rp_uuid}/inventories",
        json={"resource_provider_generation": 0, "inventories": inventories},
    )
    assert answer.status_code == 200, answer.text
    return rp_uuid


@pytest.fixture
def cloud(test_db):
    """(the whole application, its engine) on this backend's test database:
    two hosts of DEVICES one-unit devices each, and a host with nothing
    the query asks for."""
    engine = create_engine(test_db.url)
    application = app.create_app(fixtures.make_conf(), Database(engine))
    client = fixtures.api_client(application)
    assert client.put("/resource_classes/CUSTOM_DEVICE").status_code == 201
    for host in ("wide-a", "wide-b"):
        root = provider(client, host, inventory={"VCPU": 16, "MEMORY_MB": 8192})
        for device in range(DEVICES):
            provider(client, f"{host}-dev{device}", root, {"CUSTOM_DEVICE": 1})
    provider(client, "plain", inventory={"MEMORY_MB": 1024})
    yield application, engine
    engine.dispose()


class Watch:
    """The statements an engine runs and the connections it lends and takes back."""

    def __init__(self, engine):
        self.engine = engine
        self.statements: list[str] = []
        self.lent = 0
        self.back = 0

    def _statement(self, _conn, _cursor, statement, *_args):
        self.statements.append(statement)

    def _checkout(self, *_args):
        self.lent += 1

    def _checkin(self, *_args):
        self.back += 1

    def __enter__(self):
        event.listen(self.engine, "before_cursor_execute", self._statement)
        event.listen(self.engine.pool, "checkout", self._checkout)
        event.listen(self.engine.pool, "checkin", self._checkin)
        return self

    def __exit__(self, *exc_info):
        event.remove(self.engine, "before_cursor_execute", self._statement)
        event.remove(self.engine.pool, "checkout", self._checkout)
        event.remove(self.engine.pool, "checkin", self._checkin)


def call(application, version="1.39"):
    """The status, the headers and the body iterable, not read yet."""
    answered = {}

    def start_response(status, headers, exc_info=None):
        answered["status"] = status
        answered["headers"] = {name.lower(): value for name, value in headers}

    environ = falcon.testing.create_environ(
        "/allocation_candidates",
        query_string=QUERY,
        headers={**fixtures.ADMIN_HEADERS, "openstack-api-version": f"placement {version}"},
    )
    iterable = application(environ, start_response)
    return answered["status"], answered["headers"], iterable


def candidates_counted(application) -> float | None:
    """How many candidates the metrics counted, over every answer."""
    return application.metrics.registry.get_sample_value(
        "placement_allocation_candidates_returned_sum", {"groups": "4", "trees": "nested"}
    )


@pytest.mark.parametrize("version", ["1.29", "1.39"])
def test_a_streamed_answer_is_made_after_its_transaction(cloud, monkeypatch, version):
    application, engine = cloud
    status, headers, iterable = call(application, version)
    assert status.startswith("200") and "content-length" in headers
    whole = b"".join(iterable)
    assert len(json.loads(whole)["allocation_requests"]) == CANDIDATES
    counted = candidates_counted(application)
    assert counted == CANDIDATES

    monkeypatch.setattr(answering, "WHOLE_UP_TO", 1000)
    with Watch(engine) as watch:
        status, headers, iterable = call(application, version)
        assert status.startswith("200")
        assert "content-length" not in headers
        assert headers["content-type"] == "application/json"
        statements, lent = len(watch.statements), watch.lent
        assert statements and lent and watch.back == lent  # the transaction is over
        assert candidates_counted(application) == counted  # not yet: the body is not made
        pieces = list(iterable)
        assert len(watch.statements) == statements and watch.lent == lent
    assert len(pieces) >= 2
    assert b"".join(pieces) == whole
    assert candidates_counted(application) == counted + CANDIDATES
