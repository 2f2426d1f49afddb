"""``placement-svc serve`` keeps a connection open after its answer for the
client's next request (HTTP keep-alive), where gunicorn's sync worker closed
every one: what is kept, what is closed, and that an idle kept connection
holds a socket for ``[api] keepalive_timeout`` seconds at most, never a
worker.
"""

from __future__ import annotations

import contextlib
import http.client
import json
import select
import socket
import time

import pytest

from tests.support.servers import serving, write_conf
from tests.support.slow_clients import address

TOKEN = b"X-Auth-Token: admin\r\n"


def read_until_closed(sock: socket.socket) -> bytes:
    answer = b""
    while chunk := sock.recv(65536):
        answer += chunk
    return answer


def heads(answer: bytes) -> list[tuple[str, str]]:
    """Each answer's status line and Connection header, in order."""
    found = []
    for part in answer.split(b"HTTP/1.")[1:]:
        head = (b"HTTP/1." + part).partition(b"\r\n\r\n")[0].decode()
        lines = head.split("\r\n")
        connection = [
            v.strip() for n, _, v in (x.partition(":") for x in lines) if n == "Connection"
        ]
        found.append((lines[0], connection[0] if connection else ""))
    return found


@contextlib.contextmanager
def one_worker(tmp_path, sqlite_url, extra: str):
    """``serve --workers 1`` with these [api] options: its URL and its log."""
    with serving(tmp_path, write_conf(tmp_path, sqlite_url, extra), "--workers", "1") as served:
        yield served


@pytest.fixture
def base(tmp_path, sqlite_url):
    with one_worker(tmp_path, sqlite_url, "keepalive_timeout = 2\n") as served:
        yield served


@pytest.fixture
def patient(tmp_path, sqlite_url):
    """A server that keeps an idle connection open for a long while."""
    extra = "keepalive_timeout = 60\nclient_header_timeout = 2\n"
    with one_worker(tmp_path, sqlite_url, extra) as (url, _log):
        yield url


def test_requests_in_a_row_share_one_connection(base):
    url, _log = base
    host, port = address(url)
    conn = http.client.HTTPConnection(host, port, timeout=10)
    headers = {"x-auth-token": "admin", "openstack-api-version": "placement 1.39"}
    try:
        conn.request("GET", "/resource_providers", headers=headers)
        first = conn.getresponse()
        assert first.status == 200
        assert first.getheader("Connection") == "keep-alive"
        assert json.loads(first.read()) == {"resource_providers": []}
        sock = conn.sock
        body = json.dumps({"name": "kept"})
        conn.request(
            "POST", "/resource_providers", body, {**headers, "content-type": "application/json"}
        )
        second = conn.getresponse()
        assert second.status == 200
        assert json.loads(second.read())["name"] == "kept"
        conn.request("GET", "/resource_providers?name=kept", headers=headers)
        third = conn.getresponse()
        assert len(json.loads(third.read())["resource_providers"]) == 1
        assert conn.sock is sock  # never reconnected
    finally:
        conn.close()


def test_requests_sent_at_once_are_answered_in_order_until_one_asks_to_close(base):
    url, _log = base
    body = b'{"name": "pipelined"}'
    requests = (
        b"GET / HTTP/1.1\r\nHost: x\r\n\r\n"
        b"POST /resource_providers HTTP/1.1\r\nHost: x\r\n"
        + TOKEN
        + b"OpenStack-API-Version: placement 1.20\r\nContent-Type: application/json\r\n"
        + b"Content-Length: %d\r\n\r\n" % len(body)
        + body
        + b"GET /resource_providers?name=pipelined HTTP/1.1\r\nHost: x\r\n"
        + TOKEN
        + b"Connection: close\r\n\r\n"
        + b"GET / HTTP/1.1\r\nHost: x\r\n\r\n"  # after the close: never answered
    )
    with socket.create_connection(address(url), timeout=10) as sock:
        sock.sendall(requests)
        answer = read_until_closed(sock)
    assert heads(answer) == [
        ("HTTP/1.1 200 OK", "keep-alive"),
        ("HTTP/1.1 200 OK", "keep-alive"),
        ("HTTP/1.1 200 OK", "close"),
    ]
    assert b'"name":"pipelined"' in answer.replace(b" ", b"")


