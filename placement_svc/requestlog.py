"""One log line per request, at INFO, on the ``placement_svc.requests`` logger.

Format: ``REMOTE "METHOD /path?query" status: S len: N microversion: X.Y
time: T.TTTTs request_id: req-...``.
"""

from __future__ import annotations

import logging
import time

LOG = logging.getLogger("placement_svc.requests")


class RequestLog:
    def __init__(self, application):
        self.application = application

    def __call__(self, environ, start_response):
        started = time.perf_counter()
        status_holder = {}

        def record_status(status, headers, exc_info=None):
            status_holder["status"] = status.split(" ", 1)[0]
            status_holder["length"] = next(
                (v for k, v in headers if k.lower() == "content-length"), "-"
            )
            return start_response(status, headers, exc_info)

        try:
            return self.application(environ, record_status)
        finally:
            if LOG.isEnabledFor(logging.INFO):
                self._log(environ, status_holder, time.perf_counter() - started)

    @staticmethod
    def _log(environ, status_holder, elapsed):
        uri = environ.get("SCRIPT_NAME", "") + environ.get("PATH_INFO", "")
        if environ.get("QUERY_STRING"):
            uri += "?" + environ["QUERY_STRING"]
        version = environ.get("placement.microversion")
        LOG.info(
            '%s "%s %s" status: %s len: %s microversion: %s time: %.4fs request_id: %s',
            environ.get("REMOTE_ADDR", "-"),
            environ.get("REQUEST_METHOD"),
            uri,
            status_holder.get("status", "-"),
            status_holder.get("length", "-"),
            f"{version.major}.{version.minor}" if version else "-",
            elapsed,
            environ.get("openstack.request_id", "-"),
        )
