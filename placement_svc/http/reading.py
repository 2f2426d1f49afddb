"""Reading a request: its microversion and operation (routes/), the checks
a handler makes in upstream's order (version, Accept, policy, media type),
the JSON body and the query string, each against its schema."""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from typing import Any, Protocol

import falcon
import jsonschema
from microversion_parse import Version

from placement_svc import errors
from placement_svc import microversion as mv
from placement_svc.http import accept
from placement_svc.schemas.common import Schema

JSON = "application/json"
MAX_BODY_BYTES = 8 * 1024 * 1024
# No body of the API nests deeper than a handful of levels; a hostile one
# would make every recursive step after parsing fail (a 500) or crawl.
MAX_JSON_DEPTH = 32
TOO_DEEP = f"Malformed JSON: arrays and objects nested deeper than {MAX_JSON_DEPTH} levels."


def version(req: falcon.Request) -> Version:
    return req.context.placement.version


def require_version(req: falcon.Request, feature: Version) -> None:
    """Answer 404, as upstream does, for a handler not there at this version.
    Where [api] max_microversion keeps the feature from being served at all
    (a URL of placement-svc's own, under a 1.39 cap), no version would help:
    the 404 says what upstream says of a URL it does not have."""
    if version(req) < feature:
        if feature > mv.max_version(req.env):
            raise errors.NotFound()
        raise errors.NotFound(version_hint(req, feature, "This URL"))


class Declared(Protocol):
    """What these helpers read of a routes.Operation."""

    since: Version
    policy: str | None
    body: Callable[[Version], Schema | None] | None
    query: Callable[[Version], Schema | None] | None


def operation(req: falcon.Request) -> Declared:
    return req.context.operation


def check_version(req: falcon.Request) -> None:
    """404 before the microversion the operation appears at."""
    require_version(req, operation(req).since)


def authorize(req: falcon.Request, target: dict[str, Any] | None = None) -> None:
    """403 unless policy allows the caller the operation's rule (on
    ``target``; by default the caller's own project and user)."""
    rule = operation(req).policy
    if rule is not None:
        req.context.placement.can(rule, target)


def read_body(req: falcon.Request) -> Any:
    """The body, read as ``read_json`` reads it, against the operation's body
    schema at the request's version."""
    schema_at = operation(req).body
    return read_json(req, schema_at(version(req)) if schema_at is not None else None)


def declared_query(req: falcon.Request) -> dict[str, list[str]]:
    """The query, checked as ``versioned_query`` checks it, against the
    operation's query schema."""
    schema_at = operation(req).query
    if schema_at is None:
        return query(req)
    return versioned_query(req, schema_at)


def version_hint(req: falcon.Request, feature: Version, what: str) -> str:
    """The sentence a 404 or 405 adds when ``what`` (the URL, the method)
    exists from a later microversion: a request without the header is
    served at 1.0, which is how most people meet it."""
    asked = version(req)
    sent = req.get_header(mv.HEADER) is not None
    why = "" if sent else f" (a request without an {mv.HEADER} header is served at 1.0)"
    return (
        f"{what} needs microversion {feature} or later; this request asked for "
        f"{asked}{why}: send '{mv.HEADER}: {mv.SERVICE_TYPE} {feature}' or "
        f"'{mv.SERVICE_TYPE} latest'."
    )


def check_accept(req: falcon.Request) -> None:
    """406 when the client's Accept excludes JSON (an absent or unparsable
    header accepts it, as upstream's webob has it)."""
    if not accept.accepts_json(req.get_header("Accept")):
        raise errors.NotAcceptable(f"Only {JSON} is provided")


def require_json(req: falcon.Request) -> None:
    """415 unless the request says its body is JSON. Upstream checks this before
    policy, so a handler with a body calls this, then ``can``, then reads it."""
    media_type = (req.content_type or "").split(";", 1)[0].strip().lower()
    if media_type != JSON:
        raise errors.UnsupportedMediaType(
            f"The media type {req.content_type or 'None'} is not supported, use {JSON}"
        )


