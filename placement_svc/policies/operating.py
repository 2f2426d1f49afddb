"""GET /metrics: placement-svc's own, not an API operation upstream has.

Admins only by default, since the counts say what the cloud does (how many
allocations are written, how often candidates come back empty). A
Prometheus server that scrapes with an admin token needs nothing more; to
let any authenticated caller scrape, set ``"placement:metrics": "@"`` in
the policy file.
"""

from __future__ import annotations

from placement_svc.policies.base import ADMIN, api_rule

METRICS = "placement:metrics"

rules = [
    api_rule(
        METRICS,
        ADMIN,
        "Read the service's Prometheus metrics (placement-svc's own).",
        "GET /metrics",
    ),
]


def list_rules():
    return rules
