"""``placement-svc serve`` while its PostgreSQL goes away and comes back.

The database is a private cluster (tests/support/private_postgresql.py),
stopped and started at will; the shared servers of the matrix are never
touched. What is checked, on two workers:

- while the database is down every request is a 503 with Retry-After, in
  upstream's JSON error format with the request id and a detail naming the
  cause, never a 500; each logs exactly one WARNING line saying why;
- a request in flight when its connection is lost runs again and succeeds
  when the database is still there (pg_terminate_backend), and is a 503
  when it is gone (``pg_ctl stop -m immediate`` or ``-m fast``);
- a write answered 503 left nothing behind;
- once the database is back the same worker processes answer 200 at
  once, without a restart (the pool pings what it hands out);
- no pooled connection free within pool_timeout is a 503 too (one
  worker, a pool of one, held by a health check stuck on a stopped
  backend).

Skipped when no private cluster can be started (no initdb), failed under
CI=true; skipped too when PLACEMENT_TEST_BACKENDS leaves out postgresql.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import signal
import threading
import time
import urllib.error
import urllib.request
import uuid

import pytest

from tests.support import databases, private_postgresql
from tests.support.servers import ADMIN_LATEST, serving, write_conf

# Upstream's 503 detail, then ours.
UNAVAILABLE = "The server is currently unavailable. Please try again at a later time."
CANNOT_BE_REACHED = "The database cannot be reached; please retry later."
POOL_TIMEOUT = "No database connection came free in time; please retry later."
# The process id, the fourth field of every log line (bootstrap.LOG_FORMAT).
BOOTED = re.compile(r"Booting worker with pid: (\d+)")
WARNED = re.compile(
    r" WARNING placement_svc\.db\.engine \[None (req-\S+) [- ]+\] gave up on the database"
)
REQUEST_LINE = re.compile(r"^\S+ \S+ (\d+) INFO placement_svc\.requests .* request_id: (\S+)")


@pytest.fixture(scope="module")
def postgresql():
    if "postgresql" not in databases.wanted_backends():
        pytest.skip("postgresql not in PLACEMENT_TEST_BACKENDS")
    with private_postgresql.cluster() as cluster:
        yield cluster


class Answer:
    def __init__(self, status: int, headers, raw: bytes):
        self.status, self.headers, self.raw = status, headers, raw

    @property
    def body(self):
        return json.loads(self.raw) if self.raw else None

    def __repr__(self) -> str:
        return f"<{self.status} {self.raw[:300]!r}>"


def call(method: str, url: str, body=None, timeout: float = 30) -> Answer:
    headers = dict(ADMIN_LATEST)
    data = None
    if body is not None:
        data = json.dumps(body).encode()
        headers["content-type"] = "application/json"
    request = urllib.request.Request(url, data=data, method=method, headers=headers)
    try:
        with urllib.request.urlopen(request, timeout=timeout) as response:
            return Answer(response.status, response.headers, response.read())
    except urllib.error.HTTPError as error:
        return Answer(error.code, error.headers, error.read())


def in_thread(fn, *args) -> tuple[threading.Thread, dict]:
    """``fn(*args)`` in a thread; its answer (or exception) in the dict."""
    result: dict = {}

    def run():
        try:
            result["answer"] = fn(*args)
        except BaseException as exc:  # noqa: BLE001 - reported by the test
            result["error"] = exc

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    return thread, result


def answered(thread: threading.Thread, result: dict) -> Answer:
    thread.join(timeout=30)
    assert not thread.is_alive(), "the request did not end"
    assert "error" not in result, result.get("error")
    return result["answer"]


def assert_unavailable(answer: Answer, detail: str) -> None:
    """A 503 in upstream's JSON error format, with Retry-After, the request
    id of the x-openstack-request-id header and ``detail`` as the message."""
    assert answer.status == 503, answer
    assert int(answer.headers["Retry-After"]) > 0
    assert answer.headers["Content-Type"].startswith("application/json")
    [error] = answer.body["errors"]
    assert error["status"] == 503
    assert error["title"] == "Service Unavailable"
    assert error["detail"] == f"{UNAVAILABLE}\n\n {detail}  "
    assert error["request_id"] == answer.headers["x-openstack-request-id"]
    assert "postgres" not in answer.raw.decode() and "SELECT" not in answer.raw.decode()


class Log:
    """The server's log, read from a mark on."""

    def __init__(self, path):
        self.path = path
        self.mark = 0

    def set_mark(self) -> None:
        self.mark = len(self.path.read_bytes())

    def since_mark(self) -> str:
        return self.path.read_bytes()[self.mark :].decode()

    def warnings_since_mark(self) -> list[str]:
        return [line for line in self.since_mark().splitlines() if " WARNING " in line]


def request_pids(text: str) -> dict[str, int]:
    """Request id -> the process that answered it, from the request lines."""
    found = {}
    for line in text.splitlines():
        match = REQUEST_LINE.match(line)
        if match:
            found[match.group(2)] = int(match.group(1))
    return found


