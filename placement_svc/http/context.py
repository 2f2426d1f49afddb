"""The request context: who is asking, at which microversion, under which request id.

Built once per request from the headers the auth layer leaves (noauth2 or
keystonemiddleware's X-User-Id / X-Project-Id / X-Roles ...), read as
oslo.context reads them, so ``to_policy_values`` gives oslo.policy the same
credentials upstream Placement's context gives it. ``can`` is the one
policy check a handler makes.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from microversion_parse import Version

from placement_svc import microversion as mv
from placement_svc import policy
from placement_svc.http.wsgi_types import Environ

if TYPE_CHECKING:
    from oslo_policy.policy import Enforcer


def _header(environ: Environ, name: str, keep_empty: bool = False) -> str | None:
    value = environ.get("HTTP_" + name.upper().replace("-", "_"))
    return value if value or (keep_empty and value is not None) else None


def _first(environ: Environ, *names: str, keep_empty: bool = False) -> str | None:
    for name in names:
        value = _header(environ, name, keep_empty)
        if value is not None:
            return value
    return None


def _roles(value: str | None) -> list[str]:
    return [role.strip() for role in value.split(",")] if value else []


@dataclass
class RequestContext:
    request_id: str
    user_id: str | None = None
    project_id: str | None = None
    # The domain of a domain-scoped token (X-Domain-Id), not a project's domain.
    domain_id: str | None = None
    user_domain_id: str | None = None
    project_domain_id: str | None = None
    roles: list[str] = field(default_factory=list)
    system_scope: str | None = None
    is_admin_project: bool = True
    service_user_id: str | None = None
    service_user_domain_id: str | None = None
    service_project_id: str | None = None
    service_project_domain_id: str | None = None
    service_roles: list[str] = field(default_factory=list)
    version: Version = mv.MIN_VERSION
    enforcer: Enforcer | None = field(default=None, repr=False, compare=False)

    @classmethod
    def from_environ(
        cls, environ: Environ, request_id: str, enforcer: Enforcer | None = None
    ) -> RequestContext:
        return cls(
            request_id=request_id,
            # Present but empty is a user (noauth2's empty token), as oslo.context.
            user_id=_first(environ, "X-User-Id", "X-User", keep_empty=True),
            project_id=_first(environ, "X-Project-Id", "X-Tenant-Id", "X-Tenant"),
            domain_id=_header(environ, "X-Domain-Id"),
            user_domain_id=_header(environ, "X-User-Domain-Id"),
            project_domain_id=_header(environ, "X-Project-Domain-Id"),
            roles=_roles(_first(environ, "X-Roles", "X-Role")),
            system_scope=_header(environ, "OpenStack-System-Scope"),
            # Absent means true, so that legacy rules keep working (as oslo.context).
            is_admin_project=(environ.get("HTTP_X_IS_ADMIN_PROJECT") or "true").lower() == "true",
            service_user_id=_header(environ, "X-Service-User-Id"),
            service_user_domain_id=_header(environ, "X-Service-User-Domain-Id"),
            service_project_id=_header(environ, "X-Service-Project-Id"),
            service_project_domain_id=_header(environ, "X-Service-Project-Domain-Id"),
            service_roles=_roles(_header(environ, "X-Service-Roles")),
            enforcer=enforcer,
        )

    def to_policy_values(self) -> dict[str, Any]:
        """The credentials dict oslo.policy rules are checked against."""
        return {
            "user_id": self.user_id,
            "user_domain_id": self.user_domain_id,
            "system_scope": self.system_scope,
            "domain_id": self.domain_id,
            "project_id": self.project_id,
            "project_domain_id": self.project_domain_id,
            "roles": list(self.roles),
            "is_admin_project": self.is_admin_project,
            "service_user_id": self.service_user_id,
            "service_user_domain_id": self.service_user_domain_id,
            "service_project_id": self.service_project_id,
            "service_project_domain_id": self.service_project_domain_id,
            "service_roles": list(self.service_roles),
        }

    def can(self, action: str, target: dict[str, Any] | None = None) -> None:
        """Raise errors.Forbidden ("Policy does not allow <action> to be
        performed.") unless policy allows ``action`` on ``target``; the
        target defaults to the caller's own project and user, as upstream's."""
        if target is None:
            target = {"project_id": self.project_id, "user_id": self.user_id}
        policy.authorize(self.enforcer, action, target, self.to_policy_values())
