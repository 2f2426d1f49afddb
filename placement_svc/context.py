"""The request context: who is asking, at which microversion, under which request id.

Built once per request from the headers the auth layer leaves (noauth2 or
keystonemiddleware's X-User-Id / X-Project-Id / X-Roles ...). It carries what
oslo.policy needs (``to_policy_values``) so policy enforcement can be added
without changing handlers' view of the caller.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from microversion_parse import Version

from placement_svc import microversion as mv


def _header(environ, name: str) -> str | None:
    value = environ.get("HTTP_" + name.upper().replace("-", "_"))
    return value if value else None


@dataclass
class RequestContext:
    request_id: str
    user_id: str | None = None
    project_id: str | None = None
    domain_id: str | None = None
    roles: list[str] = field(default_factory=list)
    system_scope: str | None = None
    version: Version = mv.MIN_VERSION

    @classmethod
    def from_environ(cls, environ, request_id: str) -> RequestContext:
        roles = _header(environ, "X-Roles") or ""
        return cls(
            request_id=request_id,
            user_id=_header(environ, "X-User-Id") or _header(environ, "X-User"),
            project_id=_header(environ, "X-Project-Id") or _header(environ, "X-Tenant-Id"),
            domain_id=_header(environ, "X-Project-Domain-Id"),
            roles=[r.strip().lower() for r in roles.split(",") if r.strip()],
            system_scope=_header(environ, "OpenStack-System-Scope"),
        )

    @property
    def is_admin(self) -> bool:
        return "admin" in self.roles

    def to_policy_values(self) -> dict:
        """The credentials dict oslo.policy rules are checked against."""
        return {
            "user_id": self.user_id,
            "project_id": self.project_id,
            "domain_id": self.domain_id,
            "roles": list(self.roles),
            "system_scope": self.system_scope,
            "is_admin_project": True,
        }
