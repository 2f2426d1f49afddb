"""The request log: one exact line per request, at INFO, on placement_svc.requests.

Each test sends one request through the whole middleware chain of
``create_app`` (to paths that never touch the database) and compares the
line word for word: the address (the proxy's headers honoured only when
[oslo_middleware] enable_proxy_headers_parsing says so), the path with its
query string, status, length, microversion, time, request id, user and
project. Whatever a layer around falcon raises (the auth layer, the proxy
headers' layer) is a JSON 500 in upstream's format with the request id, and
a line with ``status: 500``.
"""

from __future__ import annotations

import io
import json
import logging
import wsgiref.util

import pytest
from oslo_log import formatters

from placement_svc import app, conf
from placement_svc import microversion as mv
from placement_svc.db.engine import Database, create_engine
from placement_svc.http import auth, guard, requestlog
from placement_svc.http.middleware import ENV_REQUEST_ID
from tests.support import fixtures

TOKEN_AND_LATEST = {"HTTP_X_AUTH_TOKEN": "admin", "HTTP_OPENSTACK_API_VERSION": "placement latest"}


def make_app(**overrides):
    # The database is never reached: every request here is answered before.
    return app.create_app(fixtures.make_conf(**overrides), Database(create_engine("sqlite://")))


def call(application, method, path, query="", **headers):
    """(status, headers, body) of one request from 127.0.0.1."""
    environ = {}
    wsgiref.util.setup_testing_defaults(environ)
    environ.update(
        REQUEST_METHOD=method,
        PATH_INFO=path,
        QUERY_STRING=query,
        REMOTE_ADDR="127.0.0.1",
        **{"wsgi.input": io.BytesIO(b"")},
        **headers,
    )
    answer = {}

    def start_response(status, response_headers, exc_info=None):
        answer["status"], answer["headers"] = status, dict(response_headers)

    body = b"".join(application(environ, start_response))
    return answer["status"], {k.lower(): v for k, v in answer["headers"].items()}, body


@pytest.fixture
def log(caplog, monkeypatch):
    """The request log's records; every request takes exactly 0.0123 s."""
    ticks = iter([100.0, 100.0123])
    monkeypatch.setattr(requestlog.time, "perf_counter", lambda: next(ticks))
    caplog.set_level(logging.INFO, logger="placement_svc.requests")
    return caplog


def the_line(caplog) -> str:
    records = [r for r in caplog.records if r.name == "placement_svc.requests"]
    assert len(records) == 1, [r.getMessage() for r in records]
    assert records[0].levelno == logging.INFO
    return records[0].getMessage()


def test_the_line_behind_a_proxy_with_query_microversion_user_and_project(log):
    application = make_app(**{"oslo_middleware.enable_proxy_headers_parsing": True})
    status, headers, body = call(
        application,
        "GET",
        "/",
        "with=query&and=more",
        HTTP_X_FORWARDED_FOR="203.0.113.9",
        HTTP_X_AUTH_TOKEN="alice:project-a",
        HTTP_OPENSTACK_API_VERSION="placement 1.20",
    )
    assert status == "200 OK"
    request_id = headers["x-openstack-request-id"]
    assert the_line(log) == (
        f'203.0.113.9 "GET /?with=query&and=more" status: 200 len: {len(body)}'
        f" microversion: 1.20 time: 0.0123s request_id: {request_id}"
        " user: alice project: project-a"
    )


def test_the_rfc_7239_forwarded_header_is_honoured_too(log):
    application = make_app(**{"oslo_middleware.enable_proxy_headers_parsing": True})
    _status, headers, body = call(
        application, "GET", "/", HTTP_FORWARDED="for=198.51.100.4;proto=https", **TOKEN_AND_LATEST
    )
    assert the_line(log) == (
        f'198.51.100.4 "GET /" status: 200 len: {len(body)} microversion: 1.51'
        f" time: 0.0123s request_id: {headers['x-openstack-request-id']}"
        " user: admin project: admin"
    )


def test_without_proxy_header_parsing_the_address_is_the_peers(log):
    application = make_app()
    _status, headers, body = call(
        application, "GET", "/", HTTP_X_FORWARDED_FOR="203.0.113.9", **TOKEN_AND_LATEST
    )
    assert the_line(log).startswith('127.0.0.1 "GET /" status: 200 ')


def test_an_error_answer_is_logged_with_its_status_and_microversion(log):
    status, headers, body = call(make_app(), "GET", "/no/such/place", "x=1", **TOKEN_AND_LATEST)
    assert status == "404 Not Found"
    assert the_line(log) == (
        f'127.0.0.1 "GET /no/such/place?x=1" status: 404 len: {len(body)} microversion: 1.51'
        f" time: 0.0123s request_id: {headers['x-openstack-request-id']}"
        " user: admin project: admin"
    )


