"""/reshaper: by default for services only (admins too under the legacy default)."""

from __future__ import annotations

from placement_svc.policies.base import SERVICE, api_rule

RESHAPE = "placement:reshaper:reshape"

rules = [
    api_rule(
        RESHAPE,
        SERVICE,
        "Move inventories and the allocations against them in one step.",
    ),
]


def list_rules():
    return rules
