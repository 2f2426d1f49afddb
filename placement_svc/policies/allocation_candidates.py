"""/allocation_candidates."""

from __future__ import annotations

from placement_svc.policies.base import ADMIN_OR_SERVICE, api_rule

LIST = "placement:allocation_candidates:list"

rules = [
    api_rule(
        LIST,
        ADMIN_OR_SERVICE,
        "List the ways a request for resources could be satisfied.",
        "GET /allocation_candidates",
    ),
]


def list_rules():
    return rules
