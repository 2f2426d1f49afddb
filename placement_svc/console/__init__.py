"""GET /console: the operator's console, a page of the service's own.

The console is a set of static files shipped in this package
(``assets/``): an HTML page, its style sheet and its ES modules. Nothing is
built on the user's machine and nothing is fetched from anywhere but the
service. The page reads the cloud through the public API, with the caller's
token, so policy decides what each person sees; the files themselves carry
no data and need no token, so this application is mounted outside
authentication (``app.create_app``).

URLs: ``/console`` is the page; ``/console/NAME`` is one of the files in
``assets/`` (exactly those names: nothing else is looked up on disk). Only
GET and HEAD. Every answer carries a strict Content-Security-Policy (no
inline script or style, no other origin) and a strong ETag, compared as the
API's conditional reads compare theirs (http/conditional.py).
"""

from __future__ import annotations

import json
import uuid
from importlib import resources

from placement_svc import errors
from placement_svc.http import conditional
from placement_svc.http.middleware import ENV_REQUEST_ID

PATH = "/console"
PAGE = "index.html"
# The console's URLs as the metrics label them (operating/metrics.py).
TEMPLATES = (PATH, PATH + "/{name}")

# What the page may do: its own scripts, styles and API only. No inline
# script or style, no eval, no frames, no form posts elsewhere.
CONTENT_SECURITY_POLICY = (
    "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
    "connect-src 'self'; font-src 'self'; base-uri 'none'; form-action 'self'; "
    "frame-ancestors 'none'"
)
SECURITY_HEADERS = (
    ("Content-Security-Policy", CONTENT_SECURITY_POLICY),
    ("X-Content-Type-Options", "nosniff"),
    ("Referrer-Policy", "no-referrer"),
    ("X-Frame-Options", "DENY"),
    # Revalidated every time (a 304 when unchanged): an upgraded service
    # never runs an old page against its new API.
    ("Cache-Control", "no-cache"),
)
MEDIA_TYPES = {
    ".html": "text/html; charset=UTF-8",
    ".css": "text/css; charset=UTF-8",
    ".js": "text/javascript; charset=UTF-8",
    ".svg": "image/svg+xml",
    ".png": "image/png",
    ".txt": "text/plain; charset=UTF-8",
    ".json": "application/json",
}


def _assets() -> dict[str, bytes]:
    """Every file shipped in assets/, by name."""
    folder = resources.files(__package__).joinpath("assets")
    found = {}
    for item in folder.iterdir():
        suffix = "." + item.name.rsplit(".", 1)[-1] if "." in item.name else ""
        if item.is_file() and suffix in MEDIA_TYPES:
            found[item.name] = item.read_bytes()
    return found


class Application:
    """WSGI: the console's page and files. ``conf`` tells the page how the
    service authenticates (keystone: a token; noauth2: a user name) and the
    newest microversion served, so it asks only for what is there."""

    def __init__(self, conf):
        self.files = _assets()
        self.auth = conf.api.auth_strategy
        self._pages: dict[str, bytes] = {}  # the page, per mount prefix

    def page(self, prefix: str) -> bytes:
        """index.html with the mount prefix and the auth strategy filled in:
        the only per-deployment facts the page needs, neither of them data."""
        found = self._pages.get(prefix)
        if found is None:
            text = self.files[PAGE].decode("utf-8")
            text = text.replace("{{PREFIX}}", _attribute(prefix))
            text = text.replace("{{AUTH}}", _attribute(self.auth))
            found = self._pages[prefix] = text.encode("utf-8")
        return found

    def wanted(self, path: str) -> str | None:
        """The file a PATH_INFO under /console names, or None."""
        if path in (PATH, PATH + "/"):
            return PAGE
        name = path[len(PATH) + 1 :]
        if name in self.files and name != PAGE:
            return name
        return None

    def __call__(self, environ, start_response):
        method = environ.get("REQUEST_METHOD", "GET")
        if method not in ("GET", "HEAD"):
            return _error(environ, start_response, errors.MethodNotAllowed(method, ["GET", "HEAD"]))
        name = self.wanted(environ.get("PATH_INFO", ""))
        if name is None:
            return _error(environ, start_response, errors.NotFound("The console has no such file."))
        if name == PAGE:
            body = self.page(environ.get("SCRIPT_NAME", ""))
        else:
            body = self.files[name]
        etag = conditional.etag(body)
        headers = [*SECURITY_HEADERS, ("ETag", etag)]
        if conditional.matches(environ.get("HTTP_IF_NONE_MATCH", ""), etag):
            start_response("304 Not Modified", headers)
            return [b""]
        suffix = "." + name.rsplit(".", 1)[-1]
        headers += [("Content-Type", MEDIA_TYPES[suffix]), ("Content-Length", str(len(body)))]
        start_response("200 OK", headers)
        return [b""] if method == "HEAD" else [body]


def is_console(path: str) -> bool:
    return path == PATH or path.startswith(PATH + "/")


class Mount:
    """``console`` answers /console and what is under it; ``application``
    every other path."""

    def __init__(self, application, console: Application):
        self.application, self.console = application, console

    def __call__(self, environ, start_response):
        if is_console(environ.get("PATH_INFO", "")):
            return self.console(environ, start_response)
        return self.application(environ, start_response)


def _attribute(text: str) -> str:
    """``text`` safe inside a double-quoted HTML attribute."""
    return (
        text.replace("&", "&amp;").replace('"', "&quot;").replace("<", "&lt;").replace(">", "&gt;")
    )


def _error(environ, start_response, error: errors.PlacementError):
    request_id = environ.get(ENV_REQUEST_ID) or f"req-{uuid.uuid4()}"
    body = json.dumps(errors.error_body(error, request_id, with_code=False)).encode("utf-8")
    headers = [
        *SECURITY_HEADERS,
        ("Content-Type", "application/json"),
        ("Content-Length", str(len(body))),
    ]
    headers += list(error.headers.items())
    start_response(f"{error.status} {error.title}", headers)
    return [body]
