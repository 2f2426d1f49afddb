"""create_app(conf): the WSGI application, its middleware and the ONE route table."""

from __future__ import annotations

import json
import logging

import falcon
from oslo_middleware import cors

from placement_svc import errors, logs, policy
from placement_svc import microversion as mv
from placement_svc.api import (
    aggregates,
    allocation_candidates,
    allocations,
    inventories,
    provider_traits,
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
from placement_svc.http import accept, auth, conditional, middleware, requestlog, web
from placement_svc.operating import health, metrics, openapi

LOG = logging.getLogger(__name__)


def route_table(db, conf) -> list[tuple[str, dict]]:
    """Every URL upstream Placement serves, with the handler for each method."""
    rcs = resource_classes.ResourceClasses(db)
    trs = traits.Traits(db)
    rps = resource_providers.ResourceProviders(db)
    invs = inventories.Inventories(db)
    aggs = aggregates.Aggregates(db)
    rp_traits = provider_traits.ProviderTraits(db)
    rp_usages = usages.ProviderUsages(db)
    allocs = allocations.Allocations(db, conf)
    total_usages = usages_total.TotalUsages(db)
    reshapes = reshaper.Reshaper(db, conf)
    candidates = allocation_candidates.AllocationCandidates(db, conf)
    return [
        ("/", {"GET": root.home}),
        ("/resource_classes", {"GET": rcs.list, "POST": rcs.create}),
        (
            "/resource_classes/{name}",
            {"GET": rcs.show, "PUT": rcs.update, "DELETE": rcs.delete},
        ),
        ("/resource_providers", {"GET": rps.list, "POST": rps.create}),
        (
            "/resource_providers/{uuid}",
            {"GET": rps.show, "PUT": rps.update, "DELETE": rps.delete},
        ),
        (
            "/resource_providers/{uuid}/inventories",
            {
                "GET": invs.list,
                "POST": invs.create,
                "PUT": invs.replace_all,
                "DELETE": invs.delete_all,
            },
        ),
        (
            "/resource_providers/{uuid}/inventories/{resource_class}",
            {"GET": invs.show, "PUT": invs.update, "DELETE": invs.delete},
        ),
        ("/resource_providers/{uuid}/usages", {"GET": rp_usages.show}),
        ("/resource_providers/{uuid}/aggregates", {"GET": aggs.list, "PUT": aggs.replace}),
        ("/resource_providers/{uuid}/allocations", {"GET": allocs.for_provider}),
        (
            "/resource_providers/{uuid}/traits",
            {"GET": rp_traits.list, "PUT": rp_traits.replace, "DELETE": rp_traits.delete},
        ),
        # GET from 1.46 (ours); before it, the 405 allowing POST upstream answers
        (
            "/allocations",
            {"POST": allocs.post_many, "GET": (allocs.list_many, mv.BULK_ALLOCATIONS)},
        ),
        (
            "/allocations/{consumer_uuid}",
            {"GET": allocs.show, "PUT": allocs.replace, "DELETE": allocs.delete},
        ),
        ("/allocation_candidates", {"GET": candidates.list}),
        # placement-svc's own (1.44): before it, any method is a 404, as for
        # any URL upstream does not have.
        (
            "/allocation_candidates/explain",
            {"GET": candidates.explain, SINCE: mv.CANDIDATES_EXPLAIN},
        ),
        (
            "/allocation_candidates/capacity",
            {"GET": candidates.capacity, SINCE: mv.CANDIDATES_EXPLAIN},
        ),
        ("/traits", {"GET": trs.list}),
        ("/traits/{name}", {"GET": trs.show, "PUT": trs.update, "DELETE": trs.delete}),
        ("/usages", {"GET": total_usages.show}),
        ("/reshaper", {"POST": reshapes.reshape}),
    ]


# In a route's handlers: the microversion the URL appears at, for a URL of
# placement-svc's own (its handlers check it themselves). A method of our
# own on an upstream URL is given as (handler, the microversion it appears at).
SINCE = "since"


class _Resource:
    """Binds one URL's handlers to falcon responders. Every other method, OPTIONS
    included (falcon would answer that one itself), is a 405 naming the methods
    allowed at the request's microversion; a 404 before the microversion a URL
    of our own appears at."""

    def __init__(self, handlers: dict):
        handlers = dict(handlers)
        self.since = handlers.pop(SINCE, None)
        # method -> the microversion it appears at (None: always there)
        self.methods = {
            method: entry[1] if isinstance(entry, tuple) else None
            for method, entry in handlers.items()
        }
        for method in falcon.COMBINED_METHODS:
            entry = handlers.get(method)
            if entry is None:
                handler = self._not_allowed
            elif isinstance(entry, tuple):
                handler = self._from(entry[0], entry[1])
            else:
                handler = entry
            setattr(self, "on_" + method.lower(), handler)

    def _from(self, handler, feature):
        def guarded(req, resp, **params):
            if web.version(req) < feature:
                return self._not_allowed(req, resp, needs=feature, **params)
            return handler(req, resp, **params)

        return guarded

    def _not_allowed(self, req, resp, needs=None, **_params):
        if self.since is not None:
            web.require_version(req, self.since)
        version = web.version(req)
        allowed = [m for m, since in self.methods.items() if since is None or version >= since]
        hint = ""
        if needs is not None and needs <= mv.max_version(req.env):  # a version would help
            hint = web.version_hint(req, needs, f"{req.method} on this URL")
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
    for template, handlers in route_table(db, conf):
        app.add_route(template, _Resource(handlers))
    if counts is not None:
        app.add_route(metrics.PATH, _Resource({"GET": metrics.Scrape(counts).show}))
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
    routes = route_table(db, conf)
    application = _Mount(application, openapi.PATH, openapi.Application(conf, routes))
    application = health.Healthcheck(application, conf, db)
    if counts is not None:
        templates = [template for template, _handlers in routes]
        application = metrics.Instrument(application, counts, [*templates, *OPERATING_PATHS])
    return application
