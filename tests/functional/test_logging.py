"""Upstream's [DEFAULT] logging options (oslo.log) on the real ``placement-svc
serve``, and nova's global request id (issue 27).

``log_file`` with ``debug`` writes there, DEBUG lines included, in oslo.log's
context format: ``[<global request id> <local request id> <user> <project>
...]`` before the request line, which keeps its own words. A well-formed
``X-OpenStack-Request-ID`` is the global id and the answer carries the local
one; a malformed one is ignored. ``use_json`` writes JSON records with both
ids; ``log_config_append`` hands logging to the operator's file; with no
destination at all the lines go to stderr, and ``db sync`` says nothing.
The WSGI entry point reads the same options when its server leaves logging
alone.
"""

from __future__ import annotations

import contextlib
import json
import re
import subprocess
import sys
import time
import urllib.request

from tests.support.servers import CLI, environment, free_port, get, serving, write_conf

GLOBAL = "req-12345678-1234-4abc-8def-123456789abc"
CONTEXT_LINE = re.compile(
    r"^\S+ \S+ \d+ INFO placement_svc\.requests \[(\S+) (req-\S+) admin admin - - - -\] "
    r'127\.0\.0\.1 "GET /resource_providers" status: 200 len: \d+ microversion: 1\.39 '
    r"time: \S+ request_id: (req-\S+) user: admin project: admin$"
)


def conf_with(tmp_path, url: str, defaults: str = "") -> str:
    """A placement.conf on ``url``, noauth2, with these [DEFAULT] lines."""
    return write_conf(tmp_path, url, f"[DEFAULT]\n{defaults}")


def ask(base: str, global_id: str | None) -> str:
    """GET /resource_providers with the caller's request id; the answer's id."""
    headers = {"x-auth-token": "admin", "openstack-api-version": "placement 1.39"}
    if global_id is not None:
        headers["x-openstack-request-id"] = global_id
    request = urllib.request.Request(f"{base}/resource_providers", headers=headers)
    with urllib.request.urlopen(request, timeout=10) as answer:
        assert answer.status == 200
        return answer.headers["x-openstack-request-id"]


def test_log_file_and_debug_with_the_global_request_id(tmp_path, sqlite_url):
    log_file = tmp_path / "placement.log"
    conf = conf_with(tmp_path, sqlite_url, f"log_file = {log_file}\ndebug = true\n")
    with serving(tmp_path, conf) as (base, stderr):
        local = ask(base, GLOBAL)
        other = ask(base, "req-not-a-uuid")
    lines = log_file.read_text().splitlines()
    requests = [m.groups() for m in map(CONTEXT_LINE.match, lines) if m]
    assert requests == [(GLOBAL, local, local), ("None", other, other)]
    assert local != GLOBAL and re.fullmatch(r"req-[0-9a-f-]{36}", local)
    assert any(" DEBUG placement_svc.requests " in line for line in lines)  # debug = true
    assert any(" INFO gunicorn.error [-] Booting worker" in line for line in lines)
    assert "placement_svc.requests" not in stderr.read_text()  # the file, not stderr too


def test_use_json_records_carry_both_request_ids(tmp_path, sqlite_url):
    log_file = tmp_path / "placement.json"
    conf = conf_with(tmp_path, sqlite_url, f"log_file = {log_file}\nuse_json = true\n")
    with serving(tmp_path, conf) as (base, _stderr):
        local = ask(base, GLOBAL)
    records = [json.loads(line) for line in log_file.read_text().splitlines()]
    (line,) = [r for r in records if "GET /resource_providers" in r["message"]]
    assert line["levelname"] == "INFO"
    assert line["context"]["global_request_id"] == GLOBAL
    assert line["context"]["request_id"] == local
    assert line["message"].startswith('127.0.0.1 "GET /resource_providers" status: 200 ')


def test_log_config_append_hands_logging_to_the_operators_file(tmp_path, sqlite_url):
    log_file = tmp_path / "own.log"
    (tmp_path / "logging.ini").write_text(
        "[loggers]\nkeys = root\n[handlers]\nkeys = file\n[formatters]\nkeys = plain\n"
        "[logger_root]\nlevel = INFO\nhandlers = file\n"
        f"[handler_file]\nclass = FileHandler\nformatter = plain\nargs = ('{log_file}',)\n"
        "[formatter_plain]\nformat = OWN %(levelname)s %(name)s %(message)s\n"
    )
    conf = conf_with(tmp_path, sqlite_url, f"log_config_append = {tmp_path / 'logging.ini'}\n")
    with serving(tmp_path, conf) as (base, _stderr):
        ask(base, None)
    assert any(
        line.startswith('OWN INFO placement_svc.requests 127.0.0.1 "GET /resource_providers"')
        for line in log_file.read_text().splitlines()
    )


def test_without_a_destination_lines_go_to_stderr_and_db_sync_is_quiet(tmp_path, sqlite_url):
    conf = conf_with(tmp_path, sqlite_url)
    synced = subprocess.run(
        [*CLI, "--config-file", conf, "db", "sync"],
        cwd=tmp_path,
        env=environment(tmp_path),
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert (synced.returncode, synced.stdout, synced.stderr) == (0, "", "")
    with serving(tmp_path, conf) as (base, stderr):
        local = ask(base, GLOBAL)
    assert [m.groups() for m in map(CONTEXT_LINE.match, stderr.read_text().splitlines()) if m] == [
        (GLOBAL, local, local)
    ]


def test_the_wsgi_entry_point_reads_the_same_options(tmp_path, sqlite_url):
    log_file = tmp_path / "wsgi.log"
    conf = conf_with(tmp_path, sqlite_url, f"log_file = {log_file}\n")
    env = environment(tmp_path)
    subprocess.run([*CLI, "--config-file", conf, "db", "sync"], cwd=tmp_path, env=env, check=True)
    port = free_port()
    argv = [sys.executable, "-m", "gunicorn", "-b", f"127.0.0.1:{port}"]
    server = subprocess.Popen(
        [*argv, "placement_svc.wsgi:application"],
        cwd=tmp_path,
        env=dict(env, OS_PLACEMENT_CONFIG_DIR=str(tmp_path)),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        deadline = time.monotonic() + 30
        while True:
            with contextlib.suppress(OSError):
                if get(f"http://127.0.0.1:{port}/")[0] == 200:
                    break
            assert time.monotonic() < deadline and server.poll() is None
            time.sleep(0.1)
        local = ask(f"http://127.0.0.1:{port}", GLOBAL)
    finally:
        server.terminate()
        server.wait(timeout=30)
    lines = log_file.read_text().splitlines()
    assert [m.groups() for m in map(CONTEXT_LINE.match, lines) if m] == [(GLOBAL, local, local)]
