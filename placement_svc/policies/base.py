"""The base rules every API rule refers to, and the deprecated legacy default.

Placement's API rules never name roles themselves: they say
``rule:admin_or_service_api`` and the like, so an operator can re-point a
whole family of operations by overriding one base rule in the policy file.

Until Wallaby every rule was ``role:admin``. That legacy default survives as
the deprecated rule of each base rule but ``admin_api``: with ``[oslo_policy]
enforce_new_defaults = False`` oslo.policy ORs it with the new check string,
so an admin keeps what it had (the reshaper, notably, which the new defaults
give to the service role alone).
"""

from __future__ import annotations

from oslo_policy import policy

ADMIN = "rule:admin_api"
SERVICE = "rule:service_api"
ADMIN_OR_SERVICE = "rule:admin_or_service_api"
ADMIN_OR_PROJECT_READER_OR_SERVICE = "rule:admin_or_project_reader_or_service_api"

# Rules that apply to project-scoped tokens only: a system- or
# domain-scoped token is refused whatever its roles.
PROJECT_SCOPE = ("project",)

# The legacy default, kept under the (odd but established) name
# "rule:admin_api", deprecated since Wallaby ('W').
LEGACY_ADMIN = policy.DeprecatedRule(
    name=ADMIN,
    check_str="role:admin",
    deprecated_reason=(
        "Placement's policies gained default roles (reader, member, service) "
        "and scope types; the old admin-only defaults are kept only while "
        "[oslo_policy] enforce_new_defaults is False."
    ),
    deprecated_since="W",
)

rules = [
    policy.RuleDefault(
        name="admin_api",
        check_str="role:admin",
        description="An administrator: the default for most of the API.",
        scope_types=list(PROJECT_SCOPE),
    ),
    policy.RuleDefault(
        name="service_api",
        check_str="role:service",
        description="A service user (nova, neutron, ...) talking to placement.",
        scope_types=list(PROJECT_SCOPE),
        deprecated_rule=LEGACY_ADMIN,
    ),
    policy.RuleDefault(
        name="admin_or_service_api",
        check_str="role:admin or role:service",
        description="An administrator or a service user: the default for most of the API.",
        scope_types=list(PROJECT_SCOPE),
        deprecated_rule=LEGACY_ADMIN,
    ),
    policy.RuleDefault(
        name="project_reader_api",
        check_str="role:reader and project_id:%(project_id)s",
        description="A reader of the project the request is about.",
        deprecated_rule=LEGACY_ADMIN,
    ),
    policy.RuleDefault(
        name="admin_or_project_reader_or_service_api",
        check_str="role:admin or rule:project_reader_api or role:service",
        description="An administrator, a service user, or a reader of the "
        "project the request is about.",
        scope_types=list(PROJECT_SCOPE),
        deprecated_rule=LEGACY_ADMIN,
    ),
]


def api_rule(name: str, check_str: str, description: str, *operations: str):
    """One API rule. The operations it guards ("METHOD /path") are what
    placement_svc/routes says; ``placement_svc.policy.list_rules`` documents
    the rule with them. Only a rule of a URL routes.py does not declare (the
    operating URLs) names its ``operations`` here."""
    if operations:
        return policy.DocumentedRuleDefault(
            name=name,
            check_str=check_str,
            description=description,
            operations=[
                {"method": method, "path": path}
                for method, path in (op.split(" ", 1) for op in operations)
            ],
            scope_types=list(PROJECT_SCOPE),
        )
    return policy.RuleDefault(
        name=name, check_str=check_str, description=description, scope_types=list(PROJECT_SCOPE)
    )


def list_rules():
    return rules