def test_an_unauthenticated_request_has_no_microversion_user_or_project(log):
    status, headers, body = call(make_app(), "GET", "/traits", HTTP_X_USER_ID="spoofed")
    assert status == "401 Unauthorized"
    assert the_line(log) == (
        f'127.0.0.1 "GET /traits" status: 401 len: {len(body)} microversion: -'
        f" time: 0.0123s request_id: {headers['x-openstack-request-id']} user: - project: -"
    )


def test_a_cors_preflight_gets_a_request_id_and_a_line(log):
    application = make_app(**{"cors.allowed_origin": ["http://valid.example.com"]})
    status, headers, _body = call(
        application,
        "OPTIONS",
        "/traits",
        HTTP_ORIGIN="http://valid.example.com",
        HTTP_ACCESS_CONTROL_REQUEST_METHOD="GET",
    )
    assert status == "200 OK"
    assert headers["access-control-allow-origin"] == "http://valid.example.com"
    request_id = headers["x-openstack-request-id"]
    assert request_id.startswith("req-")
    assert the_line(log) == (
        f'127.0.0.1 "OPTIONS /traits" status: 200 len: 0 microversion: -'
        f" time: 0.0123s request_id: {request_id} user: - project: -"
    )


def test_the_request_id_in_the_line_is_the_one_in_the_error_body(log):
    _status, headers, body = call(make_app(), "GET", "/nowhere", **TOKEN_AND_LATEST)
    request_id = headers["x-openstack-request-id"]
    assert request_id.encode() in body
    assert f"request_id: {request_id} " in the_line(log)


def test_nothing_is_logged_above_info(caplog):
    caplog.set_level(logging.WARNING, logger="placement_svc.requests")
    call(make_app(), "GET", "/", **TOKEN_AND_LATEST)
    assert not [r for r in caplog.records if r.name == "placement_svc.requests"]


# -- whatever a layer around falcon raises: a JSON 500 and a line --------------


def assert_json_500(status, headers, body, log, path, user="-", project="-"):
    """Upstream's error body with the header's request id, and the line."""
    request_id = assert_json_500_body(status, headers, body)
    assert the_line(log) == (
        f'127.0.0.1 "GET {path}" status: 500 len: {len(body)} microversion: -'
        f" time: 0.0123s request_id: {request_id} user: {user} project: {project}"
    )
    assert any(r.name == "placement_svc.http.guard" and r.exc_info for r in log.records)


def assert_json_500_body(status, headers, body) -> str:
    """A 500 in upstream's JSON error format with the header's request id
    (returned)."""
    request_id = headers["x-openstack-request-id"]
    assert status == "500 Internal Server Error"
    assert headers["content-type"] == "application/json"
    assert json.loads(body) == {
        "errors": [
            {
                "status": 500,
                "title": "Internal Server Error",
                "detail": "The server has either erred or is incapable of performing "
                "the requested operation.\n\n An unexpected error occurred.  ",
                "request_id": request_id,
            }
        ]
    }
    return request_id


def test_an_exception_in_the_auth_layer_is_a_json_500_with_the_request_id(log, monkeypatch):
    def broken(self, environ, start_response):
        raise RuntimeError("the auth layer broke")

    monkeypatch.setattr(auth.NoAuthMiddleware, "__call__", broken)
    answer = call(make_app(), "GET", "/traits", **TOKEN_AND_LATEST)
    assert_json_500(*answer, log, "/traits")


def test_keystone_without_an_auth_plugin_fails_requests_as_a_json_500(log):
    """What the command refuses to start with (keystone_conf), built directly:
    keystonemiddleware's MissingAuthPlugin, whatever the client accepts."""
    application = make_app(**{"api.auth_strategy": "keystone"})
    answer = call(
        application, "GET", "/traits", HTTP_X_AUTH_TOKEN="a-token", HTTP_ACCEPT="text/html"
    )
    assert_json_500(*answer, log, "/traits")


def test_an_exception_in_the_proxy_header_layer_is_a_json_500_too(log):
    """oslo.middleware's proxy layer wants SCRIPT_NAME, which PEP 3333 lets a
    server leave out when it is empty."""
    application = make_app(**{"oslo_middleware.enable_proxy_headers_parsing": True})
    environ = {}

    def without_script_name(status, headers, exc_info=None):
        environ["answer"] = status, {k.lower(): v for k, v in headers}

    wsgiref.util.setup_testing_defaults(environ)
    environ.update(PATH_INFO="/", REMOTE_ADDR="127.0.0.1", HTTP_X_FORWARDED_PREFIX="/p")
    del environ["SCRIPT_NAME"]
    body = b"".join(application(environ, without_script_name))
    assert_json_500(*environ["answer"], body, log, "/")


