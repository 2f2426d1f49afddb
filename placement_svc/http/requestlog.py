"""The outermost layer: a request id, the proxy's headers, one log line, never a bare 500.

The line goes out at INFO on the ``placement_svc.requests`` logger: upstream's
line, then what upstream's oslo.log context would have shown around it (time
taken, request id, user and project)::

    10.0.0.7 "GET /traits?name=startswith:CUSTOM_" status: 200 len: 27
    microversion: 1.39 time: 0.0051s request_id: req-... user: admin project: admin

(one line in the log). A ``-`` stands for what a request did not get: no
microversion before the version was negotiated, no user or project when the
request was not authenticated, no length when the answer has no
Content-Length.

The request id is handed out here, before any other layer runs, so every
answer carries ``x-openstack-request-id`` (a CORS preflight or a keystone 401
included) and the falcon plumbing inside reuses the same id. A well-formed
``X-OpenStack-Request-ID`` the caller sent (``req-<uuid>``, nova's own) is
the global request id, as oslo.middleware's RequestId has it: the line's
context (oslo.log's ``[%(global_request_id)s %(request_id)s ...]``) shows it
beside the local one; the answer carries the local one, as upstream's does. The proxy's
headers are applied next ([oslo_middleware] enable_proxy_headers_parsing),
as upstream applies them before its request log, so the address in both
lines is the client's; of ``X-Forwarded-Proto`` (or ``Forwarded: proto=``)
only ``http`` and ``https`` are taken, any other value leaves the scheme
the server gave (it makes the ``Location`` of a create). Whatever any layer
inside raises becomes a JSON 500 (see ``guard``), logged here with
``status: 500``.

Whatever the line takes from the request (the address, the method, the
path and query string, the user and project) is escaped (``logs.escape``:
a newline is ``\\x0a``), so that no request writes a second line or a NUL.
"""

from __future__ import annotations

import contextvars
import logging
import re
import sys
import time
import uuid
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING

from oslo_context import context as oslo_context
from oslo_middleware import base, http_proxy_to_wsgi
from oslo_middleware import request_id as request_id_middleware

from placement_svc import logs
from placement_svc.http import guard, streaming
from placement_svc.http.context import RequestContext
from placement_svc.http.middleware import ENV_MICROVERSION, ENV_REQUEST_ID, ENV_ROUTE
from placement_svc.http.wsgi_types import Environ, ExcInfo, StartResponse, WSGIApp

if TYPE_CHECKING:
    import webob.request
    import webob.response
    from oslo_config import cfg

LOG = logging.getLogger("placement_svc.requests")
REQUEST_ID_HEADER = "x-openstack-request-id"
GLOBAL = request_id_middleware.GLOBAL_REQ_ID  # the environ key of the global request id
SCHEMES = ("http", "https")  # what the proxy's headers may set
LINE = (
    '%s "%s %s" status: %s len: %s microversion: %s time: %.4fs request_id: %s user: %s project: %s'
)


class RequestLog:
    def __init__(self, application: WSGIApp, conf: cfg.ConfigOpts) -> None:
        self.application = application
        # Only its process_request: oslo.middleware's WSGI wrapper made every
        # answer again as a webob Response (and inspected process_response's
        # signature), a tenth of a millisecond on every request.
        self.proxy = _ProxyHeaders(None, conf)

    def __call__(self, environ: Environ, start_response: StartResponse) -> Iterable[bytes]:
        started = time.perf_counter()
        request_id = environ.get(ENV_REQUEST_ID) or f"req-{uuid.uuid4()}"
        environ[ENV_REQUEST_ID] = request_id
        # The caller's own id (nova's, say) is the global one, as oslo.middleware's
        # RequestId takes it: only a well-formed one. The answer carries ours.
        inbound = environ.get("HTTP_X_OPENSTACK_REQUEST_ID", "")
        if re.fullmatch(request_id_middleware.ID_FORMAT, inbound):  # no "\n" after its $
            environ[GLOBAL] = inbound
        # Every line logged while answering carries the two ids.
        current = logs.CURRENT.set(
            _Logged(request_id=request_id, global_request_id=environ.get(GLOBAL))
        )
        try:
            return self._answer(environ, start_response, started, request_id)
        finally:
            logs.CURRENT.reset(current)

    def _answer(
        self, environ: Environ, start_response: StartResponse, started: float, request_id: str
    ) -> Iterable[bytes]:
        answer: dict[str, str] = {}

        def record_status(
            status: str, headers: list[tuple[str, str]], exc_info: ExcInfo | None = None
        ) -> Callable[[bytes], object]:
            answer["status"] = status.split(" ", 1)[0]
            answer["length"] = next((v for k, v in headers if k.lower() == "content-length"), "-")
            if not any(k.lower() == REQUEST_ID_HEADER for k, _v in headers):
                headers = [*headers, (REQUEST_ID_HEADER, request_id)]
            return start_response(status, headers, exc_info)

        def write(sent: int | None = None) -> None:
            if sent:  # a streamed body: the bytes it sent
                answer["length"] = str(sent)
            if LOG.isEnabledFor(logging.INFO):
                elapsed = time.perf_counter() - started
                held = _HELD.get()
                if held is None:
                    _write(environ, answer, elapsed)
                else:  # written once the answer is out (see hold_lines)
                    held.append((environ, answer, elapsed))

        try:  # even the proxy headers' failure is a JSON 500
            body = self._enter(environ, record_status)
        except Exception:  # noqa: BLE001 - whatever it is, the client gets JSON
            body = guard.internal_error(environ, record_status, sys.exc_info())
        if streaming.streamed(body):  # the line once the last byte is sent
            return streaming.when_sent(body, write)
        write()
        return body

    def _enter(self, environ: Environ, start_response: StartResponse) -> Iterable[bytes]:
        """The proxy's headers applied to ``environ``, then the inner application."""
        refusal = self.proxy.process_request(base.NoContentTypeRequest(environ))
        if refusal is not None:  # oslo.middleware's never refuses; a later one might
            return refusal(environ, start_response)
        return self._start(environ, start_response)

    def _start(self, environ: Environ, start_response: StartResponse) -> Iterable[bytes]:
        """The inner application, once the proxy's headers are applied."""
        LOG.debug(
            'Starting request: %s "%s %s"',
            _remote(environ),
            _method(environ),
            _uri(environ),
        )
        return self.application(environ, start_response)


