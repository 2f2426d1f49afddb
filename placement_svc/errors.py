"""The one error path: exceptions that know their HTTP status and error code.

Every error the service answers is rendered by ``error_body`` into
upstream's format, ``{"errors": [{"status", "title", "detail",
"request_id", "code"}]}``; ``code`` appears from microversion 1.23.
"""

from __future__ import annotations

import html
import re
from http import HTTPStatus

# Error codes, as upstream names them (placement/errors.py there).
DEFAULT = "placement.undefined_code"
INVENTORY_INUSE = "placement.inventory.inuse"
CONCURRENT_UPDATE = "placement.concurrent_update"
DUPLICATE_NAME = "placement.duplicate_name"
PROVIDER_IN_USE = "placement.resource_provider.inuse"
PROVIDER_CANNOT_DELETE_PARENT = "placement.resource_provider.cannot_delete_parent"
RESOURCE_PROVIDER_NOT_FOUND = "placement.resource_provider.not_found"
ILLEGAL_DUPLICATE_QUERYPARAM = "placement.query.duplicate_key"
QUERYPARAM_BAD_VALUE = "placement.query.bad_value"
QUERYPARAM_MISSING_VALUE = "placement.query.missing_value"
HOLD_EXPIRED = "placement.hold.expired"  # placement-svc's own (1.51)

# The first sentence of each error's detail: what webob says upstream.
EXPLANATIONS = {
    400: "The server could not comply with the request since it is either "
    "malformed or otherwise incorrect.",
    401: "This server could not verify that you are authorized to access the "
    "document you requested. Either you supplied the wrong credentials (e.g., bad "
    "password), or your browser does not understand how to supply the credentials "
    "required.",
    403: "Access was denied to this resource.",
    404: "The resource could not be found.",
    405: "The method specified is not allowed for this resource.",
    406: "The resource could not be generated that was acceptable to your browser.",
    408: "Server timeout waiting for the HTTP request from the client.",
    409: "There was a conflict when trying to complete your request.",
    413: "The request is larger than the server is willing or able to process.",
    414: "The request URI is longer than the server is willing to interpret.",
    415: "The request media type is not supported by this server.",
    500: "The server has either erred or is incapable of performing the requested operation.",
    503: "The server is currently unavailable. Please try again at a later time.",
}


class PlacementError(Exception):
    """An answer other than success. Subclasses fix the status."""

    status = 500
    # A microversion the service does not serve: a 406 says the range it does.
    version_range = False

    def __init__(
        self, message: str = "", *, code: str = DEFAULT, headers: dict[str, str] | None = None
    ):
        super().__init__(message)
        self.message = message
        self.code = code
        self.headers = dict(headers or {})

    @property
    def title(self) -> str:
        return HTTPStatus(self.status).phrase

    @property
    def detail(self) -> str:
        # webob's template, flattened: explanation, a blank line, the message
        # between a blank before and two after (three blanks with no message).
        explanation = EXPLANATIONS.get(self.status, "")
        return f"{explanation}\n\n {strip_tags(self.message)}  "


class BadRequest(PlacementError):
    status = 400


class Unauthorized(PlacementError):
    status = 401


class AuthenticationRequired(Unauthorized):
    """No identity: upstream's auth layer answers this one itself, in webob's
    own JSON format ({"message", "code", "title"}) rather than placement's."""

    def __init__(self, message: str = ""):
        super().__init__(message)


class Forbidden(PlacementError):
    status = 403


class NotFound(PlacementError):
    status = 404


class MethodNotAllowed(PlacementError):
    status = 405

    def __init__(self, method: str, allowed: list[str], hint: str = ""):
        """``hint``: a sentence added when a later microversion has the method."""
        super().__init__(
            f"The method {method} is not allowed for this resource." + (f" {hint}" if hint else ""),
            headers={"Allow": ", ".join(allowed)},
        )


class MethodNotAtThisVersion(PlacementError):
    """A method the URL serves only from a later microversion. Upstream
    answers it with its own sentence first and no Allow header (the URL's
    other methods do not depend on the method alone); ``hint`` says which
    version the method needs."""

    status = 405

    def __init__(self, method: str, hint: str = ""):
        super().__init__(f"The method {method} is not allowed for this resource. ")
        self.hint = hint

    @property
    def detail(self) -> str:
        return f"{self.message}\n\n {strip_tags(self.hint)}"


class NotAcceptable(PlacementError):
    status = 406


class RequestTimeout(PlacementError):
    status = 408


class Conflict(PlacementError):
    status = 409


class PayloadTooLarge(PlacementError):
    status = 413


class UriTooLong(PlacementError):
    status = 414


class UnsupportedMediaType(PlacementError):
    status = 415


class ServiceUnavailable(PlacementError):
    status = 503


class InternalError(PlacementError):
    status = 500


_BREAK = re.compile(r"<br.*?>", re.I | re.S)
_COMMENT_MARK = re.compile(r"<!--|-->")
_TAG = re.compile(r"<.*?>", re.S)


def strip_tags(text: str) -> str:
    """A message as upstream's error details carry it: webob flattens the text
    to one line (a newline becomes a blank, a carriage return goes) before it
    turns ``<br>`` into line breaks and drops comment marks and other tags."""
    text = text.replace("\n", " ").replace("\r", "")
    text = _BREAK.sub("\n", text)
    text = _COMMENT_MARK.sub("", text)
    return _TAG.sub("", text)


def error_body(error: PlacementError, request_id: str | None, with_code: bool) -> dict:
    entry = {"status": error.status, "title": error.title, "detail": error.detail}
    if with_code:
        entry["code"] = error.code
    if request_id:
        entry["request_id"] = request_id
    return {"errors": [entry]}


def webob_json_body(error: PlacementError) -> dict:
    """webob's default JSON error, which upstream's auth layer answers with."""
    return {
        "message": f"{EXPLANATIONS.get(error.status, '')}<br /><br />\n{error.message}\n\n",
        "code": f"{error.status} {error.title}",
        "title": error.title,
    }


def page(error: PlacementError, media_type: str) -> str:
    """The text/html or text/plain error page webob gives clients that
    prefer HTML or take neither HTML nor JSON (upstream's behaviour)."""
    status = f"{error.status} {error.title}"
    explanation = EXPLANATIONS.get(error.status, "")
    if media_type == "text/html":
        body = f"{html.escape(explanation)}<br /><br />\n{html.escape(error.message)}\n\n"
        return (
            f"<html>\n <head>\n  <title>{status}</title>\n </head>\n <body>\n"
            f"  <h1>{status}</h1>\n  {body}\n </body>\n</html>"
        )
    body = strip_tags(f"{explanation}<br /><br />\n{error.message}\n\n")
    return f"{status}\n\n{body}"
