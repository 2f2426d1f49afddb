"""/resource_providers/{uuid}/aggregates."""

from __future__ import annotations

from placement_svc.policies.base import ADMIN_OR_SERVICE, api_rule

LIST = "placement:resource_providers:aggregates:list"
UPDATE = "placement:resource_providers:aggregates:update"

rules = [
    api_rule(LIST, ADMIN_OR_SERVICE, "List the aggregates a resource provider is in."),
    api_rule(UPDATE, ADMIN_OR_SERVICE, "Set the aggregates a resource provider is in."),
]


def list_rules():
    return rules
