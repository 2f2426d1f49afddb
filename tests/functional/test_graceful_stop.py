"""SIGTERM to ``placement-svc serve`` under load: what was accepted is answered.

Two workers on SQLite. Requests are held in flight deterministically: writes
wait for SQLite's write lock, which the test holds; a huge allocation
candidates answer (streamed, over 4 MiB) is read by a client with a small
receive buffer, so the worker waits to send it. More requests than workers
are sent, so some wait in the listening socket's queue, accepted by the
kernel, their requests sent, not yet taken by a worker.

With SIGTERM sent while they are all in flight, every one of them gets a
complete 2xx answer, the server exits 0 well within --graceful-timeout,
and what it shares with its workers (the metrics directory, the metrics
listener of [metrics] listen) goes with it. A request still running when
the graceful timeout ends is cut, and the server exits anyway.
"""

from __future__ import annotations

import contextlib
import http.client
import json
import pathlib
import re
import signal
import socket
import sqlite3
import subprocess
import time
import uuid

import pytest

from tests.support.servers import CLI, environment, free_port, get, run, write_conf

HEADERS = {"x-auth-token": "admin", "openstack-api-version": "placement latest"}
DEVICES = 20  # two hosts of 20 devices: 13,680 candidates, about 6.7 MB
QUERY = (
    "&".join(f"resources{g}=CUSTOM_DEVICE:1" for g in range(1, 4))
    + "&resources=VCPU:1&group_policy=isolate"
)
CANDIDATES = 2 * DEVICES * (DEVICES - 1) * (DEVICES - 2)


@contextlib.contextmanager
def started(tmp_path, conf_path: str, *args: str):
    """``placement-svc serve`` as a process of the test's own, answering:
    (the process, its base URL, its log file). Killed if still running."""
    port = free_port()
    argv = [*CLI, "serve", "--config-file", conf_path, "--bind", f"127.0.0.1:{port}", *args]
    log = tmp_path / "serve.log"
    with open(log, "w") as stderr:
        server = subprocess.Popen(
            argv, cwd=tmp_path, env=environment(tmp_path), stdout=subprocess.DEVNULL, stderr=stderr
        )
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 30
        while True:
            assert server.poll() is None, log.read_text()
            with contextlib.suppress(OSError):
                if get(base + "/")[0] == 200:
                    break
            assert time.monotonic() < deadline, log.read_text()
            time.sleep(0.1)
        yield server, base, log
    finally:
        if server.poll() is None:
            server.kill()
            server.wait()


class Sent:
    """One request, sent whole on its own connection, its answer not read yet."""

    def __init__(self, base: str, method: str, path: str, body=None, receive_buffer=None):
        host, port = base.removeprefix("http://").split(":")
        sock = socket.socket()
        if receive_buffer:  # before connect, so the window stays small
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, receive_buffer)
        sock.settimeout(60)
        sock.connect((host, int(port)))
        self.connection = http.client.HTTPConnection(host, int(port), timeout=60)
        self.connection.sock = sock
        headers = dict(HEADERS)
        data = None
        if body is not None:
            data = json.dumps(body).encode()
            headers["content-type"] = "application/json"
        self.connection.request(method, path, body=data, headers=headers)
        self.response: http.client.HTTPResponse | None = None

    def headers(self) -> http.client.HTTPResponse:
        if self.response is None:
            self.response = self.connection.getresponse()
        return self.response

    def answer(self) -> tuple[int, bytes]:
        """The status and the whole body; raises if the answer was cut."""
        response = self.headers()
        return response.status, response.read()

    def close(self) -> None:
        self.connection.close()


def call(base: str, method: str, path: str, body=None) -> tuple[int, bytes]:
    sent = Sent(base, method, path, body)
    try:
        return sent.answer()
    finally:
        sent.close()


def wide_hosts(base: str) -> None:
    """Two hosts of DEVICES one-unit devices each: QUERY's answer is huge."""
    assert call(base, "PUT", "/resource_classes/CUSTOM_DEVICE")[0] == 201
    for host in ("wide-a", "wide-b"):
        root = provider(base, host, None, {"VCPU": 16})
        for device in range(DEVICES):
            provider(base, f"{host}-dev{device}", root, {"CUSTOM_DEVICE": 1})


def provider(base: str, name: str, parent: str | None, inventory: dict) -> str:
    rp_uuid = str(uuid.uuid5(uuid.NAMESPACE_URL, name))
    body = {"name": name, "uuid": rp_uuid}
    if parent:
        body["parent_provider_uuid"] = parent
    assert call(base, "POST", "/resource_providers", body)[0] == 200
    inventories = {rc: {"total": total} for rc, total in inventory.items()}
    path = f"/resource_providers/{rp_uuid}/inventories"
    body = {"resource_provider_generation": 0, "inventories": inventories}
    assert call(base, "PUT", path, body)[0] == 200
    return rp_uuid