@contextlib.contextmanager
def backend_waiting_on_a_lock(postgresql, database: str):
    """A connection of the test's own on ``database``, to take locks on;
    yields it and a function that waits for a server backend to wait on
    one of its locks, returning that backend's pid."""
    engine = postgresql.admin(database)
    conn = engine.connect()

    def waiter(other_than: int | None = None) -> int:
        deadline = time.monotonic() + 15
        while time.monotonic() < deadline:
            # Inside the lock's transaction PostgreSQL would show the same
            # snapshot of pg_stat_activity each time: take a new one.
            conn.exec_driver_sql("SELECT pg_stat_clear_snapshot()")
            pids = conn.exec_driver_sql(
                "SELECT pid FROM pg_stat_activity WHERE wait_event_type = 'Lock' "
                "AND datname = current_database() AND pid <> pg_backend_pid()"
            ).scalars()
            pids = [pid for pid in pids if pid != other_than]
            if pids:
                return pids[0]
            time.sleep(0.05)
        raise AssertionError("no request came to wait on the lock")

    try:
        yield conn, waiter
    finally:
        with contextlib.suppress(Exception):
            conn.close()
        engine.dispose()


def hold_world_changes(conn) -> None:
    """A trigger counts every statement that changes the cloud's shape in a
    row of world_changes: with all its rows locked a provider's creation has
    made its row and waits, in flight, before it can go on."""
    conn.exec_driver_sql("BEGIN")
    conn.exec_driver_sql("SELECT generation FROM world_changes FOR UPDATE")


def providers_named(base: str, name: str) -> list:
    answer = call("GET", f"{base}/resource_providers?name={name}")
    assert answer.status == 200, answer
    return answer.body["resource_providers"]


@pytest.fixture(scope="module")
def server(postgresql, tmp_path_factory):
    """``placement-svc serve --workers 2`` on the private cluster: its base
    URL and its Log. Stopped (SIGTERM, exit status 0) after the module."""
    url = postgresql.create_database("placement")
    directory = tmp_path_factory.mktemp("outage")
    conf_path = write_conf(directory, url, "[placement_database]\ndb_max_retries = 3\n")
    with serving(directory, conf_path, "--workers", "2") as (base, log_path):
        log = Log(log_path)
        yield base, log
        text = log_path.read_text()
    # Over the whole module: never a 500, an ERROR line or a traceback.
    assert "status: 500" not in text
    assert "Traceback" not in text
    assert " ERROR " not in text


OUTAGE_REQUESTS = [
    ("GET", "/resource_classes", None),
    ("GET", "/resource_providers", None),
    ("POST", "/resource_providers", {"name": "written-during-the-outage"}),
    ("PUT", "/traits/CUSTOM_WRITTEN_DURING_THE_OUTAGE", None),
    ("GET", "/allocation_candidates?resources=VCPU:1", None),
    ("GET", "/usages?project_id=outage", None),
]


def test_a_stopped_database_is_503_then_the_same_workers_answer_again(postgresql, server):
    base, log = server
    for _ in range(6):  # a pool filled in one worker, or both
        assert call("GET", f"{base}/resource_classes").status == 200
    workers = {int(pid) for pid in BOOTED.findall(log.path.read_text())}
    assert len(workers) == 2

    postgresql.stop("fast")
    try:
        log.set_mark()
        answers = [call(method, base + path, body) for method, path, body in OUTAGE_REQUESTS]
        for answer in answers:
            assert_unavailable(answer, CANNOT_BE_REACHED)
        time.sleep(0.2)
        warnings = log.warnings_since_mark()
        assert len(warnings) == len(OUTAGE_REQUESTS), "\n".join(warnings)
        warned = set()
        for warning in warnings:
            # each request's warning carries its request id (oslo.log's context)
            said = WARNED.search(warning)
            assert said, warning
            warned.add(said.group(1))
            assert "the database cannot be reached" in warning
        assert warned == {answer.headers["x-openstack-request-id"] for answer in answers}
        logged = request_pids(log.since_mark())
        for answer in answers:
            assert answer.headers["x-openstack-request-id"] in logged
        assert "status: 503" in log.since_mark()
    finally:
        postgresql.start()

    log.set_mark()
    deadline = time.monotonic() + 5
    statuses = []
    while time.monotonic() < deadline and statuses[-8:] != [200] * 8:
        statuses.append(call("GET", f"{base}/resource_classes").status)
    assert statuses[-8:] == [200] * 8, statuses
    assert statuses[0] == 200, "the first request after the restart failed"
    # The very processes that were started with the server: none was restarted.
    assert set(request_pids(log.since_mark()).values()) <= workers
    assert "Booting worker" not in log.since_mark()
    assert log.warnings_since_mark() == []
    # Nothing of the writes answered 503 was left behind.
    assert providers_named(base, "written-during-the-outage") == []
    assert call("GET", f"{base}/traits/CUSTOM_WRITTEN_DURING_THE_OUTAGE").status == 404


