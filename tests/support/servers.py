"""Helpers for tests that run the real ``placement-svc`` command or a real
server in a child process: its environment, a configuration file, a free
port, a server that is stopped cleanly after the test."""

from __future__ import annotations

import contextlib
import json
import os
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request

CLI = [sys.executable, "-m", "placement_svc.cmd.cli"]
ADMIN_LATEST = {"x-auth-token": "admin", "openstack-api-version": "placement latest"}


def environment(home) -> dict:
    env = dict(os.environ, HOME=str(home))
    env.pop("OS_PLACEMENT_CONFIG_DIR", None)
    return env


def import_wsgi(tmp_path):
    """Import placement_svc.wsgi in a child process configured by
    tmp_path/placement.conf, as a WSGI server would."""
    env = dict(environment(tmp_path), OS_PLACEMENT_CONFIG_DIR=str(tmp_path))
    return subprocess.run(
        [sys.executable, "-c", "import placement_svc.wsgi"],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )


def python_output(*args, cwd, env=None) -> str:
    """This Python run with ``args`` in a child process in ``cwd`` (with
    ``environment(cwd)`` unless ``env`` is given): its stdout, once it has
    exited 0."""
    result = subprocess.run(
        [sys.executable, *args],
        cwd=cwd,
        env=environment(cwd) if env is None else env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 0, result.stderr
    return result.stdout


def run(*args, cwd, check=False, **kwargs) -> subprocess.CompletedProcess:
    result = subprocess.run(
        [*CLI, *args],
        cwd=cwd,
        env=environment(cwd),
        capture_output=True,
        text=True,
        timeout=60,
        **kwargs,
    )
    if check:
        assert result.returncode == 0, result.stderr
    return result


def write_conf(tmp_path, connection: str, extra: str = "") -> str:
    path = tmp_path / "placement.conf"
    path.write_text(
        f"[placement_database]\nconnection = {connection}\nmax_retries = 0\n"
        f"[api]\nauth_strategy = noauth2\n{extra}"
    )
    return str(path)


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def get(url: str, headers=None) -> tuple[int, dict]:
    request = urllib.request.Request(url, headers=headers or {})
    try:
        with urllib.request.urlopen(request, timeout=10) as response:
            return response.status, json.loads(response.read())
    except urllib.error.HTTPError as error:
        return error.code, json.loads(error.read())


@contextlib.contextmanager
def answering(argv, cwd, port: int, path: str = "/", log_name: str = "server.log"):
    """A server started as ``argv`` in ``cwd``, once GET ``path`` on ``port``
    answers 200; yields its log file. It must stop cleanly on SIGTERM."""
    log = cwd / log_name
    with open(log, "w") as stderr:
        server = subprocess.Popen(
            argv, cwd=cwd, env=environment(cwd), stdout=subprocess.DEVNULL, stderr=stderr
        )
    try:
        deadline = time.monotonic() + 30
        while True:
            assert server.poll() is None, f"{argv} exited early:\n{log.read_text()}"
            with contextlib.suppress(OSError):
                if get(f"http://127.0.0.1:{port}{path}")[0] == 200:
                    break
            assert time.monotonic() < deadline, f"{argv} did not answer:\n{log.read_text()}"
            time.sleep(0.1)
        yield log
    finally:
        server.terminate()
        try:
            assert server.wait(timeout=30) == 0, log.read_text()
        finally:
            if server.poll() is None:
                server.kill()


@contextlib.contextmanager
def serving(tmp_path, conf_path, *extra, path="/"):
    """A running ``placement-svc serve``; yields its base URL and its log file."""
    port = free_port()
    argv = [*CLI, "serve", "--config-file", conf_path, "--bind", f"127.0.0.1:{port}", *extra]
    with answering(argv, tmp_path, port, path, log_name="serve.log") as log:
        yield f"http://127.0.0.1:{port}", log


def assert_one_line_error(result, *fragments):
    """A command that failed as an operator's mistake should: one line,
    ``placement-svc: error: ...``, holding each fragment, and no traceback."""
    assert result.returncode != 0
    assert "Traceback" not in result.stderr
    lines = result.stderr.splitlines()
    assert len(lines) == 1, result.stderr
    assert lines[0].startswith("placement-svc: error: ")
    for fragment in fragments:
        assert fragment in lines[0]
