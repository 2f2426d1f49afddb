"""Prometheus metrics: what the service counts, and GET /metrics.

Every request is counted and timed by the outermost layer (``Instrument``),
labelled by the route's template (``/resource_providers/{uuid}``, never the
raw path: no uuid ever becomes a label), the method, the status and the
microversion. The layers inside add what only they know through the
request's context (``CURRENT``): the database retries a unit of work made,
the generation conflicts answered, the shape and size of an allocation
candidates answer.

Under ``placement-svc serve`` the gunicorn master points prometheus_client
at a directory shared by the workers (``use_directory``, its multiprocess
mode), so one scrape of any worker reports every worker's counts. Anywhere
else (one process, a WSGI server of the operator's choosing without
PROMETHEUS_MULTIPROC_DIR) each application has its own registry.

The names (all prefixed ``placement_``):

======================================================  ==========================
placement_http_requests_total                           route, method, status,
placement_http_request_duration_seconds (histogram)     microversion
placement_db_retries_total                              route, reason
placement_generation_conflicts_total                    route
placement_allocation_candidates_returned (histogram)    groups, trees
placement_allocation_candidates_duration_seconds        groups, trees
placement_allocation_candidates_trees_pruned            groups, trees
placement_db_connections_in_use (gauge)                 -
placement_svc_build_info (gauge, always 1)              version
======================================================  ==========================
"""

from __future__ import annotations

import contextvars
import glob
import importlib.metadata
import os
from time import perf_counter
from typing import NamedTuple

import falcon.routing
from prometheus_client import (
    CollectorRegistry,
    Counter,
    Gauge,
    Histogram,
    disable_created_metrics,
    exposition,
    multiprocess,
    values,
)
from sqlalchemy import event

from placement_svc import errors
from placement_svc.http import streaming
from placement_svc.http.middleware import ENV_MICROVERSION
from placement_svc.policies import operating as policies

# No *_created series: a restart shows in process_start_time_seconds, and
# the multiprocess mode has none to give.
disable_created_metrics()

MULTIPROC_ENV = "PROMETHEUS_MULTIPROC_DIR"
PATH = "/metrics"
# Set by render_error for the request's answer, read when it is counted.
ENV_ERROR_CODE = "placement.error_code"
UNMATCHED = "unmatched"  # the route label of a path no route serves
METHODS = frozenset({"GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS"})

REQUEST_LABELS = ("route", "method", "status", "microversion")
CANDIDATE_LABELS = ("groups", "trees")
# Seconds: from a cached GET of a provider to a slow candidates query.
LATENCY_BUCKETS = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10)
COUNT_BUCKETS = (0, 1, 5, 10, 50, 100, 500, 1000, 5000, 10000, 50000)


class Current(NamedTuple):
    """What a request's inner layers report to: its metrics and its route."""

    metrics: Metrics
    route: str


CURRENT: contextvars.ContextVar[Current | None] = contextvars.ContextVar(
    "placement_metrics", default=None
)


def multiprocess_directory() -> str | None:
    return os.environ.get(MULTIPROC_ENV) or None


def use_directory(path: str) -> None:
    """Count in ``path``, shared with every process forked from now on
    (prometheus_client's multiprocess mode). Stale files of an earlier run
    are removed: counters restart with the service, as Prometheus expects."""
    for stale in glob.glob(os.path.join(path, "*.db")):
        os.remove(stale)
    os.environ[MULTIPROC_ENV] = path
    # prometheus_client picks its value store once, at import: pick again.
    values.ValueClass = values.get_value_class()


def serve_shared(host: str, port: int) -> None:
    """Answer the shared counts (use_directory's) at http://host:port/, with
    no authentication, from a thread of this process: the gunicorn master,
    which serves no API request itself."""
    registry = CollectorRegistry()
    multiprocess.MultiProcessCollector(registry)
    exposition.start_http_server(port, addr=host, registry=registry)


def process_dead(pid: int) -> None:
    """A worker exited: its share of the in-use gauge goes with it (gunicorn's
    child_exit hook); its counters stay, as counters must."""
    if multiprocess_directory():
        multiprocess.mark_process_dead(pid)


