"""/resource_classes and /resource_classes/{name}."""

from __future__ import annotations

from placement_svc.policies.base import ADMIN_OR_SERVICE, api_rule

LIST = "placement:resource_classes:list"
CREATE = "placement:resource_classes:create"
SHOW = "placement:resource_classes:show"
UPDATE = "placement:resource_classes:update"
DELETE = "placement:resource_classes:delete"

rules = [
    api_rule(LIST, ADMIN_OR_SERVICE, "List resource classes."),
    api_rule(CREATE, ADMIN_OR_SERVICE, "Create a custom resource class."),
    api_rule(SHOW, ADMIN_OR_SERVICE, "Show one resource class."),
    api_rule(
        UPDATE,
        ADMIN_OR_SERVICE,
        "Rename a custom resource class (before 1.7) or make sure it exists (1.7+).",
    ),
    api_rule(DELETE, ADMIN_OR_SERVICE, "Delete a custom resource class."),
]


def list_rules():
    return rules
