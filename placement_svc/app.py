"""create_app(conf): the WSGI application, its middleware, and routes.py's
operations bound to the handlers that serve them."""

from __future__ import annotations

import json
import logging

import falcon
from oslo_middleware import cors

from placement_svc import console, errors, logs, policy, routes
from placement_svc import microversion as mv
from placement_svc.api import (
    aggregates,
    allocation_candidates,
    allocations,
    inventories,
    provider_traits,
    provider_trees,
    reshaper,
    resource_classes,
    resource_providers,
    root,
    traits,
    usages,
    usages_total,
)
from placement_svc.db.engine import Database, create_engine
from placement_svc.db.exceptions import DatabaseUnavailable, UnstorableValue
from placement_svc.http import accept, auth, conditional, middleware, reading, requestlog
from placement_svc.operating import health, metrics, openapi

LOG = logging.getLogger(__name__)


def resources(db, conf) -> dict[str, object]:
    """Each resource routes.py names, serving its routes' operations."""
    return {
        "root": root,
        "resource_classes": resource_classes.ResourceClasses(db),
        "traits": traits.Traits(db),
        "resource_providers": resource_providers.ResourceProviders(db),
        "inventories": inventories.Inventories(db),
        "aggregates": aggregates.Aggregates(db),
        "provider_traits": provider_traits.ProviderTraits(db),
        "provider_usages": usages.ProviderUsages(db),
        "provider_trees": provider_trees.ProviderTrees(db),
        "allocations": allocations.Allocations(db, conf),
        "usages": usages_total.TotalUsages(db),
        "reshaper": reshaper.Reshaper(db, conf),
        "allocation_candidates": allocation_candidates.AllocationCandidates(db, conf),
    }


class _Resource:
    """Binds one route's operations to falcon responders. Each responder
    first states which operation the request is (``reading.operation``: the
    handler's checks and the conditional reads read it). Every other
    method, OPTIONS included (falcon would answer that one itself), is a 405
    naming the methods allowed at the request's microversion; every method
    is a 404 before the microversion a URL of our own appears at."""

    def __init__(self, route: routes.Route, resource: object):
        self.since = route.since
        self.template = route.template
        # method -> the microversion it joins the URL's Allow at (None: always)
        self.methods = {op.method: op.allowed_since for op in route.operations}
        responders = {op.method: self._responder(op, resource) for op in route.operations}
        for method in falcon.COMBINED_METHODS:
            setattr(self, "on_" + method.lower(), responders.get(method, self._not_allowed))

    def _responder(self, operation: routes.Operation, resource: object):
        handler = getattr(resource, operation.handler)
        since, allowed_since = self.since, operation.allowed_since

        def respond(req, resp, **params):
            req.env[middleware.ENV_ROUTE] = self.template
            if allowed_since is not None and reading.version(req) < allowed_since:
                return self._not_allowed(req, resp, needs=allowed_since, **params)
            if since is not None:
                reading.require_version(req, since)
            req.context.operation = operation
            return handler(req, resp, **params)

        return respond

    def _not_allowed(self, req, resp, needs=None, **_params):
        req.env[middleware.ENV_ROUTE] = self.template
        if self.since is not None:
            reading.require_version(req, self.since)
        version = reading.version(req)
        allowed = [m for m, since in self.methods.items() if since is None or version >= since]
        hint = ""
        if needs is not None and needs <= mv.max_version(req.env):  # a version would help
            hint = reading.version_hint(req, needs, f"{req.method} on this URL")
        raise errors.MethodNotAllowed(req.method, allowed, hint)


def render_error(req, resp, error: errors.PlacementError) -> None:
    """JSON for clients that prefer it (or say nothing), otherwise webob's
    HTML or plain text page, as upstream answers; but a 500 is always JSON
    with the request id, the one thing an operator needs to find it in the
    log, whatever the client prefers."""
    resp.status = error.status
    req.env[metrics.ENV_ERROR_CODE] = error.code
    for name, value in error.headers.items():
        resp.set_header(name, value)
    media_type = accept.error_media_type(req.get_header("Accept"))
    if media_type != accept.JSON and error.status != 500:
        resp.content_type = f"{media_type}; charset=UTF-8"
        resp.text = errors.page(error, media_type)
        return
    resp.content_type = accept.JSON
    if isinstance(error, errors.AuthenticationRequired):
        resp.text = json.dumps(errors.webob_json_body(error))
        return
    ctx = getattr(req.context, "placement", None)
    version = ctx.version if ctx is not None else None
    with_code = version is not None and version >= mv.ERROR_CODES
    request_id = req.env.get(middleware.ENV_REQUEST_ID)
    body = errors.error_body(error, request_id, with_code)
    if error.version_range and error.status == 406:
        body["errors"][0]["max_version"] = str(mv.max_version(req.env))
        body["errors"][0]["min_version"] = str(mv.MIN_VERSION)
    resp.text = json.dumps(body)


def _handle_placement_error(req, resp, ex, _params):
    render_error(req, resp, ex)


def _handle_falcon_error(req, resp, ex: falcon.HTTPError, _params):
    """Falcon's own errors (no route, no responder) in the one error format."""
    if ex.status_code == 405:
        allowed = (ex.headers or {}).get("Allow", "")
        error = errors.MethodNotAllowed(req.method, [m.strip() for m in allowed.split(",") if m])
    elif ex.status_code == 404:
        error = errors.NotFound()
    else:
        error = errors.PlacementError(ex.description or ex.title or "")
        error.status = ex.status_code
    render_error(req, resp, error)


