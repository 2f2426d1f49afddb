"""/allocations, /allocations/{consumer_uuid} and /resource_providers/{uuid}/allocations."""

from __future__ import annotations

from placement_svc.policies.base import ADMIN_OR_SERVICE, api_rule

ALLOC_MANAGE = "placement:allocations:manage"
ALLOC_LIST = "placement:allocations:list"
ALLOC_UPDATE = "placement:allocations:update"
ALLOC_DELETE = "placement:allocations:delete"
RP_ALLOC_LIST = "placement:resource_providers:allocations:list"

rules = [
    api_rule(
        ALLOC_MANAGE,
        ADMIN_OR_SERVICE,
        "Write the allocations of several consumers at once.",
    ),
    api_rule(
        ALLOC_LIST,
        ADMIN_OR_SERVICE,
        "Show a consumer's allocations, or (from microversion 1.46, GET "
        "/allocations) those of several consumers at once: named by uuid, or "
        "every consumer holding allocations against given providers or a tree.",
    ),
    api_rule(ALLOC_UPDATE, ADMIN_OR_SERVICE, "Replace a consumer's allocations."),
    api_rule(ALLOC_DELETE, ADMIN_OR_SERVICE, "Delete a consumer's allocations."),
    api_rule(
        RP_ALLOC_LIST,
        ADMIN_OR_SERVICE,
        "List the allocations made against a resource provider; from "
        "microversion 1.46 GET /allocations?resource_provider_uuid= and "
        "?in_tree= need it too, beside placement:allocations:list.",
    ),
]


def list_rules():
    return rules
