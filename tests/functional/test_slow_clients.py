"""Slow, idle and hostile connections cannot take the workers of a real
``placement-svc serve --workers 2`` (issue 28, item 1).

gunicorn's sync worker gave each accepted connection its whole process
until the request was read: ten clients sending a header line every few
seconds held both workers, and a normal request was not answered before
the master killed them. Here every kind of slow client below is 200
connections strong, and requests made meanwhile are answered at once.
Then the bounds: a request line and headers that do not come in time get a
408 (an idle connection is closed), a stalled body a 408, a body over the
application's limit a 413 before it is sent, the connection cap closes the
oldest unfinished connection, and the memory cap answers 503. Expect:
100-continue and chunked bodies still work.
"""

from __future__ import annotations

import contextlib
import json
import socket
import time
import urllib.request

import pytest

from tests.support.servers import serving, write_conf
from tests.support.slow_clients import FIRST, address, attack

HEADERS = {"x-auth-token": "admin", "openstack-api-version": "placement 1.39"}


def timed_get(base: str, path: str = "/resource_providers") -> float:
    started = time.monotonic()
    request = urllib.request.Request(base + path, headers=HEADERS)
    with urllib.request.urlopen(request, timeout=30) as answer:
        assert answer.status == 200
        answer.read()
    return time.monotonic() - started


@pytest.mark.parametrize("kind", sorted(FIRST))
def test_two_hundred_slow_connections_do_not_hold_the_workers(tmp_path, sqlite_url, kind):
    conf = write_conf(tmp_path, sqlite_url)
    with serving(tmp_path, conf, "--workers", "2") as (base, _log):
        with attack(base, kind):
            time.sleep(1.5)  # every attacker has been accepted and has sent again
            seconds = [timed_get(base) for _ in range(10)]
            seconds.append(timed_get(base, "/healthcheck"))
    # gunicorn's sync worker answered none of these before its 30 s timeout
    assert max(seconds) < 5, seconds


def exchange(base: str, data: bytes, wait: float = 10) -> tuple[bytes, float]:
    """Send ``data`` and read until the server closes: (what came, seconds)."""
    started = time.monotonic()
    with socket.create_connection(address(base), timeout=wait) as sock:
        if data:
            sock.sendall(data)
        answer = b""
        with contextlib.suppress(ConnectionResetError):
            while chunk := sock.recv(65536):
                answer += chunk
    return answer, time.monotonic() - started


def json_error(answer: bytes) -> tuple[str, dict]:
    head, _blank, body = answer.partition(b"\r\n\r\n")
    assert b"\r\nContent-Type: application/json\r\n" in head, head
    return head.split(b"\r\n")[0].decode(), json.loads(body)["errors"][0]


