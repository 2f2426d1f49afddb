"""Which answers keep their connection open in serve's worker
(cmd/http_worker.py): gunicorn's request handling run as the worker runs it,
over a request already read, with WSGI applications that answer whole, say
close, or fail after their headers (tests/functional/test_keep_alive.py
covers a real server)."""

from __future__ import annotations

import socket

import pytest
from gunicorn.config import Config
from gunicorn.http import parser as http_parser
from gunicorn.http import wsgi as http_wsgi

from placement_svc.cmd import connections, framing, http_worker

REQUEST = b"GET /x HTTP/1.1\r\nHost: t\r\n\r\n"
NEXT = b"GET /y HTTP/1.1\r\nHost: t\r\n\r\n"


class _Log:
    def __getattr__(self, _name):
        return lambda *args, **kwargs: None


def whole(environ, start_response):
    start_response("200 OK", [("Content-Type", "text/plain"), ("Content-Length", "2")])
    return [b"ok"]


def streamed(environ, start_response):
    start_response("200 OK", [("Content-Type", "text/plain")])  # chunked
    yield b"part one, "
    yield b"part two"


def failing_after_its_headers(environ, start_response):
    start_response("200 OK", [("Content-Type", "text/plain"), ("Content-Length", "100")])
    yield b"the first ten bytes"
    raise RuntimeError("the database went away mid-answer")


@pytest.fixture
def worker(monkeypatch):
    monkeypatch.setattr(http_parser.RequestParser, "mesg_class", framing.BoundedRequest)
    monkeypatch.setattr(http_wsgi, "Response", http_worker._KeptResponse)
    made = http_worker.ReadAheadWorker.__new__(http_worker.ReadAheadWorker)
    made.cfg = Config()
    made.log = _Log()
    made.nr = 0
    made.max_requests = 1000
    made.alive = True
    yield made


def run(worker, app, data: bytes, keepable: bool):
    """The worker's handling of the request at the head of ``data``: the
    buffered client, and what stays on the connection for the next one."""
    worker.wsgi = app
    ours, theirs = socket.socketpair()
    try:
        connection = connections.Connection(ours, ("127.0.0.1", 1), ("127.0.0.1", 2), 0.0)
        connection.data = bytearray(data)
        connection.end = data.index(b"\r\n\r\n") + 4  # as framing found it
        buffered = http_worker._Buffered(connection, lambda _c: None, keepable)
        worker.handle(http_worker._Closed(("127.0.0.1", 2)), buffered, connection.peer)
        return buffered, connection
    finally:
        ours.close()
        theirs.close()


def test_an_answer_written_whole_keeps_the_connection_and_the_next_request(worker):
    buffered, connection = run(worker, whole, REQUEST + NEXT, keepable=True)
    assert b"\r\nConnection: keep-alive\r\n" in connection.out
    assert connection.out.endswith(b"\r\n\r\nok")
    assert (buffered.kept, buffered.finished) == (True, True)
    assert connection.data == NEXT  # the next request, left for the worker to read


def test_a_chunked_answer_written_whole_keeps_it_too(worker):
    buffered, connection = run(worker, streamed, REQUEST, keepable=True)
    assert b"\r\nTransfer-Encoding: chunked\r\n" in connection.out
    assert connection.out.endswith(b"0\r\n\r\n")
    assert (buffered.kept, buffered.finished) == (True, True)


def test_an_answer_cut_short_after_its_headers_is_not_kept(worker):
    buffered, connection = run(worker, failing_after_its_headers, REQUEST, keepable=True)
    assert b"\r\nConnection: keep-alive\r\n" in connection.out  # said before it failed
    assert buffered.kept is True
    assert buffered.finished is False  # so the worker closes it: the client sees it short


def test_a_connection_the_worker_will_not_keep_says_close(worker):
    buffered, connection = run(worker, whole, REQUEST + NEXT, keepable=False)
    assert b"\r\nConnection: close\r\n" in connection.out
    assert buffered.kept is False
    assert connection.data == b""  # what followed is dropped with the connection


def test_a_client_that_asks_to_close_is_not_kept(worker):
    asking = REQUEST.replace(b"\r\n\r\n", b"\r\nConnection: close\r\n\r\n")
    buffered, connection = run(worker, whole, asking, keepable=True)
    assert b"\r\nConnection: close\r\n" in connection.out
    assert buffered.kept is False
