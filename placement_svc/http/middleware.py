"""Per-request plumbing as falcon middleware: request id, context, microversion.

Order matters and is fixed here: the request id first (so every answer,
errors included, carries one), then the caller's identity (401 without it,
except for the version document), then the microversion (400/406), then
the checks every body-carrying request gets.
"""

from __future__ import annotations

import uuid
from typing import TYPE_CHECKING

import falcon
from microversion_parse import Version

from placement_svc import errors
from placement_svc import microversion as mv
from placement_svc.http import auth
from placement_svc.http.context import RequestContext
from placement_svc.http.wsgi_types import Environ

if TYPE_CHECKING:
    from oslo_policy.policy import Enforcer

ENV_REQUEST_ID = "openstack.request_id"
ENV_MICROVERSION = "placement.microversion"
# The template of the route that served the request (app._Resource), for the
# request log's record.
ENV_ROUTE = "placement.route"
# Long enough for GET /allocations?consumer_uuid=in: with its 1000 uuids
# (1.46: 37 characters each); a longer URL is a 414.
MAX_URL_LENGTH = 40960


class Plumbing:
    def __init__(self, enforcer: Enforcer | None = None, newest: Version = mv.MAX_VERSION) -> None:
        self.enforcer = enforcer  # the application's policy enforcer, for ctx.can()
        self.newest = newest  # the newest microversion served ([api] max_microversion)

    def process_request(self, req: falcon.Request, resp: falcon.Response) -> None:
        env = req.env
        env[mv.ENV_MAX_VERSION] = self.newest
        request_id = env.get(ENV_REQUEST_ID) or f"req-{uuid.uuid4()}"
        env[ENV_REQUEST_ID] = request_id
        ctx = RequestContext.from_environ(env, request_id, self.enforcer)
        req.context.placement = ctx
        resp.set_header("x-openstack-request-id", request_id)
        if len(env.get("QUERY_STRING", "")) + len(env.get("PATH_INFO", "")) > MAX_URL_LENGTH:
            raise errors.UriTooLong(f"The request URI is longer than {MAX_URL_LENGTH} characters.")
        if ctx.user_id is None and env.get("PATH_INFO", "") not in auth.ROOT_PATHS:
            raise errors.AuthenticationRequired(env.get(auth.ENV_MISSING_CREDENTIALS, ""))
        try:
            ctx.version = mv.from_headers(env, self.newest)
        except mv.MicroversionError as exc:
            error: errors.PlacementError = (
                errors.NotAcceptable if exc.status == 406 else errors.BadRequest
            )(exc.message)
            # Read by app.render_error (406: min_version and max_version in the body).
            error.version_range = True
            raise error from None
        env[ENV_MICROVERSION] = ctx.version
        resp.set_header(mv.HEADER, mv.header_value(ctx.version))
        resp.append_header("Vary", mv.HEADER.lower())
        _check_content_headers(env)


def _check_content_headers(env: Environ) -> None:
    length = env.get("CONTENT_LENGTH")
    if not length:
        return
    try:
        size = int(length)
    except ValueError:
        raise errors.BadRequest("content-length header must be an integer") from None
    if size > 0 and not env.get("CONTENT_TYPE"):
        raise errors.BadRequest("content-type header required when content-length > 0")
