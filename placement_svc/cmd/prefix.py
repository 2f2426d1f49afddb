"""``serve --prefix``: the API under a path, e.g. ``http://host:8778/placement/``."""

from __future__ import annotations

import falcon

from placement_svc import app, errors


class PrefixMount:
    """Serve ``application`` under a path prefix: the prefix moves from
    PATH_INFO to SCRIPT_NAME (so links carry it); other paths are a 404.

    The 404 comes from a falcon app of one sink whose errors go through the
    service's own error renderer, so it has the form (JSON, HTML or plain
    text, as the client accepts) of every other error: one error path.
    """

    def __init__(self, application, prefix: str):
        self.application = application
        self.prefix = prefix
        self.outside = _not_found_app(f"The service is at {prefix}/.")

    def __call__(self, environ, start_response):
        path = environ.get("PATH_INFO", "")
        if path == self.prefix or path.startswith(self.prefix + "/"):
            environ["SCRIPT_NAME"] = environ.get("SCRIPT_NAME", "") + self.prefix
            environ["PATH_INFO"] = path[len(self.prefix) :]
            return self.application(environ, start_response)
        return self.outside(environ, start_response)


def _not_found_app(detail: str) -> falcon.App:
    """A falcon app that answers every request with a 404 saying ``detail``."""

    def sink(req, resp, **_params):
        raise errors.NotFound(detail)

    def render(req, resp, error, _params):
        app.render_error(req, resp, error)

    outside = falcon.App(media_type="application/json")
    outside.add_sink(sink, prefix="")
    outside.add_error_handler(errors.PlacementError, render)
    return outside