# The request lines held back by the server until its answer is out (hold_lines).
_HELD: contextvars.ContextVar[list[tuple[Environ, dict[str, str], float]] | None] = (
    contextvars.ContextVar("placement_svc_held_lines", default=None)
)


def hold_lines() -> None:
    """For a server that writes an answer out after the application has
    made it (cmd/http_worker.py): the request lines of this context are
    held from now on, and written by ``write_held`` once the answer is
    out. A line (its formatting and its write to the log) cost as much as
    the whole of a small read; the client need not wait for it. The line
    is the same, its time taken measured as before."""
    _HELD.set([])


def write_held() -> None:
    """Write the lines held since ``hold_lines``, and hold none after."""
    held = _HELD.get()
    _HELD.set(None)
    for environ, answer, elapsed in held or ():
        _write(environ, answer, elapsed)


class _ProxyHeaders(http_proxy_to_wsgi.HTTPProxyToWSGI):
    """oslo.middleware's proxy headers, but only ``http`` or ``https`` for a
    scheme: a proxy's ``X-Forwarded-Proto: javascript`` would otherwise make
    ``javascript://`` Locations. Another value leaves the server's scheme."""

    def process_request(self, req: webob.request.Request) -> webob.response.Response | None:
        before = req.environ.get("wsgi.url_scheme")
        answer = super().process_request(req)
        after = req.environ.get("wsgi.url_scheme")
        if after != before:
            scheme = str(after).strip().strip('"').lower()  # RFC 7239 allows "https"
            if scheme in SCHEMES:
                req.environ["wsgi.url_scheme"] = scheme
            elif before is None:
                del req.environ["wsgi.url_scheme"]
            else:
                req.environ["wsgi.url_scheme"] = before
        return answer


class _Logged(oslo_context.RequestContext):
    """The context of one request's line, for oslo.log's formatters alone:
    never the thread's current context (oslo.context makes the first one it
    meets current, which would tag the process's later lines with it)."""

    def update_store(self) -> None:
        pass


def _remote(environ: Environ) -> str:
    return logs.escape(environ.get("REMOTE_ADDR") or "-")


def _method(environ: Environ) -> str:
    return logs.escape(str(environ.get("REQUEST_METHOD")))


def _uri(environ: Environ) -> str:
    uri = environ.get("SCRIPT_NAME", "") + environ.get("PATH_INFO", "")
    if environ.get("QUERY_STRING"):
        uri += "?" + environ["QUERY_STRING"]
    return logs.escape(uri)


def _escaped(value: str | None) -> str | None:
    return None if value is None else logs.escape(value)


def _write(environ: Environ, answer: dict[str, str], elapsed: float) -> None:
    # The caller as the request context sees it: the headers the auth layer left.
    caller = RequestContext.from_environ(environ, environ[ENV_REQUEST_ID])
    version = environ.get(ENV_MICROVERSION)
    # What oslo.log's context format shows in [...]: the global and local
    # request ids, the user and project.
    logged = _Logged(
        request_id=environ[ENV_REQUEST_ID],
        global_request_id=environ.get(GLOBAL),
        user_id=_escaped(caller.user_id),
        project_id=_escaped(caller.project_id),
    )
    LOG.info(
        LINE,
        _remote(environ),
        _method(environ),
        _uri(environ),
        answer.get("status", "-"),
        answer.get("length", "-"),
        f"{version.major}.{version.minor}" if version else "-",
        elapsed,
        environ[ENV_REQUEST_ID],
        logged.user_id or "-",
        logged.project_id or "-",
        # The route's template, as the metrics label it: a field of the record
        # (JSON and Fluent logs show it), the line itself staying upstream's.
        # (``extra_keys``: what oslo.log's JSON formatter lists under "extra").
        extra={
            "context": logged,
            "route": environ.get(ENV_ROUTE, "unmatched"),
            "extra_keys": ["route"],
        },
    )
