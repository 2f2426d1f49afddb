"""/resource_providers/{uuid}/usages and /usages.

GET /usages is the one rule a project's own reader passes by default: the
target is the project named in the query string, so a reader (or member)
sees its own project's usage and nobody else's; admins and services see any.
"""

from __future__ import annotations

from placement_svc.policies.base import (
    ADMIN_OR_PROJECT_READER_OR_SERVICE,
    ADMIN_OR_SERVICE,
    api_rule,
)

PROVIDER_USAGES = "placement:resource_providers:usages"
TOTAL_USAGES = "placement:usages"

rules = [
    api_rule(
        PROVIDER_USAGES,
        ADMIN_OR_SERVICE,
        "Show how much of each resource class of a provider is used.",
    ),
    api_rule(
        TOTAL_USAGES,
        ADMIN_OR_PROJECT_READER_OR_SERVICE,
        "Show the total usage of a project (or of one user in it).",
    ),
]


def list_rules():
    return rules
