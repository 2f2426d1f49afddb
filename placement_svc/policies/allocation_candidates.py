"""/allocation_candidates."""

from __future__ import annotations

from placement_svc.policies.base import ADMIN_OR_SERVICE, api_rule

LIST = "placement:allocation_candidates:list"
EXPLAIN = "placement:allocation_candidates:explain"
CAPACITY = "placement:allocation_candidates:capacity"

rules = [
    api_rule(
        LIST,
        ADMIN_OR_SERVICE,
        "List the ways a request for resources could be satisfied.",
    ),
    api_rule(
        EXPLAIN,
        ADMIN_OR_SERVICE,
        "Explain an allocation candidates query: what each filter and rule left, "
        "and the trees that almost fit (placement-svc's own, 1.44).",
    ),
    api_rule(
        CAPACITY,
        ADMIN_OR_SERVICE,
        "Count how many copies of an allocation candidates query fit, per tree "
        "(placement-svc's own, 1.44).",
    ),
]


def list_rules():
    return rules
