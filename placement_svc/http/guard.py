"""The last word on a request: whatever escapes the layers inside becomes a JSON 500.

Falcon's error handlers catch what a responder raises, but nothing catches
what the layers around falcon raise (keystonemiddleware's auth_token, CORS,
the proxy headers): the WSGI server would answer with its own HTML page and
the request log would show no status. The request log, the outermost layer,
hands whatever escapes to ``internal_error``, so every request ends with an
answer in upstream's error format, carrying its request id, and one line.
"""

from __future__ import annotations

import json
import logging
from typing import Any

from placement_svc import errors, logs
from placement_svc import microversion as mv
from placement_svc.http.middleware import ENV_MICROVERSION, ENV_REQUEST_ID
from placement_svc.http.wsgi_types import Environ, ExcInfo, StartResponse

LOG = logging.getLogger(__name__)
# The same words as falcon's handler for an unexpected error: the exception
# itself stays in the log, where the request id finds it.
DETAIL = "An unexpected error occurred."
STATUS = "500 Internal Server Error"


def internal_error(
    environ: Environ, start_response: StartResponse, exc_info: ExcInfo
) -> list[bytes]:
    """Log ``exc_info`` with its traceback and answer upstream's JSON 500.

    JSON whatever the client's Accept says: an error no layer expected must
    not depend on one more thing going right. ``exc_info`` goes to
    ``start_response`` too, which lets it replace headers an inner layer set
    before it failed (PEP 3333).
    """
    LOG.error(
        "unexpected error serving %s %s (request_id %s)",
        logs.escape(str(environ.get("REQUEST_METHOD"))),
        logs.escape(str(environ.get("PATH_INFO"))),
        environ.get(ENV_REQUEST_ID),
        exc_info=exc_info,
    )
    body = json.dumps(body_for(environ)).encode("utf-8")
    headers = [("Content-Type", "application/json"), ("Content-Length", str(len(body)))]
    start_response(STATUS, headers, exc_info)
    return [body]


def body_for(environ: Environ) -> dict[str, Any]:
    """The error body, with the error code once the request negotiated 1.23+."""
    version = environ.get(ENV_MICROVERSION)
    with_code = version is not None and version >= mv.ERROR_CODES
    error = errors.InternalError(DETAIL)
    return errors.error_body(error, environ.get(ENV_REQUEST_ID), with_code)