def test_an_idle_kept_connection_is_closed_after_keepalive_timeout(base):
    url, _log = base
    with socket.create_connection(address(url), timeout=10) as sock:
        sock.sendall(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n")
        started = time.monotonic()
        answer = read_until_closed(sock)
        waited = time.monotonic() - started
    assert heads(answer) == [("HTTP/1.1 200 OK", "keep-alive")]
    assert 1.5 < waited < 6, waited  # keepalive_timeout = 2, looked at every 0.25 s


def test_a_next_request_that_trickles_gets_408_client_header_timeout_after_its_first_byte(
    patient,
):
    with socket.create_connection(address(patient), timeout=15) as sock:
        sock.sendall(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n")
        time.sleep(3)  # idle longer than client_header_timeout (2), within keepalive_timeout
        sock.sendall(b"GET / HTTP/1.1\r\nHost: x\r\n")  # and never the blank line
        started = time.monotonic()
        answer = read_until_closed(sock)
        waited = time.monotonic() - started
    assert heads(answer) == [
        ("HTTP/1.1 200 OK", "keep-alive"),
        ("HTTP/1.1 408 Request Timeout", "close"),
    ]
    assert 1.5 < waited < 10, waited  # its 2 s from its first byte, not from the last answer


@pytest.mark.parametrize(
    "request_bytes",
    [
        pytest.param(b"GET / HTTP/1.0\r\nHost: x\r\n\r\n", id="HTTP/1.0"),
        pytest.param(b"GET / HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n", id="asked"),
        pytest.param(
            b"POST /resource_providers HTTP/1.1\r\nHost: x\r\n"
            + TOKEN
            + b"OpenStack-API-Version: placement 1.20\r\nContent-Type: application/json\r\n"
            + b"Transfer-Encoding: chunked\r\n\r\n"
            + b"".join(b"%x\r\n%s\r\n" % (len(p), p) for p in (b'{"nam', b'e": "chunked"}'))
            + b"0\r\n\r\n",
            id="chunked body",
        ),
    ],
)
def test_these_are_answered_and_closed(patient, request_bytes):
    url = patient
    with socket.create_connection(address(url), timeout=10) as sock:
        sock.sendall(request_bytes)
        started = time.monotonic()
        answer = read_until_closed(sock)
        assert time.monotonic() - started < 20  # not kept for keepalive_timeout
    ((status, connection),) = heads(answer)
    assert status.endswith("200 OK")
    assert connection == "close"


def test_at_the_connection_cap_idle_kept_connections_make_room_first(tmp_path, sqlite_url):
    extra = "keepalive_timeout = 60\nmax_client_connections = 16\n"
    with one_worker(tmp_path, sqlite_url, extra) as (url, log):
        _fill_the_cap(url)
    assert "to make room" not in log.read_text()  # no unfinished request was closed


def _fill_the_cap(url: str) -> None:
    kept = []
    try:
        for _ in range(16):  # the cap, every one kept open after an answer
            sock = socket.create_connection(address(url), timeout=10)
            sock.sendall(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n")
            assert sock.recv(65536).startswith(b"HTTP/1.1 200 OK")
            kept.append(sock)
        trickler = socket.create_connection(address(url), timeout=10)
        trickler.sendall(b"GET / HTTP/1.1\r\nHost: x\r\n")  # unfinished, but not closed for room
        kept.append(trickler)
        time.sleep(0.3)
        with socket.create_connection(address(url), timeout=10) as sock:
            sock.sendall(b"GET / HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
            assert read_until_closed(sock).startswith(b"HTTP/1.1 200 OK")
        readable, _, _ = select.select(kept[:16], [], [], 0.5)
        assert [sock.recv(1) for sock in readable] == [b"", b""]  # closed: room for two
        trickler.sendall(b"\r\n")  # the unfinished request still gets its answer
        assert trickler.recv(65536).startswith(b"HTTP/1.1 200 OK")
    finally:
        for sock in kept:
            sock.close()


def test_keepalive_timeout_0_closes_after_every_answer(tmp_path, sqlite_url):
    with one_worker(tmp_path, sqlite_url, "keepalive_timeout = 0\n") as (url, _log):
        with socket.create_connection(address(url), timeout=10) as sock:
            sock.sendall(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n")
            answer = read_until_closed(sock)
    assert heads(answer) == [("HTTP/1.1 200 OK", "close")]