def test_a_write_whose_connection_is_terminated_runs_again_once(postgresql, server):
    """pg_terminate_backend kills the backend of a write in flight, after
    its INSERT: the transaction runs again on a new connection and the
    provider exists once."""
    base, log = server
    name = f"retried-{uuid.uuid4().hex[:8]}"
    with backend_waiting_on_a_lock(postgresql, "placement") as (conn, waiter):
        hold_world_changes(conn)
        log.set_mark()
        thread, result = in_thread(call, "POST", f"{base}/resource_providers", {"name": name})
        first = waiter()
        conn.exec_driver_sql(f"SELECT pg_terminate_backend({first})")
        waiter(other_than=first)  # the second run, waiting on the same lock
        conn.exec_driver_sql("ROLLBACK")
        answer = answered(thread, result)
    assert answer.status == 200, answer
    assert [p["name"] for p in providers_named(base, name)] == [name]
    assert "retrying transaction (attempt 1) after: terminating connection" in log.since_mark()
    assert log.warnings_since_mark() == []


@pytest.mark.parametrize("mode", ["immediate", "fast"])
def test_a_write_in_flight_when_the_database_stops_is_503_and_left_nothing(
    postgresql, server, mode
):
    base, log = server
    name = f"lost-{mode}-{uuid.uuid4().hex[:8]}"
    with backend_waiting_on_a_lock(postgresql, "placement") as (conn, waiter):
        hold_world_changes(conn)
        log.set_mark()
        thread, result = in_thread(call, "POST", f"{base}/resource_providers", {"name": name})
        waiter()
        try:
            postgresql.stop(mode)
            answer = answered(thread, result)
        finally:
            postgresql.start()
    assert_unavailable(answer, CANNOT_BE_REACHED)
    [warning] = log.warnings_since_mark()
    assert "the database cannot be reached" in warning
    assert providers_named(base, name) == []


def test_a_read_in_flight_when_the_database_stops_is_503(postgresql, server):
    base, log = server
    with backend_waiting_on_a_lock(postgresql, "placement") as (conn, waiter):
        conn.exec_driver_sql("BEGIN")
        conn.exec_driver_sql("LOCK TABLE resource_providers IN ACCESS EXCLUSIVE MODE")
        log.set_mark()
        thread, result = in_thread(call, "GET", f"{base}/resource_providers")
        waiter()
        try:
            postgresql.stop("immediate")
            answer = answered(thread, result)
        finally:
            postgresql.start()
    assert_unavailable(answer, CANNOT_BE_REACHED)
    assert len(log.warnings_since_mark()) == 1
    assert call("GET", f"{base}/resource_providers").status == 200


def client_backends(conn, database: str) -> list[int]:
    return list(
        conn.exec_driver_sql(
            "SELECT pid FROM pg_stat_activity WHERE datname = %s "
            "AND backend_type = 'client backend' AND pid <> pg_backend_pid()",
            (database,),
        ).scalars()
    )


def test_no_pooled_connection_free_in_time_is_503(postgresql, tmp_path):
    """One worker with a pool of one connection, which the health check holds
    while its database does not answer (its backend stopped with SIGSTOP):
    an API request waits pool_timeout (1 s) for it, then is a 503."""
    url = postgresql.create_database("placement_pool")
    pool = "max_pool_size = 1\nmax_overflow = 0\npool_timeout = 1\n"
    conf_path = write_conf(tmp_path, url, f"[placement_database]\n{pool}")
    with serving(tmp_path, conf_path, "--workers", "1") as (base, log_path):
        log = Log(log_path)
        assert call("GET", f"{base}/resource_classes").status == 200
        admin = postgresql.admin()
        stopped = []
        try:
            with admin.connect() as conn:
                stopped = client_backends(conn, "placement_pool")
            assert stopped, "the worker holds no connection"
            for pid in stopped:
                os.kill(pid, signal.SIGSTOP)
            health = call("GET", f"{base}/healthcheck")
            assert health.status == 503
            assert b"did not answer" in health.raw
            log.set_mark()
            started = time.monotonic()
            answer = call("GET", f"{base}/resource_classes")
            waited = time.monotonic() - started
        finally:
            for pid in stopped:
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, signal.SIGCONT)
            admin.dispose()
        assert_unavailable(answer, POOL_TIMEOUT)
        assert 0.9 < waited < 10
        [warning] = log.warnings_since_mark()
        assert "no pooled connection came free" in warning
        deadline = time.monotonic() + 5
        while call("GET", f"{base}/resource_classes").status != 200:
            assert time.monotonic() < deadline, "the pool did not come back"
            time.sleep(0.1)
        text = log_path.read_text()
    assert "status: 500" not in text and "Traceback" not in text