class TestBounds:
    @pytest.fixture
    def base(self, tmp_path, sqlite_url):
        extra = "client_header_timeout = 2\nclient_body_timeout = 2\n"
        conf = write_conf(tmp_path, sqlite_url, extra)
        with serving(tmp_path, conf, "--workers", "2") as (base, log):
            self.log = log
            yield base

    def test_headers_that_do_not_come_in_time_get_a_408(self, base):
        answer, seconds = exchange(base, b"GET / HTTP/1.1\r\nHost: x\r\n")
        status, error = json_error(answer)
        assert status == "HTTP/1.1 408 Request Timeout"
        assert error["status"] == 408
        assert "The client did not send its request line and headers in time." in error["detail"]
        assert 1.5 < seconds < 5, seconds

    def test_an_idle_connection_is_closed_without_an_answer(self, base):
        answer, seconds = exchange(base, b"")
        assert answer == b""
        assert 1.5 < seconds < 5, seconds

    def test_a_body_that_stops_coming_gets_a_408(self, base):
        head = (
            b"POST /resource_providers HTTP/1.1\r\nHost: x\r\nX-Auth-Token: admin\r\n"
            b'Content-Type: application/json\r\nContent-Length: 50\r\n\r\n{"name": '
        )
        answer, seconds = exchange(base, head)
        status, error = json_error(answer)
        assert status == "HTTP/1.1 408 Request Timeout"
        assert "The client did not send its request's body in time." in error["detail"]
        assert 1.5 < seconds < 5, seconds
        assert timed_get(base) < 5  # nothing was written, the workers are free
        assert "did not send its request's body in time" in self.log.read_text()

    def test_a_body_over_the_limit_is_refused_before_it_is_sent(self, base):
        head = (
            b"PUT /resource_providers/x/inventories HTTP/1.1\r\nHost: x\r\n"
            b"X-Auth-Token: admin\r\nContent-Type: application/json\r\n"
            b"Content-Length: 9000000\r\n\r\n"
        )
        answer, seconds = exchange(base, head)
        status, error = json_error(answer)
        assert status == "HTTP/1.1 413 Request Entity Too Large"
        assert "Request body is larger than 8388608 bytes." in error["detail"]
        assert seconds < 1.5, seconds

    def test_expect_100_continue_is_answered_once_then_the_request(self, base):
        body = json.dumps({"name": "continued"}).encode()
        head = (
            b"POST /resource_providers HTTP/1.1\r\nHost: x\r\nX-Auth-Token: admin\r\n"
            b"OpenStack-API-Version: placement 1.20\r\nContent-Type: application/json\r\n"
            b"Expect: 100-continue\r\nContent-Length: %d\r\n"
            % len(body)
            + b"Connection: close\r\n\r\n"  # read until closed, not kept open
        )
        with socket.create_connection(address(base), timeout=10) as sock:
            sock.sendall(head)
            assert sock.recv(100) == b"HTTP/1.1 100 Continue\r\n\r\n"
            sock.sendall(body)
            answer = b""
            while chunk := sock.recv(65536):
                answer += chunk
        assert answer.startswith(b"HTTP/1.1 200 OK\r\n"), answer[:200]
        assert b"100 Continue" not in answer
        assert json.loads(answer.partition(b"\r\n\r\n")[2])["name"] == "continued"

    def test_a_chunked_body_is_read_whole(self, base):
        body = json.dumps({"name": "chunked"}).encode()
        chunks = b"".join(b"%x\r\n%s\r\n" % (len(part), part) for part in (body[:5], body[5:]))
        request = (
            b"POST /resource_providers HTTP/1.1\r\nHost: x\r\nX-Auth-Token: admin\r\n"
            b"OpenStack-API-Version: placement 1.20\r\nContent-Type: application/json\r\n"
            b"Transfer-Encoding: chunked\r\n\r\n" + chunks + b"0\r\n\r\n"
        )
        answer, _seconds = exchange(base, request)
        assert answer.startswith(b"HTTP/1.1 200 OK\r\n"), answer[:200]
        assert json.loads(answer.partition(b"\r\n\r\n")[2])["name"] == "chunked"


def test_at_the_connection_cap_the_oldest_unfinished_connection_makes_room(tmp_path, sqlite_url):
    extra = "max_client_connections = 16\n"
    conf = write_conf(tmp_path, sqlite_url, extra)
    with serving(tmp_path, conf, "--workers", "2") as (base, log):
        with attack(base, "trickled headers", count=100):
            time.sleep(1.5)
            seconds = [timed_get(base) for _ in range(5)]
            assert max(seconds) < 5, seconds
        assert "to make room: 16 connections" in log.read_text()


def test_past_the_memory_cap_the_largest_unfinished_request_is_answered_503(tmp_path, sqlite_url):
    extra = f"max_pending_request_bytes = {16 * 1024 * 1024}\n"
    head = (
        b"PUT /resource_providers/x/inventories HTTP/1.1\r\nHost: x\r\n"
        b"X-Auth-Token: admin\r\nContent-Type: application/json\r\n"
        b"Content-Length: 8000000\r\n\r\n"
    )
    conf = write_conf(tmp_path, sqlite_url, extra)
    with serving(tmp_path, conf, "--workers", "1") as (base, _log):
        sockets = [socket.create_connection(address(base), timeout=10) for _ in range(3)]
        try:
            for size, sock in zip((6, 7, 5), sockets, strict=True):
                sock.sendall(head + b"x" * size * 1000 * 1000)
                time.sleep(0.3)
            # the second (7 MB, the largest when the third passed 16 MiB) is refused
            sockets[1].settimeout(5)
            answer = sockets[1].recv(65536)
            status, error = json_error(answer)
            assert status == "HTTP/1.1 503 Service Unavailable"
            assert b"\r\nRetry-After: 1\r\n" in answer
            assert "The service holds too many unfinished requests" in error["detail"]
        finally:
            for sock in sockets:
                sock.close()
        assert timed_get(base) < 5