def _handle_database_fact(req, resp, ex, _params):
    """What the unit of work (db/engine.py) may report to any handler, worded once."""
    if isinstance(ex, UnstorableValue):
        error = errors.BadRequest("The request contains a value the database cannot store.")
    elif ex.unreachable:
        error = errors.ServiceUnavailable(
            UNAVAILABLE.get(ex.reason, "The database cannot be reached; please retry later."),
            headers={"Retry-After": str(RETRY_AFTER_UNREACHABLE)},
        )
    else:
        error = errors.ServiceUnavailable(
            "The database is busy; please retry the request.",
            headers={"Retry-After": str(RETRY_AFTER_BUSY)},
        )
    render_error(req, resp, error)


# Seconds a client is told to wait (Retry-After) before it asks again: a busy
# database clears in moments, an unreachable one (a failover, a restart) in a few.
RETRY_AFTER_BUSY = 1
RETRY_AFTER_UNREACHABLE = 5

# What a database out of reach is, by DatabaseUnavailable.reason, when more
# is known than "cannot be reached"; one line, never the driver's words (they
# may name hosts, users, statements).
UNAVAILABLE = {
    "not_ready": "The database node is not ready for use (not synced with its cluster); "
    "please retry later.",
    "lost_connection": "The connection to the database was lost; please retry later.",
    "pool_timeout": "No database connection came free in time; please retry later.",
}


def _handle_unexpected(req, resp, ex, _params):
    LOG.exception(
        "unexpected error serving %s %s", logs.escape(req.method), logs.escape(req.relative_uri)
    )
    render_error(req, resp, errors.InternalError("An unexpected error occurred."))


# URLs of the service that are not the Placement API: at every microversion,
# since the tools that read them send no OpenStack-API-Version header.
# /healthcheck and /openapi.json need no token; /metrics is an API request
# with its own policy (placement:metrics).
OPERATING_PATHS = (health.PATH, metrics.PATH, openapi.PATH)

# GET /metrics, served by the falcon application (authenticated, with its
# own policy) when metrics are on, but not an operation of the API.
METRICS_ROUTE = routes.Route(
    metrics.PATH, "metrics", (routes.Operation("GET", "show", None, {200: None}),)
)


class _Mount:
    """``mounted`` answers ``path``; ``application`` every other path."""

    def __init__(self, application, path: str, mounted):
        self.application, self.path, self.mounted = application, path, mounted

    def __call__(self, environ, start_response):
        if environ.get("PATH_INFO") == self.path:
            return self.mounted(environ, start_response)
        return self.application(environ, start_response)


def create_falcon_app(
    db: Database, conf, enforcer=None, counts: metrics.Metrics | None = None
) -> falcon.App:
    plumbing = middleware.Plumbing(enforcer, mv.served_up_to(conf.api.max_microversion))
    app = falcon.App(
        middleware=[plumbing, conditional.ConditionalReads()], media_type="application/json"
    )
    app.req_options.keep_blank_qs_values = True
    app.req_options.auto_parse_qs_csv = False
    # Bodiless answers (201 on create, 204) carry no Content-Type, as upstream.
    app.resp_options.default_media_type = None
    served = resources(db, conf)
    for route in routes.ROUTES:
        app.add_route(route.template, _Resource(route, served[route.resource]))
    if counts is not None:
        app.add_route(metrics.PATH, _Resource(METRICS_ROUTE, metrics.Scrape(counts)))
    app.add_error_handler(Exception, _handle_unexpected)
    app.add_error_handler(falcon.HTTPError, _handle_falcon_error)
    app.add_error_handler(errors.PlacementError, _handle_placement_error)
    app.add_error_handler((UnstorableValue, DatabaseUnavailable), _handle_database_fact)
    return app


def create_app(conf, db: Database | None = None):
    """The whole service as a WSGI callable, wrapped in its front doors."""
    if db is None:
        db = Database(
            create_engine(conf.placement_database.connection, conf.placement_database),
            max_retries=conf.placement_database.db_max_retries,
            conflict_retries=conf.placement.allocation_conflict_retry_count,
        )
    counts = metrics.Metrics(db.engine) if conf.metrics.enabled else None
    if counts is not None and db.on_retry is None:
        # Reports to whichever application serves the request (metrics.CURRENT).
        db.on_retry = metrics.db_retry
        db.on_holds = metrics.hold_events
    enforcer = policy.make_enforcer(conf)  # a bad policy file stops us here
    application = create_falcon_app(db, conf, enforcer, counts)
    if conf.api.auth_strategy == "noauth2":
        application = auth.NoAuthMiddleware(application)
    else:
        application = auth.keystone_middleware(application, conf)
    # Upstream's order, outermost last: CORS outside auth (a preflight carries
    # no token), then the request log, which applies the proxy headers first
    # and answers a JSON 500 for whatever any of these layers raises.
    if conf.cors.allowed_origin:
        application = cors.CORS(application, conf)
    application = requestlog.RequestLog(application, conf)
    # Outside the request log (a load balancer's checks every few seconds
    # are not worth a line each) and outside authentication.
    application = _Mount(application, openapi.PATH, openapi.Application(conf))
    if conf.console.enabled:
        application = console.Mount(application, console.Application(conf))
    application = health.Healthcheck(application, conf, db)
    if counts is not None:
        templates = [*routes.templates(), *OPERATING_PATHS]
        if conf.console.enabled:
            templates += console.TEMPLATES
        application = metrics.Instrument(application, counts, templates)
    return application
