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
import logging
from functools import partial

import falcon.uri

from placement_svc import errors
from placement_svc import microversion as mv
from placement_svc.api import allocation_candidates as api
from placement_svc.candidates import find
from placement_svc.candidates.explain import explanation as explain_rules
from placement_svc.candidates.explain import text
from placement_svc.cmd.bootstrap import Failure, engine_for, require_head, shown_url
from placement_svc.db.engine import Database
from placement_svc.db.exceptions import DatabaseUnavailable, UnstorableValue
from placement_svc.http import web

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
    return web.as_lists(parsed)


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


def add_commands(commands, add) -> None:
    """Register both on ``commands`` (argparse sub-parsers) with cli.py's
    ``add(commands, name, depth, **kwargs)``, which adds its common options."""
    where = (
        "Reads the configured database directly, for an operator on a host the "
        "API cannot be reached from; no policy applies. QUERY is the query string "
        "of GET /allocation_candidates, checked as the API checks it at its newest "
        "microversion; quote it for the shell."
    )
    said = (
        "Why an allocation candidates query has the candidates it has, or none: "
        "what each filter and rule left, and the trees that almost fit "
        f"(near_misses=N in QUERY: how many, default {explain_rules.NEAR_MISSES}, "
        f"at most {explain_rules.MAX_NEAR_MISSES}). The text "
        "GET /allocation_candidates/explain answers to Accept: text/plain. "
    )
    explaining = add(
        commands,
        "explain",
        1,
        help="why an allocation candidates query has the candidates it has",
        description=said + where,
    )
    said = (
        "How many copies of an allocation candidates query fit: in all, and tree "
        "by tree, the most first (limit=N in QUERY: N trees at most). The text "
        "GET /allocation_candidates/capacity answers to Accept: text/plain. "
    )
    counting = add(
        commands,
        "capacity",
        1,
        help="how many copies of an allocation candidates query fit",
        description=said + where,
    )
    for parser, func in ((explaining, explain), (counting, capacity)):
        parser.add_argument(
            "query", metavar="QUERY", help="e.g. 'resources=VCPU:2,MEMORY_MB:4096&required=...'"
        )
        parser.add_argument(
            "--json", action="store_true", help="print the JSON body the API answers instead"
        )
        parser.set_defaults(func=func, log_level=logging.WARNING)
