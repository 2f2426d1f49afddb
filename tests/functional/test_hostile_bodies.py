"""Bodies built to hurt: too deep or too large, on every URL that reads one.

A body nested far deeper than any of the API's (they need a handful of
levels) is a 400 naming the limit, whether the parser itself gives up
(thousands of levels) or the body parses and would then be walked by the
encoder, the schema and its error messages; a body over the size limit is a
413. Either way before any work: nothing is written.
"""

from __future__ import annotations

import pytest

from placement_svc import app, routes
from placement_svc.http import reading
from tests.support import fixtures

UUID = "4e8e5957-649f-477b-9e5b-f1f75b21c03c"
PARAMS = {
    "uuid": UUID,
    "consumer_uuid": UUID,
    "root_uuid": UUID,
    "name": "CUSTOM_HOSTILE",
    "resource_class": "VCPU",
}


# PUT of a trait or (from 1.7) of a resource class reads no body at all.
BODILESS = {("PUT", "/traits/{name}"), ("PUT", "/resource_classes/{name}")}


def _writes():
    for route, operation in routes.operations():
        method = operation.method
        if method in ("PUT", "POST", "PATCH") and (method, route.template) not in BODILESS:
            yield method, route.template.format(**PARAMS)


WRITES = sorted(set(_writes()))


@pytest.fixture
def client(test_db):
    # admin and service: the reshaper's policy wants the service role
    headers = {**fixtures.ADMIN_HEADERS, "x-roles": "admin,service"}
    return fixtures.api_client(app.create_app(fixtures.make_conf(), test_db.db), headers)


def _send(client, method, path, body: bytes):
    return client.request(method, path, content=body, headers={"content-type": "application/json"})


@pytest.mark.parametrize("method, path", WRITES)
@pytest.mark.parametrize("depth", [2000, reading.MAX_JSON_DEPTH + 1])
def test_a_body_nested_too_deep_is_a_400_naming_the_limit(client, method, path, depth):
    body = ("[" * depth + "]" * depth).encode()
    answer = _send(client, method, path, body)
    assert answer.status_code == 400, answer.text
    detail = answer.json()["errors"][0]["detail"]
    assert detail.endswith(
        f"Malformed JSON: arrays and objects nested deeper than {reading.MAX_JSON_DEPTH} levels.  "
    ), detail
    assert client.get("/resource_providers").json()["resource_providers"] == []


@pytest.mark.parametrize("method, path", WRITES)
def test_at_the_limit_the_body_goes_on_to_its_schema(client, method, path):
    depth = reading.MAX_JSON_DEPTH
    answer = _send(client, method, path, ("{" + '"a":{' * (depth - 1) + "}" * depth).encode())
    assert answer.status_code in (400, 404), answer.text
    assert "nested deeper" not in answer.text


def test_a_body_over_the_size_limit_is_a_413(client):
    body = b'{"name": "' + b"x" * reading.MAX_BODY_BYTES + b'"}'
    answer = _send(client, "POST", "/resource_providers", body)
    assert answer.status_code == 413, answer.text
    assert f"larger than {reading.MAX_BODY_BYTES} bytes" in answer.json()["errors"][0]["detail"]