def test_the_json_500_carries_the_error_code_from_1_23():
    environ = {"openstack.request_id": "req-x", "placement.microversion": mv.ERROR_CODES}
    assert guard.body_for(environ)["errors"][0]["code"] == "placement.undefined_code"
    environ["placement.microversion"] = mv.Version(1, 22)
    assert "code" not in guard.body_for(environ)["errors"][0]


def test_an_unexpected_error_inside_falcon_is_json_even_for_a_browser(log, monkeypatch):
    """Other errors follow the client's Accept as upstream's do; a 500 is JSON
    with the request id whatever the client prefers."""

    def broken(req, resp):
        raise RuntimeError("a handler broke")

    monkeypatch.setattr(app.root, "home", broken)
    status, headers, body = call(make_app(), "GET", "/", HTTP_ACCEPT="text/html")
    assert_json_500_body(status, headers, body)
    assert "status: 500" in the_line(log)


def test_a_streamed_answer_is_logged_when_its_last_byte_is_taken(log):
    """A body made as the server reads it (a huge candidates answer): the
    line waits for its end, with the bytes sent and the time until then."""
    pieces = [b'{"allocation_requests": [', b"], ", b'"provider_summaries": {}}']

    def streaming_app(environ, start_response):
        start_response("200 OK", [("content-type", "application/json")])
        return iter(pieces)

    cfg = conf.make_conf(config_files=[], quickstart_if_unconfigured=False)
    application = requestlog.RequestLog(streaming_app, cfg)
    environ = {}
    wsgiref.util.setup_testing_defaults(environ)
    environ.update(PATH_INFO="/allocation_candidates", REMOTE_ADDR="127.0.0.1")
    body = application(environ, lambda status, headers, exc_info=None: None)
    assert [r for r in log.records if r.name == "placement_svc.requests"] == []
    assert b"".join(body) == b"".join(pieces)
    assert the_line(log) == (
        f'127.0.0.1 "GET /allocation_candidates" status: 200 len: {len(b"".join(pieces))}'
        f" microversion: - time: 0.0123s request_id: {environ[ENV_REQUEST_ID]}"
        " user: - project: -"
    )


@pytest.mark.parametrize(
    ("method", "path", "route"),
    [
        ("GET", "/resource_provider_trees/not-a-uuid", "/resource_provider_trees/{root_uuid}"),
        ("PATCH", "/allocations/not-a-uuid", "/allocations/{consumer_uuid}"),
        ("DELETE", "/resource_provider_trees/x", "/resource_provider_trees/{root_uuid}"),
        ("GET", "/no/such/place", "unmatched"),
    ],
)
def test_the_record_names_the_route_by_its_template(log, method, path, route):
    """The line stays upstream's (the path as asked); the record carries the
    route's template, as the metrics label it, for JSON and Fluent logs."""
    headers = {**TOKEN_AND_LATEST, "CONTENT_TYPE": "application/json"}
    call(make_app(), method, path, **headers)
    records = [r for r in log.records if r.name == "placement_svc.requests"]
    assert [r.route for r in records] == [route]
    assert f'"{method} {path}"' in records[0].getMessage()
    assert json.loads(formatters.JSONFormatter().format(records[0]))["extra"]["route"] == route


def test_a_server_may_hold_the_line_until_its_answer_is_out(log, monkeypatch):
    """serve's worker (cmd/http_worker.py) holds the line while the answer
    is made and written out, then writes it: the same line, with the time
    the request took, not the time until it was written."""
    application = make_app()
    requestlog.hold_lines()
    try:
        status, _headers, _body = call(application, "GET", "/", **TOKEN_AND_LATEST)
        assert status == "200 OK"
        assert [r for r in log.records if r.name == "placement_svc.requests"] == []
    finally:
        requestlog.write_held()
    line = the_line(log)
    assert line.startswith('127.0.0.1 "GET /" status: 200 len: ')
    assert " time: 0.0123s " in line
    log.clear()
    ticks = iter([200.0, 200.5])
    monkeypatch.setattr(requestlog.time, "perf_counter", lambda: next(ticks))
    call(application, "GET", "/", **TOKEN_AND_LATEST)  # held no more: at once
    assert " time: 0.5000s " in the_line(log)
