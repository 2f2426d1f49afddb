"""The front doors: noauth2 for tests and the quick start, keystone for real clouds.

Both only establish identity headers; the context middleware in app.py turns
them into a RequestContext and answers 401 (in the one error format) when a
request other than the version document carries no user.
"""

from __future__ import annotations

ROOT_PATHS = ("/", "")
IDENTITY_HEADERS = ("HTTP_X_USER_ID", "HTTP_X_PROJECT_ID", "HTTP_X_TENANT_ID", "HTTP_X_ROLES")


class NoAuthMiddleware:
    """Trust ``X-Auth-Token: user[:project]``, as upstream's noauth2 does.

    The user ``admin`` gets the ``admin`` role; an ``X-Roles`` header, when
    present, is taken as the role list instead. Identity headers a client
    sent itself are dropped first, so only the token decides who you are.
    """

    def __init__(self, application):
        self.application = application

    def __call__(self, environ, start_response):
        roles = environ.get("HTTP_X_ROLES")
        for key in IDENTITY_HEADERS:
            environ.pop(key, None)
        token = environ.get("HTTP_X_AUTH_TOKEN")
        if token is not None:
            user_id, _sep, project_id = token.partition(":")
            project_id = project_id or user_id
            if roles is None:
                roles = "admin" if user_id == "admin" else ""
            if user_id:
                environ["HTTP_X_USER_ID"] = user_id
            if project_id and not environ.get("HTTP_OPENSTACK_SYSTEM_SCOPE"):
                environ["HTTP_X_PROJECT_ID"] = project_id
            environ["HTTP_X_ROLES"] = roles
        return self.application(environ, start_response)


def keystone_middleware(application, conf):
    """Wrap ``application`` in keystonemiddleware's auth_token; the root stays open."""
    try:
        from keystonemiddleware import auth_token
    except ImportError as exc:  # pragma: no cover - depends on the install
        raise RuntimeError(
            "[api] auth_strategy = keystone needs keystonemiddleware: "
            "pip install 'placement-svc[keystone]'"
        ) from exc

    protocol = auth_token.AuthProtocol(application, {"oslo_config_config": conf})

    def authenticate(environ, start_response):
        if environ.get("PATH_INFO", "") in ROOT_PATHS:
            return application(environ, start_response)
        return protocol(environ, start_response)

    return authenticate
