"""/traits, /traits/{name} and /resource_providers/{uuid}/traits."""

from __future__ import annotations

from placement_svc.policies.base import ADMIN_OR_SERVICE, api_rule

TRAITS_LIST = "placement:traits:list"
TRAITS_SHOW = "placement:traits:show"
TRAITS_UPDATE = "placement:traits:update"
TRAITS_DELETE = "placement:traits:delete"
RP_TRAIT_LIST = "placement:resource_providers:traits:list"
RP_TRAIT_UPDATE = "placement:resource_providers:traits:update"
RP_TRAIT_DELETE = "placement:resource_providers:traits:delete"

rules = [
    api_rule(TRAITS_LIST, ADMIN_OR_SERVICE, "List traits."),
    api_rule(TRAITS_SHOW, ADMIN_OR_SERVICE, "Check that a trait exists."),
    api_rule(TRAITS_UPDATE, ADMIN_OR_SERVICE, "Create a custom trait."),
    api_rule(TRAITS_DELETE, ADMIN_OR_SERVICE, "Delete a custom trait."),
    api_rule(RP_TRAIT_LIST, ADMIN_OR_SERVICE, "List a resource provider's traits."),
    api_rule(
        RP_TRAIT_UPDATE,
        ADMIN_OR_SERVICE,
        "Replace a resource provider's traits.",
    ),
    api_rule(
        RP_TRAIT_DELETE,
        ADMIN_OR_SERVICE,
        "Remove every trait from a resource provider.",
    ),
]


def list_rules():
    return rules
