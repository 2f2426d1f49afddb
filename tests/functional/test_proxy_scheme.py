"""The proxy's scheme in a Location header: ``http`` or ``https``, nothing else (issue 28).

With ``[oslo_middleware] enable_proxy_headers_parsing``, a POST
/resource_providers before 1.20 (a 201 whose only news is its Location)
answers ``https://...`` when the proxy says ``X-Forwarded-Proto: https``
(or ``Forwarded: proto=https``), and keeps the server's ``http://`` for any
other value: ``javascript`` makes no ``javascript://`` Location. Without the
option the header changes nothing.
"""

from __future__ import annotations

import uuid

import pytest

from placement_svc import app
from placement_svc.db.engine import Database, create_engine
from tests.support import fixtures


@pytest.fixture(params=[True, False], ids=["proxy-headers", "no-proxy-headers"])
def client(request, test_db):
    conf = fixtures.make_conf(**{"oslo_middleware.enable_proxy_headers_parsing": request.param})
    engine = create_engine(test_db.url)
    headers = {"x-auth-token": "admin", "openstack-api-version": "placement 1.19"}
    with fixtures.api_client(app.create_app(conf, Database(engine)), headers) as client:
        client.parsing = request.param
        yield client
    engine.dispose()


@pytest.mark.parametrize("backend", ["sqlite"], indirect=True)
@pytest.mark.parametrize(
    "header, value, scheme",
    [
        ("X-Forwarded-Proto", "javascript", "http"),
        ("X-Forwarded-Proto", "javascript:alert(1)//", "http"),
        ("X-Forwarded-Proto", "ftp", "http"),
        ("X-Forwarded-Proto", "https", "https"),
        ("X-Forwarded-Proto", "HTTPS", "https"),
        ("X-Forwarded-Proto", "http", "http"),
        ("Forwarded", "for=198.51.100.4;proto=javascript", "http"),
        ("Forwarded", "for=198.51.100.4;proto=https", "https"),
        ("Forwarded", 'for=198.51.100.4;proto="https"', "https"),
    ],
)
def test_only_http_and_https_make_the_location(client, header, value, scheme):
    provider = str(uuid.uuid4())
    answer = client.post(
        "/resource_providers", json={"name": provider, "uuid": provider}, headers={header: value}
    )
    assert answer.status_code == 201
    expected = scheme if client.parsing else "http"
    location = f"{expected}://placement.test/resource_providers/{provider}"
    assert answer.headers["location"] == location
