"""Small request/response helpers every handler shares."""

from __future__ import annotations

import contextlib
import datetime
import json
import time
from collections.abc import Callable, Iterable, Iterator, Mapping
from email.utils import format_datetime
from typing import Any, Protocol

import falcon
import jsonschema
import orjson
from microversion_parse import Version

from placement_svc import errors
from placement_svc import microversion as mv
from placement_svc.db.exceptions import DomainError
from placement_svc.http import accept
from placement_svc.schemas.common import Schema

JSON = "application/json"
MAX_BODY_BYTES = 8 * 1024 * 1024
# No body of the API nests deeper than a handful of levels; a hostile one
# would make every recursive step after parsing fail (a 500) or crawl.
MAX_JSON_DEPTH = 32
TOO_DEEP = f"Malformed JSON: arrays and objects nested deeper than {MAX_JSON_DEPTH} levels."
# A body made in pieces (render_chunks) up to this size is sent whole, with
# its Content-Length (which the request log shows); a larger one is streamed.
WHOLE_UP_TO = 4 * 1024 * 1024


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


# -- the request's operation (placement_svc/routes.py) ---------------------------
#
# The app binds each responder to its operation (app._Resource); a handler
# says when each check happens, in upstream's order for it, and these read
# what to check from the operation, so no handler restates a version, a
# schema or a policy rule its route declares.


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


Words = Callable[..., errors.PlacementError | None]


@contextlib.contextmanager
def answering(words: Words, *context: object) -> Iterator[None]:
    """Answer what a unit of work reports in upstream's words.

    ``words(fact, *context)`` is a handler family's one mapping from the
    domain's exceptions to the HTTP error upstream answers (``context`` says
    which handler asks, where upstream words a fact differently per
    handler); a fact it does not know goes on to the app's error handling.
    A body that breaks its schema (checked inside a unit of work, after the
    404 it owes first) is the same 400 everywhere.
    """
    try:
        yield
    except jsonschema.ValidationError as exc:
        raise invalid_body(exc) from None
    except DomainError as exc:
        error = words(exc, *context)
        if error is None:
            raise
        raise error from None


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


def render(resp: falcon.Response, body: object, status: int = 200) -> None:
    resp.status = status
    resp.content_type = JSON
    resp.data = dumps(body)


def dumps(body: object) -> bytes:
    """A response body as compact UTF-8 JSON.

    orjson writes a large body (an allocation candidates answer of a thousand
    hosts) over ten times faster than the standard library; the JSON is the
    same, only without the blanks after separators and with non-ASCII text as
    UTF-8 rather than \\u escapes. Whatever orjson refuses (an integer beyond
    64 bits, say) falls back to the standard library.
    """
    try:
        return orjson.dumps(body)
    except TypeError:  # orjson.JSONEncodeError is a TypeError
        return json.dumps(body).encode("utf-8")


def render_chunks(
    resp: falcon.Response,
    chunks: Iterable[bytes],
    done: Callable[[float], None] | None = None,
    whole_up_to: int | None = None,
) -> None:
    """A 200 with a JSON body made of ``chunks`` (bytes, pieces of one JSON
    document), made as they are asked for.

    The pieces are made now up to ``whole_up_to`` bytes (by default
    WHOLE_UP_TO): a body that ends within them is sent whole, with a
    Content-Length, as ``render`` sends one. A larger one is streamed
    (chunked transfer encoding): the pieces made so far, then the others as
    the server asks for them, so a huge answer is never held whole.
    Whatever makes the pieces must not need anything that ends with the
    handler (a transaction, say): it runs after, and an error there can
    only cut the body short, the 200 being sent.

    ``done(seconds)``, if given, is called once, with the time spent making
    the pieces, when the last one is made (or the client went away first);
    for a streamed body that is after the handler has returned.
    """
    if whole_up_to is None:
        whole_up_to = WHOLE_UP_TO
    resp.status = 200
    resp.content_type = JSON
    pieces = _timed(chunks, done)
    made: list[bytes] = []
    size = 0
    for piece in pieces:
        made.append(piece)
        size += len(piece)
        if size > whole_up_to:
            resp.stream = _streamed(made, pieces)
            return
    resp.data = b"".join(made)


def _timed(chunks: Iterable[bytes], done: Callable[[float], None] | None) -> Iterator[bytes]:
    spent = 0.0
    pieces = iter(chunks)
    try:
        while True:
            started = time.perf_counter()
            piece = next(pieces, None)
            spent += time.perf_counter() - started
            if piece is None:
                return
            yield piece
    finally:
        if done is not None:
            done(spent)


def _streamed(made: list[bytes], rest: Iterator[bytes]) -> Iterator[bytes]:
    """A generator, so that the server's close() reaches ``rest`` too."""
    yield from made
    made.clear()
    yield from rest


def no_content(resp: falcon.Response, status: int = 204) -> None:
    resp.status = status
    resp.content_type = None
    resp.text = None


def url(req: falcon.Request, path: str) -> str:
    """A link relative to the service root, with the prefix it is mounted under."""
    return f"{req.root_path}{path}"


def location(req: falcon.Request, path: str) -> str:
    """A Location header: absolute (scheme, host and mount prefix), as upstream's
    webob makes every Location; links in bodies stay relative (see ``url``)."""
    return f"{req.prefix}{path}"


def cache_headers(
    req: falcon.Request, resp: falcon.Response, last_modified: datetime.datetime | None = None
) -> None:
    """From 1.15: last-modified (the newest change, or now) and no-cache."""
    if version(req) < mv.CACHE_HEADERS:
        return
    if last_modified is None:
        last_modified = datetime.datetime.now(datetime.timezone.utc)
    elif last_modified.tzinfo is None:
        last_modified = last_modified.replace(tzinfo=datetime.timezone.utc)
    resp.set_header("Last-Modified", format_datetime(last_modified, usegmt=True))
    resp.set_header("Cache-Control", "no-cache")


class _Modified(Protocol):
    """A record with the time of its last change (db's records)."""

    @property
    def modified(self) -> datetime.datetime | None: ...


def newest(records: Iterable[_Modified]) -> datetime.datetime | None:
    stamps = [r.modified for r in records if r.modified is not None]
    return max(stamps) if stamps else None


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
