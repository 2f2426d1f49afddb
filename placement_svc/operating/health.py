"""GET /healthcheck: oslo.middleware's healthcheck, with a check of the database.

The answer is oslo.middleware's, as other OpenStack services give it: 200
(HEAD: 204) when every check passes, 503 otherwise; plain text (``OK``, or
the reasons) unless the client accepts JSON (``{"detailed": false,
"reasons": [...]}``) or HTML; details (the database backend, the driver's
error, Python and thread stacks) only with ``[healthcheck] detailed``. It
needs no token and is not logged by the request log.

The database check always runs; ``[healthcheck] backends`` adds
oslo.middleware's own (``disable_by_file`` with ``disable_by_file_path``,
to drain a node before maintenance: while the file exists the answer is
503 "DISABLED BY FILE").

The check runs ``SELECT 1`` on a connection from the application's own pool
(no new connection per call), in one background thread per process: a
request waits at most ``[healthcheck] database_timeout`` for it, and a
check still running when the next request comes is waited for again rather
than started twice, so a hung database never holds more than one thread
and never blocks a worker longer than the timeout. A result is reused for
``[healthcheck] database_result_ttl`` seconds, so a busy load balancer costs
the database at most one query per worker per interval.
"""

from __future__ import annotations

import logging
import threading
import time
from concurrent import futures

from oslo_middleware import healthcheck
from oslo_middleware.healthcheck import pluginbase
from sqlalchemy import exc as sa_exc
from stevedore import extension

from placement_svc import redact

LOG = logging.getLogger(__name__)
PATH = "/healthcheck"
CHECK_NAME = "placement_database"


class DatabaseCheck(pluginbase.HealthcheckBaseExtension):
    """An oslo.middleware healthcheck backend: can the database answer?"""

    def __init__(self, oslo_conf, conf, db, clock=time.monotonic):
        super().__init__(oslo_conf, conf)
        self.db = db
        self.timeout = oslo_conf.healthcheck.database_timeout
        self.ttl = oslo_conf.healthcheck.database_result_ttl
        self.clock = clock
        self._lock = threading.Lock()
        self._running: futures.Future | None = None
        self._last: tuple[float, pluginbase.HealthcheckResult] | None = None
        # Made on first use, so that a process forked after start-up gets its own.
        self._executor: futures.ThreadPoolExecutor | None = None

    def healthcheck(self, server_port):
        with self._lock:
            if self._last is not None and self.clock() - self._last[0] < self.ttl:
                return self._last[1]
            if self._running is None:
                if self._executor is None:
                    self._executor = futures.ThreadPoolExecutor(
                        max_workers=1, thread_name_prefix="healthcheck"
                    )
                self._running = self._executor.submit(self._query)
            running = self._running
        try:
            result = running.result(timeout=self.timeout)
        except futures.TimeoutError:
            return pluginbase.HealthcheckResult(
                available=False,
                reason=f"The database did not answer within {self.timeout:g} seconds",
                details=f"backend {self.db.backend}",
            )
        return result

    def _query(self) -> pluginbase.HealthcheckResult:
        started = self.clock()
        try:
            with self.db.engine.connect() as conn:
                conn.exec_driver_sql("SELECT 1").scalar()
        except Exception as exc:  # noqa: BLE001 - whatever it is, the answer is 503
            if not isinstance(exc, sa_exc.SQLAlchemyError | OSError):
                LOG.exception("the database check failed unexpectedly")
            orig = getattr(exc, "orig", None) or exc
            result = pluginbase.HealthcheckResult(
                available=False,
                reason="The database cannot be reached",
                details=f"backend {self.db.backend}: {redact.scrub(' '.join(str(orig).split()))}",
            )
        else:
            result = pluginbase.HealthcheckResult(
                available=True,
                reason="OK",
                details=f"backend {self.db.backend}, "
                f"answered in {self.clock() - started:.4f} seconds",
            )
        with self._lock:
            self._last = (self.clock(), result)
            self._running = None
        return result


class Healthcheck(healthcheck.Healthcheck):
    """oslo.middleware's Healthcheck at ``/healthcheck``, the database check first.

    Any other path (and a health request oslo.middleware ignores: from outside
    ``allowed_source_ranges``, or proxied with ``ignore_proxied_requests``)
    goes to ``application``.
    """

    def __init__(self, application, conf, db):
        super().__init__(application, conf)
        check = DatabaseCheck(conf, {}, db)
        self.database_check = check
        # oslo.middleware loads backends by name from entry points, with no way
        # to hand one the application's engine: ours joins them as a ready
        # extension, ahead of those [healthcheck] backends names.
        self._backends.extensions.insert(
            0, extension.Extension(CHECK_NAME, None, DatabaseCheck, check)
        )

    def __call__(self, environ, start_response):
        if environ.get("PATH_INFO") != PATH:
            return self.application(environ, start_response)
        return super().__call__(environ, start_response)
