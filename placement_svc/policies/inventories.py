"""/resource_providers/{uuid}/inventories[/{resource_class}]."""

from __future__ import annotations

from placement_svc.policies.base import ADMIN_OR_SERVICE, api_rule

LIST = "placement:resource_providers:inventories:list"
CREATE = "placement:resource_providers:inventories:create"
SHOW = "placement:resource_providers:inventories:show"
UPDATE = "placement:resource_providers:inventories:update"
DELETE = "placement:resource_providers:inventories:delete"

ALL = "/resource_providers/{uuid}/inventories"
ONE = ALL + "/{resource_class}"

rules = [
    api_rule(LIST, ADMIN_OR_SERVICE, "List a resource provider's inventories.", f"GET {ALL}"),
    api_rule(CREATE, ADMIN_OR_SERVICE, "Add one inventory to a resource provider.", f"POST {ALL}"),
    api_rule(SHOW, ADMIN_OR_SERVICE, "Show one inventory of a resource provider.", f"GET {ONE}"),
    api_rule(
        UPDATE,
        ADMIN_OR_SERVICE,
        "Replace all of a resource provider's inventories, or change one.",
        f"PUT {ALL}",
        f"PUT {ONE}",
    ),
    api_rule(
        DELETE,
        ADMIN_OR_SERVICE,
        "Delete all of a resource provider's inventories, or one.",
        f"DELETE {ALL}",
        f"DELETE {ONE}",
    ),
]


def list_rules():
    return rules
