"""The labels requests are counted by, and what the inner layers report.

In one process (no PROMETHEUS_MULTIPROC_DIR) each Metrics has a registry of
its own, read here with get_sample_value.
"""

from __future__ import annotations

from placement_svc.operating import metrics

TEMPLATES = [
    "/",
    "/resource_providers",
    "/resource_providers/{uuid}",
    "/allocations/{consumer_uuid}",
]


def _call(application, method: str, path: str) -> str:
    answered = []
    environ = {"REQUEST_METHOD": method, "PATH_INFO": path}
    application(environ, lambda status, headers, exc_info=None: answered.append(status))
    return answered[0]


def _app(inner):
    counts = metrics.Metrics()
    return counts, metrics.Instrument(inner, counts, TEMPLATES)


def _answer(status: str, then=None):
    def inner(environ, start_response):
        if then is not None:
            then(environ)
        start_response(status, [])
        return [b""]

    return inner


def _requests(counts, route, method="GET", status="200", microversion="none"):
    return counts.registry.get_sample_value(
        "placement_http_requests_total",
        {"route": route, "method": method, "status": status, "microversion": microversion},
    )


def test_requests_are_counted_by_route_template_never_by_path():
    counts, application = _app(_answer("200 OK"))
    for uuid in ("6a7e7f8c-0b1d-4c55-9a0e-1f6f3c9d2b11", "0c8f3f02-5b7c-4bb1-8d0c-6f51d6a3c8f2"):
        _call(application, "GET", f"/resource_providers/{uuid}")
    _call(application, "GET", "/no/such/thing")
    _call(application, "BREW", "/")
    assert _requests(counts, "/resource_providers/{uuid}") == 2
    assert _requests(counts, metrics.UNMATCHED) == 1
    assert _requests(counts, "/", method="other") == 1
    exposed = counts.exposition(None)[0].decode()
    assert "6a7e7f8c" not in exposed and "BREW" not in exposed


def test_a_generation_conflict_is_a_409_with_its_code():
    def concurrent(environ):
        environ[metrics.ENV_ERROR_CODE] = "placement.concurrent_update"

    def other(environ):
        environ[metrics.ENV_ERROR_CODE] = "placement.inventory.inuse"

    counts, application = _app(_answer("409 Conflict", concurrent))
    _call(application, "PUT", "/allocations/6a7e7f8c-0b1d-4c55-9a0e-1f6f3c9d2b11")
    _, other_app = counts, metrics.Instrument(_answer("409 Conflict", other), counts, TEMPLATES)
    _call(other_app, "PUT", "/allocations/6a7e7f8c-0b1d-4c55-9a0e-1f6f3c9d2b11")
    conflicts = counts.registry.get_sample_value(
        "placement_generation_conflicts_total", {"route": "/allocations/{consumer_uuid}"}
    )
    assert conflicts == 1


def test_retries_and_candidates_are_reported_to_the_request_being_served():
    def work(_environ):
        metrics.db_retry("deadlock")
        metrics.db_retry("deadlock")
        metrics.candidates_answered(groups=7, nested=True, returned=12, pruned=3, seconds=0.02)

    counts, application = _app(_answer("200 OK", work))
    _call(application, "GET", "/resource_providers")
    registry = counts.registry
    assert (
        registry.get_sample_value(
            "placement_db_retries_total", {"route": "/resource_providers", "reason": "deadlock"}
        )
        == 2
    )
    shape = {"groups": "5+", "trees": "nested"}
    assert registry.get_sample_value("placement_allocation_candidates_returned_sum", shape) == 12
    assert registry.get_sample_value("placement_allocation_candidates_trees_pruned_sum", shape) == 3
    # Outside a request (the command line's explain, say) nothing is counted, nothing fails.
    metrics.db_retry("deadlock")
    assert metrics.CURRENT.get() is None


def test_an_exception_inside_is_counted_as_a_500():
    def failing(environ, start_response):
        raise RuntimeError("boom")

    counts, application = _app(failing)
    try:
        _call(application, "GET", "/")
    except RuntimeError:
        pass
    assert _requests(counts, "/", status="500") == 1


def test_a_streamed_answer_is_counted_when_the_server_closes_it():
    """Its latency runs to its last byte (or to the client going away)."""

    def streaming(environ, start_response):
        start_response("200 OK", [])
        return iter([b"[", b"]"])

    counts, application = _app(streaming)
    environ = {"REQUEST_METHOD": "GET", "PATH_INFO": "/"}
    body = application(environ, lambda status, headers, exc_info=None: None)
    assert _requests(counts, "/") is None
    assert b"".join(body) == b"[]"
    assert _requests(counts, "/") == 1
    gone = application(environ, lambda status, headers, exc_info=None: None)
    gone.close()  # before any byte: counted once all the same
    gone.close()
    assert _requests(counts, "/") == 2
