"""/resource_providers/{uuid}/inventories[/{resource_class}]."""

from __future__ import annotations

from placement_svc.policies.base import ADMIN_OR_SERVICE, api_rule

LIST = "placement:resource_providers:inventories:list"
CREATE = "placement:resource_providers:inventories:create"
SHOW = "placement:resource_providers:inventories:show"
UPDATE = "placement:resource_providers:inventories:update"
DELETE = "placement:resource_providers:inventories:delete"

rules = [
    api_rule(LIST, ADMIN_OR_SERVICE, "List a resource provider's inventories."),
    api_rule(CREATE, ADMIN_OR_SERVICE, "Add one inventory to a resource provider."),
    api_rule(SHOW, ADMIN_OR_SERVICE, "Show one inventory of a resource provider."),
    api_rule(
        UPDATE,
        ADMIN_OR_SERVICE,
        "Replace all of a resource provider's inventories, or change one.",
    ),
    api_rule(
        DELETE,
        ADMIN_OR_SERVICE,
        "Delete all of a resource provider's inventories, or one.",
    ),
]


def list_rules():
    return rules
