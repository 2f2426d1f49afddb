"""``placement-svc explain QUERY`` and ``placement-svc capacity QUERY``.

What GET /allocation_candidates/explain and /capacity answer
(api/allocation_candidates.py), from the configured database, for an
operator on a host the API cannot be reached from: the same query string,
read at the newest microversion with the same checks and words
(``allocation_candidates.explain_query`` / ``capacity_query``), the same
units of work, the same text. No policy applies: whoever runs this has the
database's credentials. cli.py registers them with ``add_commands``.
"""

from __future__ import annotations

import contextlib
import json
from functools import partial

import falcon.uri

from placement_svc import errors
from placement_svc import microversion as mv
from placement_svc.api import allocation_candidates as api
from placement_svc.candidates import find
from placement_svc.candidates.explain import text
from placement_svc.cmd.bootstrap import Failure, engine_for, require_head, shown_url
from placement_svc.db.engine import Database
from placement_svc.db.exceptions import DatabaseUnavailable, UnstorableValue
from placement_svc.http import reading

# The queries are read as the API reads them at its newest microversion.
QUERY_VERSION = mv.MAX_VERSION


def explain(conf, args) -> None:
    """GET /allocation_candidates/explain?QUERY, from the database."""
    with _as_the_api_refuses(), api.searching():
        wanted, near = api.explain_query(query_params(args.query), QUERY_VERSION)
        settings = find.Settings.of(conf.placement)
        body = _read(conf, partial(find.explain, wanted=wanted, settings=settings, near=near))
    _print(args, body, text.explain)


def capacity(conf, args) -> None:
    """GET /allocation_candidates/capacity?QUERY, from the database."""
    with _as_the_api_refuses(), api.searching():
        wanted = api.capacity_query(query_params(args.query), QUERY_VERSION)
        body = _read(conf, partial(find.capacity, wanted=wanted))
    _print(args, body, text.capacity)


def query_params(query: str) -> dict[str, list[str]]:
    """A query string as the API's handlers get it: parsed as falcon parses
    it with the options app.py sets (blank values kept, no splitting at
    commas), each key's values as a list."""
    parsed = falcon.uri.parse_query_string(query, keep_blank=True, csv=False)
    return reading.as_lists(parsed)


@contextlib.contextmanager
def _as_the_api_refuses():
    """A query the API answers with 400 (a malformed one, before the
    database is reached; a name the database does not know, after), as one
    error line: the API's message."""
    try:
        yield
    except errors.PlacementError as exc:
        raise Failure(errors.strip_tags(exc.message)) from exc
    except UnstorableValue as exc:  # app.py's words for it
        raise Failure("The request contains a value the database cannot store.") from exc


def _read(conf, work):
    """``work`` in one read transaction, as a request runs it; a schema this
    code was not written for is refused first, naming the fix."""
    with engine_for(conf) as engine:
        require_head(engine)
        database = Database(engine, max_retries=conf.placement_database.db_max_retries)
        try:
            return database.read(work)
        except DatabaseUnavailable as exc:
            shown = shown_url(conf.placement_database.connection)
            state = "unreachable" if exc.unreachable else "busy"
            raise Failure(
                f"database {shown}: {state}, gave up after {exc.attempts} attempts"
            ) from exc


def _print(args, body, as_text) -> None:
    if args.json:
        print(json.dumps(body, indent=2, ensure_ascii=False))
    else:
        print(as_text(body), end="")
