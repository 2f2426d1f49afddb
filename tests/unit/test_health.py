"""The database check behind GET /healthcheck: bounded in time and in load.

A hung database must not hold a worker longer than [healthcheck]
database_timeout, nor make every health request start a query of its own;
a busy load balancer costs at most one query per database_result_ttl.
"""

from __future__ import annotations

import threading
import time

import sqlalchemy as sa

from placement_svc.operating import health
from tests.support.fixtures import make_conf


class _Result:
    def scalar(self):
        return 1


class _Engine:
    """An engine whose connections answer SELECT 1 once ``gate`` opens."""

    def __init__(self, gate: threading.Event | None = None, error: Exception | None = None):
        self.gate, self.error = gate, error
        self.queries = 0

    def connect(self):
        engine = self

        class _Conn:
            def __enter__(self):
                if engine.error is not None:
                    raise engine.error
                return self

            def __exit__(self, *exc):
                return False

            def exec_driver_sql(self, sql):
                assert sql == "SELECT 1"
                engine.queries += 1
                if engine.gate is not None:
                    engine.gate.wait(10)
                return _Result()

        return _Conn()


class _Db:
    backend = "fake"

    def __init__(self, engine):
        self.engine = engine


def _check(engine, timeout=0.2, ttl=0.0, clock=time.monotonic):
    conf = make_conf(
        **{"healthcheck.database_timeout": timeout, "healthcheck.database_result_ttl": ttl}
    )
    return health.DatabaseCheck(conf, {}, _Db(engine), clock=clock)


def test_a_database_that_answers_is_ok():
    result = _check(_Engine()).healthcheck(8778)
    assert (result.available, result.reason) == (True, "OK")
    assert result.details.startswith("backend fake, answered in ")


def test_a_refused_connection_is_the_reason_and_the_error_only_a_detail():
    error = sa.exc.OperationalError("connect", {}, OSError("Connection refused"))
    result = _check(_Engine(error=error)).healthcheck(8778)
    assert (result.available, result.reason) == (False, "The database cannot be reached")
    assert result.details == "backend fake: Connection refused"


def test_an_unexpected_error_in_the_check_is_a_503_too():
    result = _check(_Engine(error=RuntimeError("driver bug"))).healthcheck(8778)
    assert (result.available, result.reason) == (False, "The database cannot be reached")
    assert result.details == "backend fake: driver bug"


def test_a_hung_database_answers_within_the_timeout_and_runs_one_query():
    gate = threading.Event()
    engine = _Engine(gate)
    check = _check(engine, timeout=0.2)
    started = time.monotonic()
    answers = [check.healthcheck(8778) for _ in range(3)]
    elapsed = time.monotonic() - started
    assert [a.reason for a in answers] == ["The database did not answer within 0.2 seconds"] * 3
    assert not any(a.available for a in answers)
    assert elapsed < 3 * 0.2 + 0.5  # each waited its timeout, no more
    # The three requests waited on the one query still running.
    assert engine.queries == 1
    gate.set()
    time.sleep(0.05)
    assert check.healthcheck(8778).available
    assert engine.queries == 2  # the hung one finished: the next check queries anew


def test_a_result_is_reused_for_its_ttl_then_checked_again():
    now = [100.0]
    engine = _Engine()
    check = _check(engine, ttl=1.0, clock=lambda: now[0])
    for _ in range(5):
        assert check.healthcheck(8778).available
    assert engine.queries == 1
    now[0] += 1.5
    assert check.healthcheck(8778).available
    assert engine.queries == 2
