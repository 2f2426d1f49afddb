"""Every operation of the API, declared once.

One ``Route`` per URL template (in ``records.py``; the routes of each family
of URLs in a module of their own), one ``Operation`` per method: the handler
that serves it, the microversion it appears at, the schemas of its query
and body, the policy rule that guards it, what it answers and why it may
fail. Everything else is derived from this table:

* routing, the 404 before a URL of our own appears and the 405 naming the
  methods a URL allows at the request's microversion (app.py);
* the version check, the schemas a handler validates with and the rule it
  authorizes by (``http/reading.py``: ``check_version``, ``read_body``,
  ``declared_query``, ``authorize`` read the request's operation); a
  handler says *when* each check happens (upstream's order differs from
  one operation to the next), this table says *what* it checks;
* the conditional reads, ETag and 304 (``http/conditional.py``: ``etag``);
* the policy rules' "METHOD path" operations (``policy.list_rules``);
* the OpenAPI document (``operating/openapi.py``) and the metrics' route
  labels (``operating/metrics.py``).

A new endpoint is one ``Operation`` here (with a new ``Route`` for a new
URL), one handler method, and one policy rule in ``placement_svc/policies``.
"""

from __future__ import annotations

from collections.abc import Iterator

from placement_svc.routes import catalogue, consumers, providers
from placement_svc.routes.records import PATH_PARAMETERS, Operation, Route

__all__ = ["PATH_PARAMETERS", "ROUTES", "Operation", "Route", "by_policy", "operations"]

ROUTES: tuple[Route, ...] = (*catalogue.ROUTES, *providers.ROUTES, *consumers.ROUTES)


def operations() -> Iterator[tuple[Route, Operation]]:
    """Every (route, operation) pair, in the table's order."""
    for route in ROUTES:
        for operation in route.operations:
            yield route, operation


def by_policy() -> dict[str, list[dict[str, str]]]:
    """rule name -> the operations it guards, as oslo.policy documents them."""
    found: dict[str, list[dict[str, str]]] = {}
    for route, operation in operations():
        if operation.policy is not None:
            found.setdefault(operation.policy, []).append(
                {"method": operation.method, "path": route.template}
            )
    return found


def templates() -> list[str]:
    return [route.template for route in ROUTES]