@contextlib.contextmanager
def write_lock(database):
    """SQLite's write lock on ``database``, held by the test: every write
    request waits for it (BEGIN IMMEDIATE, busy timeout 30 s)."""
    conn = sqlite3.connect(database, isolation_level=None)
    conn.execute("BEGIN IMMEDIATE")
    try:
        yield conn
    finally:
        with contextlib.suppress(sqlite3.Error):
            conn.execute("ROLLBACK")
        conn.close()


def traits_named(database, prefix: str) -> list[str]:
    conn = sqlite3.connect(database)
    try:
        rows = conn.execute("SELECT name FROM traits WHERE name LIKE ?", (f"{prefix}%",))
        return sorted(name for (name,) in rows)
    finally:
        conn.close()


def refused(port: int) -> bool:
    with socket.socket() as sock:
        return sock.connect_ex(("127.0.0.1", port)) != 0


def test_sigterm_answers_every_request_already_accepted(tmp_path, sqlite_file, sqlite_url):
    metrics_port = free_port()
    conf_path = write_conf(tmp_path, sqlite_url, f"[metrics]\nlisten = 127.0.0.1:{metrics_port}\n")
    args = ("--workers", "2", "--graceful-timeout", "20")
    with started(tmp_path, conf_path, *args) as (server, base, log):
        wide_hosts(base)
        metrics_directory = re.search(r"metrics of every worker in (\S+)", log.read_text())[1]
        # One worker busy sending a huge answer to a client that reads slowly...
        stream = Sent(base, "GET", f"/allocation_candidates?{QUERY}", receive_buffer=16384)
        assert stream.headers().status == 200
        assert stream.headers().getheader("Content-Length") is None  # streamed
        with write_lock(sqlite_file):
            # ...the other waiting for the write lock, the rest queued.
            writes = [Sent(base, "PUT", f"/traits/CUSTOM_GRACEFUL_{i}") for i in range(6)]
            reads = [Sent(base, "GET", "/resource_classes") for _ in range(4)]
            time.sleep(0.3)  # the first write reaches the lock
            server.send_signal(signal.SIGTERM)
            stopping = time.monotonic()
            time.sleep(0.5)
        status, body = stream.answer()
        assert (status, len(json.loads(body)["allocation_requests"])) == (200, CANDIDATES)
        for sent in writes:
            assert sent.answer() == (201, b"")
        for sent in reads:
            status, body = sent.answer()
            assert status == 200 and "VCPU" in body.decode()
        for sent in (stream, *writes, *reads):
            sent.close()  # an answer may have kept its connection open (keep-alive)
        assert server.wait(timeout=20) == 0
        took = time.monotonic() - stopping
        text = log.read_text()
    assert took < 10, f"exited {took:.1f} s after SIGTERM"
    expected = sorted(f"CUSTOM_GRACEFUL_{i}" for i in range(6))
    assert traits_named(sqlite_file, "CUSTOM_GRACEFUL_") == expected
    assert text.count("Worker exiting") == 2
    assert "Traceback" not in text and " ERROR " not in text, text
    assert not pathlib.Path(metrics_directory).exists()
    assert refused(metrics_port)


def test_a_request_running_past_the_graceful_timeout_is_cut(tmp_path, sqlite_file, sqlite_url):
    conf_path = write_conf(tmp_path, sqlite_url)
    args = ("--workers", "2", "--graceful-timeout", "1")
    with started(tmp_path, conf_path, *args) as (server, base, _log):
        with write_lock(sqlite_file):
            stuck = [Sent(base, "PUT", f"/traits/CUSTOM_CUT_{i}") for i in range(3)]
            time.sleep(0.3)
            server.send_signal(signal.SIGTERM)
            stopping = time.monotonic()
            assert server.wait(timeout=15) == 0
            took = time.monotonic() - stopping
            for sent in stuck:
                with pytest.raises((http.client.HTTPException, ConnectionError)):
                    sent.answer()
    assert 0.9 < took < 6, f"exited {took:.1f} s after SIGTERM"
    assert traits_named(sqlite_file, "CUSTOM_CUT_") == []  # nothing half-written


def test_the_graceful_timeout_is_a_whole_number_of_seconds(tmp_path):
    result = run("serve", "--graceful-timeout", "soon", cwd=tmp_path)
    assert result.returncode == 2
    assert "--graceful-timeout: expected a whole number of seconds, got 'soon'" in result.stderr
    assert "--graceful-timeout SECONDS" in run("serve", "--help", cwd=tmp_path).stdout