class Metrics:
    """One process's (or, in one process, one application's) metrics."""

    def __init__(self, engine=None):
        self.shared = multiprocess_directory() is not None
        # Shared: every process writes its files and a scrape reads them all;
        # no registry of our own to collide with another application's.
        self.registry = None if self.shared else CollectorRegistry()
        registry = self.registry
        self.requests = Counter(
            "placement_http_requests",
            "Requests answered, by route template, method, status and microversion.",
            REQUEST_LABELS,
            registry=registry,
        )
        self.latency = Histogram(
            "placement_http_request_duration_seconds",
            "Seconds from a request's arrival to its answer.",
            REQUEST_LABELS,
            buckets=LATENCY_BUCKETS,
            registry=registry,
        )
        self.db_retries = Counter(
            "placement_db_retries",
            "Transactions run again after a deadlock, a serialization failure, "
            "a lock that could not be had, a lost connection, or a provider "
            "changed under an allocation write.",
            ("route", "reason"),
            registry=registry,
        )
        self.holds = Counter(
            "placement_holds",
            "Holds (1.51) created, confirmed (by POST .../confirm or a write "
            "without hold) and expired (their allocations freed by a sweep).",
            ("event",),
            registry=registry,
        )
        self.conflicts = Counter(
            "placement_generation_conflicts",
            "409 answers for a provider or consumer generation that changed "
            "under the request (placement.concurrent_update).",
            ("route",),
            registry=registry,
        )
        self.candidates = Histogram(
            "placement_allocation_candidates_returned",
            "Allocation requests in a GET /allocation_candidates answer, by the "
            "number of request groups and whether the trees searched were nested.",
            CANDIDATE_LABELS,
            buckets=COUNT_BUCKETS,
            registry=registry,
        )
        self.candidates_latency = Histogram(
            "placement_allocation_candidates_duration_seconds",
            "Seconds spent finding the candidates of one answer (its database reads included).",
            CANDIDATE_LABELS,
            buckets=LATENCY_BUCKETS,
            registry=registry,
        )
        self.trees_pruned = Histogram(
            "placement_allocation_candidates_trees_pruned",
            "Trees the candidates walk entered and left without a candidate "
            "(the search loaded them, the merge rules ruled them out).",
            CANDIDATE_LABELS,
            buckets=COUNT_BUCKETS,
            registry=registry,
        )
        self.pool_in_use = Gauge(
            "placement_db_connections_in_use",
            "Database connections checked out of the pool, summed over the live workers.",
            registry=registry,
            multiprocess_mode="livesum",
        )
        # The running release, as Prometheus' *_build_info convention has it
        # (not in the root document, which stays upstream's byte for byte).
        self.build_info = Gauge(
            "placement_svc_build_info",
            "Always 1; the labels name the placement-svc release serving.",
            ("version",),
            registry=registry,
            multiprocess_mode="max",
        )
        self.build_info.labels(release()).set(1)
        if engine is not None:
            self._watch_pool(engine)

    def _watch_pool(self, engine) -> None:
        if not self.shared:
            self.pool_in_use.set_function(lambda: engine.pool.checkedout())
            return
        # One application per process here: follow the pool as it lends.
        event.listen(engine, "checkout", lambda *_args: self.pool_in_use.inc())
        event.listen(engine, "checkin", lambda *_args: self.pool_in_use.dec())

    def exposition(self, accept: str | None) -> tuple[bytes, str]:
        """The scrape: the text format (or OpenMetrics, when asked for) and its
        content type."""
        encoder, content_type = exposition.choose_encoder(accept or "")
        if self.shared:
            registry = CollectorRegistry()
            multiprocess.MultiProcessCollector(registry)
        else:
            registry = self.registry
        return encoder(registry), content_type


def release() -> str:
    try:
        return importlib.metadata.version("placement-svc")
    except importlib.metadata.PackageNotFoundError:  # run from a source tree
        return "unknown"


def routes_of(templates) -> falcon.routing.CompiledRouter:
    router = falcon.routing.CompiledRouter()
    for template in templates:
        router.add_route(template, object())
    return router


class Instrument:
    """The outermost layer: times and counts every request by its route."""

    def __init__(self, application, metrics: Metrics, templates):
        self.application = application
        self.metrics = metrics
        self.router = routes_of(templates)

    def route(self, path: str) -> str:
        found = self.router.find(path or "/")
        return found[3] if found else UNMATCHED

    def __call__(self, environ, start_response):
        started = perf_counter()
        route = self.route(environ.get("PATH_INFO", ""))
        token = CURRENT.set(Current(self.metrics, route))
        answered = ["500"]

        def noting_status(status, headers, exc_info=None):
            answered[0] = status[:3]
            return start_response(status, headers, exc_info)

        def count(_sent: int = 0) -> None:
            self._count(environ, route, answered[0], perf_counter() - started)

        try:
            body = self.application(environ, noting_status)
        except BaseException:
            count()
            raise
        finally:
            CURRENT.reset(token)
        if streaming.streamed(body):  # its latency ends with its last byte
            return streaming.when_sent(body, count)
        count()
        return body

    def _count(self, environ, route: str, status: str, elapsed: float) -> None:
        method = environ.get("REQUEST_METHOD", "")
        version = environ.get(ENV_MICROVERSION)
        labels = (
            route,
            method if method in METHODS else "other",
            status,
            f"{version.major}.{version.minor}" if version else "none",
        )
        self.metrics.requests.labels(*labels).inc()
        self.metrics.latency.labels(*labels).observe(elapsed)
        if status == "409" and environ.get(ENV_ERROR_CODE) == errors.CONCURRENT_UPDATE:
            self.metrics.conflicts.labels(route).inc()


# -- what the layers inside report ------------------------------------------


def db_retry(reason: str) -> None:
    """A unit of work runs again (db/engine.py's retry hook)."""
    current = CURRENT.get()
    if current is not None:
        current.metrics.db_retries.labels(current.route, reason).inc()


def hold_events(events: dict[str, int]) -> None:
    """What a committed transaction did to holds (db/engine.py's hook)."""
    current = CURRENT.get()
    if current is not None:
        for event, count in events.items():
            current.metrics.holds.labels(event).inc(count)


def candidates_answered(groups: int, nested: bool, returned: int, pruned: int, seconds: float):
    """One GET /allocation_candidates answer: its size, its time, the trees pruned."""
    current = CURRENT.get()
    if current is None:
        return
    labels = (str(groups) if groups < 5 else "5+", "nested" if nested else "flat")
    current.metrics.candidates.labels(*labels).observe(returned)
    current.metrics.candidates_latency.labels(*labels).observe(seconds)
    current.metrics.trees_pruned.labels(*labels).observe(pruned)


class Scrape:
    """GET /metrics, behind the API's authentication and policy."""

    def __init__(self, metrics: Metrics):
        self.metrics = metrics

    def show(self, req, resp):
        req.context.placement.can(policies.METRICS)
        body, content_type = self.metrics.exposition(req.get_header("Accept"))
        resp.status = 200
        resp.content_type = content_type
        resp.data = body
