"""GET /allocation_candidates (1.10+): parse, find (search, merge, render),
answer; and placement-svc's own (1.44+) /allocation_candidates/explain and
/allocation_candidates/capacity, which take the same query."""

from __future__ import annotations

import contextlib
import contextvars
import logging
import random
import time
from functools import partial

from placement_svc import errors
from placement_svc.candidates import find, model, request
from placement_svc.candidates.explain import explanation as explain_rules
from placement_svc.candidates.explain import text
from placement_svc.candidates.find import Settings
from placement_svc.http import accept, answering, reading
from placement_svc.operating import metrics
from placement_svc.schemas import allocation_candidate as schema

# The request log's logger: an empty answer says there why it is empty.
LOG = logging.getLogger("placement_svc.requests")
TEXT = "text/plain"


class AllocationCandidates:
    def __init__(self, db, conf):
        self.db = db
        self.conf = conf.placement

    def list(self, req, resp):
        reading.check_version(req)
        reading.check_accept(req)
        reading.authorize(req)
        version = reading.version(req)
        wanted = self._bounded(request.parse(reading.declared_query(req), version))
        rng = random.Random() if self.conf.randomize_allocation_candidates else None
        work = partial(
            find.find_noting_empty,
            wanted=wanted,
            version=version,
            settings=Settings.of(self.conf),
            rng=rng,
        )
        started = time.perf_counter()
        with searching():
            noted = self.db.read(work)
        found_in = time.perf_counter() - started
        if noted.empty_because is not None:
            LOG.info(
                "No allocation candidates for %s: %s",
                req.context.placement.request_id,
                noted.empty_because,
            )
        # The answer's metrics once its body is made, which for a huge one
        # is after this returns: in this request's context, which the
        # metrics layer has left by then.
        answered = partial(
            contextvars.copy_context().run,
            metrics.candidates_answered,
            groups=len(wanted.groups),
            nested=noted.nested,
            returned=len(noted.answer.chosen),
            pruned=noted.pruned,
        )
        answering.render_chunks(
            resp,
            noted.answer.chunks(),
            done=lambda rendering: answered(seconds=found_in + rendering),
        )
        answering.cache_headers(req, resp)

    def explain(self, req, resp):
        media_type = _media_type(req)
        reading.authorize(req)
        wanted, near = explain_query(reading.as_lists(req.params), reading.version(req))
        wanted = self._bounded(wanted)
        work = partial(find.explain, wanted=wanted, settings=Settings.of(self.conf), near=near)
        with searching():
            body = self.db.read(work)
        _answer(resp, media_type, body, text.explain)

    def capacity(self, req, resp):
        media_type = _media_type(req)
        reading.authorize(req)
        wanted = self._bounded(capacity_query(reading.as_lists(req.params), reading.version(req)))
        work = partial(find.capacity, wanted=wanted, settings=Settings.of(self.conf))
        with searching():
            body = self.db.read(work)
        _answer(resp, media_type, body, text.capacity)

    def _bounded(self, wanted: request.Request) -> request.Request:
        """The request, if it names no more groups than [placement]
        max_request_groups allows; else 400."""
        most = self.conf.max_request_groups
        if len(wanted.groups) > most:
            raise errors.BadRequest(
                f"The request names {len(wanted.groups)} request groups; at most "
                f"{most} are allowed ([placement] max_request_groups)."
            )
        return wanted


@contextlib.contextmanager
def searching():
    """What a search reports, in upstream's words: a name the database does
    not know, 400; a search past its budget of steps, 400 naming the option."""
    try:
        yield
    except model.UnknownNames as exc:
        if exc.traits:
            raise errors.BadRequest(f"No such trait(s): {', '.join(exc.traits)}.") from None
        raise errors.BadRequest(
            f"Invalid resource class in {exc.parameter} parameter: No such resource class "
            f"{', '.join(exc.classes)}."
        ) from None
    except model.SearchBudgetExceeded as exc:
        raise errors.BadRequest(
            f"The search for allocation candidates took more than its budget of "
            f"{exc.steps} steps ([placement] allocation_candidates_search_budget): "
            f"ask for fewer or more specific groups (in_tree, member_of, required), "
            f"or raise the budget."
        ) from None


def explain_query(params: dict[str, list[str]], version) -> tuple[request.Request, int]:
    """An explain query, checked (the candidates query's schema and
    near_misses=) and parsed: the request and how many near misses. The
    command line's ``placement-svc explain`` reads its query with this too."""
    params = reading.checked_query(params, schema.explain_schema(version))
    return request.parse(params, version), _near_misses(params)


def capacity_query(params: dict[str, list[str]], version) -> request.Request:
    """A capacity query, checked and parsed (as the candidates query)."""
    return request.parse(reading.checked_query(params, schema.query_schema(version)), version)


def _media_type(req) -> str:
    """JSON, or plain text for a client that prefers it (curl users); 406
    for one that takes neither."""
    offers = accept.acceptable(req.get_header("Accept"), (reading.JSON, TEXT))
    if not offers:
        raise errors.NotAcceptable(f"Only {reading.JSON} or {TEXT} is provided")
    return offers[0]


def _near_misses(params: dict[str, list[str]]) -> int:
    """near_misses= (the schema checked it is a number): at most the cap."""
    if "near_misses" not in params:
        return explain_rules.NEAR_MISSES
    near = int(params["near_misses"][-1])
    if near > explain_rules.MAX_NEAR_MISSES:
        raise errors.BadRequest(
            f"Invalid query string parameters: near_misses must be at most "
            f"{explain_rules.MAX_NEAR_MISSES}, got {near}."
        )
    return near


def _answer(resp, media_type: str, body, as_text) -> None:
    if media_type == TEXT:
        resp.status = 200
        resp.content_type = f"{TEXT}; charset=UTF-8"
        resp.text = as_text(body)
    else:
        answering.render(resp, body)