def read_json(req: falcon.Request, schema: Schema | None = None) -> Any:
    """The request body as JSON, checked for media type, syntax and schema."""
    require_json(req)
    if req.content_length is None and req.env.get("wsgi.input_terminated"):
        # A chunked body (no Content-Length): the server ends wsgi.input
        # where the body ends, as gunicorn does; upstream's webob reads it so.
        raw = req.stream.read(MAX_BODY_BYTES + 1)
    else:
        raw = req.bounded_stream.read(MAX_BODY_BYTES + 1)
    if len(raw) > MAX_BODY_BYTES:
        raise errors.PayloadTooLarge(f"Request body is larger than {MAX_BODY_BYTES} bytes.")
    try:
        data = json.loads(raw.decode("utf-8"))
    except RecursionError:  # the parser's own guard, near a thousand levels
        raise errors.BadRequest(TOO_DEEP) from None
    except (ValueError, UnicodeError) as exc:
        raise errors.BadRequest(f"Malformed JSON: {exc}") from None
    if _deeper_than(data, MAX_JSON_DEPTH):
        raise errors.BadRequest(TOO_DEEP)
    try:
        # A lone surrogate (\ud800) parses but can be stored nowhere.
        json.dumps(data, ensure_ascii=False).encode("utf-8")
    except UnicodeError as exc:
        raise errors.BadRequest(f"Malformed JSON: {exc}") from None
    if schema is not None:
        validate(data, schema)
    return data


def _deeper_than(data: object, limit: int) -> bool:
    """Whether arrays and objects nest more than ``limit`` levels (a scalar
    is level 0): checked before anything recurses over the body (encoding,
    the schema, error messages), without recursing itself."""
    stack = [(data, 1)] if isinstance(data, dict | list) else []
    while stack:
        value, depth = stack.pop()
        if depth > limit:
            return True
        children = value.values() if isinstance(value, dict) else value
        stack.extend((child, depth + 1) for child in children if isinstance(child, dict | list))
    return False


def validate(data: object, schema: Schema) -> None:
    try:
        schema.check(data)
    except jsonschema.ValidationError as exc:
        raise invalid_body(exc) from None


def invalid_body(error: jsonschema.ValidationError) -> errors.BadRequest:
    return errors.BadRequest(f"JSON does not validate: {schema_problem(error)}")


def schema_problem(error: jsonschema.ValidationError) -> str:
    """jsonschema's verdict as one line: its message first (what clients and
    upstream's tests match on), then the field it is about and the rule that
    failed, as upstream words it. Left out: the dumps of the schema and of the
    instance that ``str(error)`` appends, which show this service's schema
    internals and, flattened to one line, bury the message."""
    field = ""
    for key in error.absolute_path:
        field += f"[{key}]" if isinstance(key, int) else f".{key}" if field else str(key)
    rule = "".join(f"[{key!r}]" for key in list(error.relative_schema_path)[:-1])
    where = f" (at {field})" if field else ""
    return f"{error.message}{where}. Failed validating {error.validator!r} in schema{rule}."


def query(req: falcon.Request, schema: Schema | None = None) -> dict[str, list[str]]:
    """Query parameters as lists of values, validated like upstream.

    The schema sees each key's last value, as webob's ``dict(req.GET)`` gives.
    """
    return checked_query(as_lists(req.params), schema)


def as_lists(parsed: Mapping[str, str | list[str]]) -> dict[str, list[str]]:
    """falcon's parsed query (a value, or a list for a repeated key) as
    each key's list of values."""
    return {key: value if isinstance(value, list) else [value] for key, value in parsed.items()}


def checked_query(
    params: dict[str, list[str]], schema: Schema | None, hint: Callable[[], str] | None = None
) -> dict[str, list[str]]:
    """``params``, checked against ``schema``; a 400 otherwise, with the
    sentence ``hint`` gives added when it gives one."""
    if schema is not None:
        last = {key: values[-1] for key, values in params.items()}
        try:
            schema.check(last)
        except jsonschema.ValidationError as exc:
            more = hint() if hint is not None else ""
            raise errors.BadRequest(
                f"Invalid query string parameters: {schema_problem(exc)}"
                + (f" {more}" if more else "")
            ) from None
    return params


def versioned_query(
    req: falcon.Request, schema_at: Callable[[Version], Schema | None]
) -> dict[str, list[str]]:
    """``query`` against the schema of the request's version; a query that
    only a later version served here takes (a parameter from 1.40, say) is
    refused as upstream refuses it, and the refusal says which version."""
    params = as_lists(req.params)
    asked = version(req)

    def hint() -> str:
        last = {key: values[-1] for key, values in params.items()}
        for minor in range(asked.minor + 1, mv.max_version(req.env).minor + 1):
            later = schema_at(Version(asked.major, minor))
            if later is not None and later.accepts(last):
                return version_hint(req, Version(asked.major, minor), "This query")
        return ""

    return checked_query(params, schema_at(asked), hint)
