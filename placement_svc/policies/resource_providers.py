"""/resource_providers and /resource_providers/{uuid}."""

from __future__ import annotations

from placement_svc.policies.base import ADMIN_OR_SERVICE, api_rule

LIST = "placement:resource_providers:list"
CREATE = "placement:resource_providers:create"
SHOW = "placement:resource_providers:show"
UPDATE = "placement:resource_providers:update"
DELETE = "placement:resource_providers:delete"

rules = [
    api_rule(LIST, ADMIN_OR_SERVICE, "List resource providers."),
    api_rule(CREATE, ADMIN_OR_SERVICE, "Create a resource provider."),
    api_rule(SHOW, ADMIN_OR_SERVICE, "Show one resource provider."),
    api_rule(UPDATE, ADMIN_OR_SERVICE, "Rename or re-parent a resource provider."),
    api_rule(DELETE, ADMIN_OR_SERVICE, "Delete a resource provider."),
]


def list_rules():
    return rules
