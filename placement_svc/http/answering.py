"""Answering a request: the body (JSON, whole or streamed in pieces), the
bodiless answers, links and Location, the cache headers, and the words of
what a unit of work reports (``worded``)."""

from __future__ import annotations

import contextlib
import datetime
import json
import time
from collections.abc import Callable, Iterable, Iterator
from email.utils import format_datetime
from typing import Protocol

import falcon
import jsonschema
import orjson

from placement_svc import errors
from placement_svc import microversion as mv
from placement_svc.db.exceptions import DomainError
from placement_svc.http.reading import JSON, invalid_body, version

# A body made in pieces (render_chunks) up to this size is sent whole, with
# its Content-Length (which the request log shows); a larger one is streamed.
WHOLE_UP_TO = 4 * 1024 * 1024

Words = Callable[..., errors.PlacementError | None]


@contextlib.contextmanager
def worded(words: Words, *context: object) -> Iterator[None]:
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


def render(resp: falcon.Response, body: object, status: int = 200) -> None:
    render_json(resp, dumps(body), status)


def render_json(resp: falcon.Response, data: bytes, status: int = 200) -> None:
    """A 200 (or ``status``) whose body is ``data``, JSON already written."""
    resp.status = status
    resp.content_type = JSON
    resp.data = data


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
    stamps = [stamp for r in records if (stamp := r.modified) is not None]
    return max(stamps) if stamps else None
