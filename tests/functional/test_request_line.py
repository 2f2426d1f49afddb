"""A request line is refused once it is too long, not read whole (issue 28,
item 2), by a real ``placement-svc serve``.

What is proven: a 10 MB request line is answered upstream's JSON 414 within
a fraction of a second, after at most the first REQUEST_LINE_LIMIT bytes
(gunicorn, with no cap of its own, read it whole in time quadratic in its
length: 28.8 s); a URL just under the application's limit still reaches the
application, and one over it (but within the line limit) gets the
application's own 414; the worker answers the next request at once.
"""

from __future__ import annotations

import json
import socket
import time
import urllib.parse
import urllib.request

from placement_svc.cmd import framing
from placement_svc.http import middleware
from tests.support.servers import serving, write_conf

HEADERS = {"x-auth-token": "admin", "openstack-api-version": "placement 1.39"}


def raw_answer(base: str, line: bytes, more: int = 0) -> tuple[float, bytes]:
    """Seconds to the answer of ``line`` (then ``more`` bytes of it) sent
    as fast as the socket takes it, and the answer's bytes."""
    address = urllib.parse.urlsplit(base)
    started = time.monotonic()
    with socket.create_connection((address.hostname, address.port), timeout=30) as sock:
        sock.settimeout(30)
        try:
            sock.sendall(line)
            chunk = b"a" * 65536
            for _ in range(more // len(chunk)):
                sock.sendall(chunk)
        except (BrokenPipeError, ConnectionResetError):
            pass  # refused half-way: the answer is already there
        answer = b""
        try:
            while data := sock.recv(65536):
                answer += data
        except ConnectionResetError:
            pass
    return time.monotonic() - started, answer


def test_a_ten_megabyte_request_line_is_refused_before_it_is_read(tmp_path, sqlite_url):
    conf = write_conf(tmp_path, sqlite_url)
    with serving(tmp_path, conf) as (base, _log):
        seconds, answer = raw_answer(base, b"GET /" + b"a" * 1024, more=10 * 1024 * 1024)
        head, _sep, body = answer.partition(b"\r\n\r\n")
        assert head.startswith(b"HTTP/1.1 414 "), answer[:200]
        assert b"Content-Type: application/json" in head
        error = json.loads(body)["errors"][0]
        assert error["status"] == 414
        limit = framing.LIMITS.request_line
        assert f"The request line is longer than {limit} bytes." in error["detail"]
        assert seconds < 2, seconds  # the whole 10 MB would take tens of seconds
        # the worker is free at once
        started = time.monotonic()
        request = urllib.request.Request(f"{base}/resource_providers", headers=HEADERS)
        with urllib.request.urlopen(request, timeout=10) as ok:
            assert ok.status == 200
        assert time.monotonic() - started < 2


def test_urls_up_to_the_applications_limit_still_reach_it(tmp_path, sqlite_url):
    conf = write_conf(tmp_path, sqlite_url)
    with serving(tmp_path, conf) as (base, _log):
        # name= up to the limit: the application answers (400: no such name
        # is too long to be valid, but it is the application's answer)
        path = "/resource_providers?name="
        fill = middleware.MAX_URL_LENGTH - len(path) + 1  # the path and query, "?" aside
        line = f"GET {path}{'x' * fill} HTTP/1.1\r\nHost: t\r\nX-Auth-Token: admin\r\n"
        _seconds, answer = raw_answer(base, (line + "Connection: close\r\n\r\n").encode())
        assert not answer.startswith(b"HTTP/1.1 414"), answer[:200]
        # one character more: the application's own 414
        line = f"GET {path}{'x' * (fill + 1)} HTTP/1.1\r\nHost: t\r\nX-Auth-Token: admin\r\n"
        _seconds, answer = raw_answer(base, (line + "Connection: close\r\n\r\n").encode())
        head, _sep, body = answer.partition(b"\r\n\r\n")
        assert head.startswith(b"HTTP/1.1 414 "), answer[:200]
        assert "longer than 40960 characters" in json.loads(body)["errors"][0]["detail"]


def test_the_limits_are_options(tmp_path, sqlite_url):
    conf = write_conf(
        tmp_path, sqlite_url, "[api]\nmax_request_line = 5000\nmax_header_fields = 5\n"
    )
    with serving(tmp_path, conf) as (base, _log):
        line = "GET /?" + "x" * 5000 + " HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n"
        _seconds, answer = raw_answer(base, line.encode())
        head, _sep, body = answer.partition(b"\r\n\r\n")
        assert head.startswith(b"HTTP/1.1 414 "), answer[:200]
        assert "longer than 5000 bytes" in json.loads(body)["errors"][0]["detail"]
        many = "".join(f"X-Extra-{n}: {n}\r\n" for n in range(6))
        line = f"GET / HTTP/1.1\r\nHost: t\r\n{many}Connection: close\r\n\r\n"
        _seconds, answer = raw_answer(base, line.encode())
        head, _sep, body = answer.partition(b"\r\n\r\n")
        assert head.startswith(b"HTTP/1.1 400 "), answer[:200]
        assert b"Content-Type: application/json" in head
        assert "header fields are over a limit" in json.loads(body)["errors"][0]["detail"]
        line = "GET / HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n"
        _seconds, answer = raw_answer(base, line.encode())
        assert answer.startswith(b"HTTP/1.1 200 "), answer[:200]
