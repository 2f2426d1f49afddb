"""The front doors: noauth2 for tests and the quick start, keystone for real clouds.

Both only establish identity headers; the context middleware (middleware.py) turns
them into a RequestContext and answers 401 (in the one error format) when a
request other than the version document carries no user.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING

from placement_svc import install
from placement_svc.http.wsgi_types import Environ, StartResponse, WSGIApp

if TYPE_CHECKING:
    from oslo_config import cfg

ROOT_PATHS = ("/", "")
# What a front door tells a caller it refused for want of credentials: the
# 401's message (the context middleware answers it).
ENV_MISSING_CREDENTIALS = "placement.missing_credentials"
NOAUTH2_NO_TOKEN = (
    "No x-auth-token header: with [api] auth_strategy = noauth2 its value names the "
    "caller, as 'user' or 'user:project' (x-auth-token: admin is an administrator)."
)
IDENTITY_HEADERS = (
    "HTTP_X_USER_ID",
    "HTTP_X_USER",
    "HTTP_X_PROJECT_ID",
    "HTTP_X_TENANT_ID",
    "HTTP_X_TENANT",
    "HTTP_X_ROLES",
)


class NoAuthMiddleware:
    """Trust ``X-Auth-Token: user[:project]``, as upstream's noauth2 does.

    Without the header, identity headers a client sent itself are dropped, so
    the request is a 401. With it, the token names the user (an empty token
    an empty user, whom policy then refuses: 403) and, unless the request is
    system scoped, the project; the user ``admin`` gets the ``admin`` role,
    and an ``X-Roles`` header, when present, is the role list instead. As
    upstream, a client's own ``X-Project-Id`` is left alone and wins over
    the token's project.
    """

    def __init__(self, application: WSGIApp) -> None:
        self.application = application

    def __call__(self, environ: Environ, start_response: StartResponse) -> Iterable[bytes]:
        token = environ.get("HTTP_X_AUTH_TOKEN")
        if token is None:
            for key in IDENTITY_HEADERS:
                environ.pop(key, None)
            environ[ENV_MISSING_CREDENTIALS] = NOAUTH2_NO_TOKEN
            return self.application(environ, start_response)
        user_id, _sep, project_id = token.partition(":")
        project_id = project_id or user_id
        if "HTTP_X_ROLES" not in environ:
            environ["HTTP_X_ROLES"] = "admin" if user_id == "admin" else ""
        environ["HTTP_X_USER_ID"] = user_id
        environ.pop("HTTP_X_USER", None)
        if not environ.get("HTTP_OPENSTACK_SYSTEM_SCOPE"):
            environ["HTTP_X_TENANT_ID"] = project_id
        return self.application(environ, start_response)


def keystone_middleware(application: WSGIApp, conf: cfg.ConfigOpts) -> WSGIApp:
    """Wrap ``application`` in keystonemiddleware's auth_token; the root stays open."""
    try:
        from keystonemiddleware import auth_token
    except ImportError as exc:  # pragma: no cover - depends on the install
        raise RuntimeError(
            "[api] auth_strategy = keystone needs keystonemiddleware: "
            + install.extra_command("keystone")
        ) from exc

    protocol = auth_token.AuthProtocol(application, {"oslo_config_config": conf})

    def authenticate(environ: Environ, start_response: StartResponse) -> Iterable[bytes]:
        if environ.get("PATH_INFO", "") in ROOT_PATHS:
            return application(environ, start_response)
        return protocol(environ, start_response)

    return authenticate
