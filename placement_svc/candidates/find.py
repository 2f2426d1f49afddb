"""GET /allocation_candidates and its explain and capacity as plain
functions: search, then merge and render, or explain, or claim.

The handler parses and checks the query; everything after that (what the
answer holds and in what order) is here, in one read transaction's
connection and plain arguments, so it runs the same from a test, the web
and the command line.

An answer is worked out whole inside the transaction (an ``Answer``: which
candidates, as assignments, which providers to summarise and their other
inventories), and rendered after it: rendering reads no database, so a body
streamed to the client cannot fail on one half-way.
"""

from __future__ import annotations

import random
from collections.abc import Iterator
from typing import Any, NamedTuple

from microversion_parse import Version
from sqlalchemy.engine import Connection

from placement_svc import microversion as mv
from placement_svc.candidates import merge, model, rank, render, search, summaries
from placement_svc.candidates.explain import capacity as capacity_rules
from placement_svc.candidates.explain import cloud, names
from placement_svc.candidates.explain import explanation as explain_rules
from placement_svc.candidates.model import Found
from placement_svc.candidates.request import Request
from placement_svc.candidates.walk import Assignment


class Settings(NamedTuple):
    """The [placement] options that shape an answer."""

    strategy: str = "depth-first"  # allocation_candidates_generation_strategy
    max_candidates: int = -1  # max_allocation_candidates; -1: no cap
    budget: int = model.UNBOUNDED  # allocation_candidates_search_budget

    @classmethod
    def of(cls, placement: Any) -> Settings:
        """From the [placement] group of the configuration (read per request,
        as every other option is)."""
        return cls(
            placement.allocation_candidates_generation_strategy,
            placement.max_allocation_candidates,
            placement.allocation_candidates_search_budget,
        )


def find(
    conn: Connection,
    wanted: Request,
    version: Version,
    settings: Settings = Settings(),
    rng: random.Random | None = None,
) -> dict[str, Any]:
    """The response body for ``wanted`` at ``version``. With ``rng`` the
    candidates come in a random order (a fair sample under a limit)."""
    return _answer(conn, wanted, version, settings, rng).answer.body()


class Answer(NamedTuple):
    """Everything the body of an answer is made of, read and decided: the
    candidates (as assignments of walk.slots), the providers to summarise
    and their inventories of classes not requested (1.27+)."""

    found: Found
    slots: list[Any]
    chosen: list[Assignment]
    providers: set[int]
    other: render.Other
    requested: set[str]
    version: Version
    # Each candidate's rank, when the request ranks them (1.48)
    ranks: list[rank.Rank] | None = None

    def body(self) -> dict[str, Any]:
        """The body as a dict."""
        candidates = [merge.candidate(self.slots, assigned) for assigned in self.chosen]
        return render.body(
            self.found,
            candidates,
            self.providers,
            self.other,
            self.requested,
            self.version,
            self.ranks,
        )

    def chunks(self) -> Iterator[bytes]:
        """The body as JSON, in pieces, made as they are asked for."""
        return render.chunks(
            self.found,
            self.slots,
            self.chosen,
            self.providers,
            self.other,
            self.requested,
            self.version,
            self.ranks,
        )


class _Worked(NamedTuple):
    """An answer, the search it came from and what its walk did."""

    answer: Answer
    found: Found
    tally: merge.Tally


def _answer(
    conn: Connection,
    wanted: Request,
    version: Version,
    settings: Settings,
    rng: random.Random | None,
) -> _Worked:
    """The whole answer, its SQL included. The candidates are kept as
    assignments (a tuple of provider ids each, a fraction of the memory of
    a Candidate or of its JSON): the summaries need every provider they
    touch before the first byte, and walking twice would cost twice.

    When the answer is a prefix of the walk's order (see ``_first``), the
    search reads the first anchors' trees only; if those give fewer
    candidates than the answer holds, it reads as many more as their yield
    says it needs (``_wider``), and then, if still short, them all."""
    if wanted.ranking is not None:
        return _ranked(conn, wanted, version, settings, rng)
    first = _first(wanted, version, settings, rng)
    found = _search(conn, wanted, settings, first=first, answer_only=True)
    tally = merge.Tally()
    walked, chosen, whole = _walk(found, wanted, version, settings, rng, tally)
    needed = _needed(wanted, settings)
    widened = False
    while first is not None and not found.complete and len(chosen) < needed:
        budget = found.budget  # what the searches before spent counts too
        first = None if widened else _wider(first, len(chosen), needed)
        widened = True
        found = search.search(conn, wanted, first=first, answer_only=True)
        found.budget = budget
        tally = merge.Tally()
        walked, chosen, whole = _walk(found, wanted, version, settings, rng, tally)
    providers = render.providers_to_summarise(found, walked.slots, chosen, version, whole)
    requested = wanted.resource_classes()
    other = (
        summaries.other_inventories(conn, found.world, providers, requested)
        if version >= mv.ALL_RESOURCES_IN_SUMMARIES
        else {}
    )
    answer = Answer(found, walked.slots, chosen, providers, other, requested, version)
    return _Worked(answer, found, tally)


def _ranked(
    conn: Connection,
    wanted: Request,
    version: Version,
    settings: Settings,
    rng: random.Random | None,
) -> _Worked:
    """The answer of a ranked request (1.48, rank.py): the first ``limit``
    (or max_allocation_candidates) in rank order over every tree of the
    cloud, though only the trees that could hold them are searched (below).
    The cap bounds the answer, not the walk: ranking weighs every candidate
    that could come first."""
    limits = [n for n in (wanted.limit or 0, settings.max_candidates) if n > 0]
    needed = min(limits, default=0)
    # Under a limit the search reads the best trees first (their bounds
    # known from the whole cloud's usage), a quarter more than needed, and
    # reads more only while the best tree it left out could still give a
    # candidate before the answer's last: once as many as the first ones'
    # yield says give enough (twice as many when they gave enough but a
    # tree left out could still come first), then every tree.
    first = needed + needed // 4 + 1 if needed else None
    found = _search(conn, wanted, settings, answer_only=True, ranked_first=first)
    widened = False
    while True:
        tally = merge.Tally()
        slots, ranked = merge.ranked(wanted, found, needed, rng, tally)
        if found.next_bound is None or rank.beyond(found.next_bound, ranked.last, rng):
            break
        assert first is not None  # a search of every tree leaves no tree out
        budget = found.budget  # what the searches before spent counts too
        got = len(ranked.chosen)
        if widened:
            first = None
        else:
            first = 2 * first if got >= needed else _wider(first, got, needed)
        widened = True
        found = search.search(conn, wanted, answer_only=True, ranked_first=first, again=found)
        found.budget = budget
    providers = render.providers_to_summarise(found, slots, ranked.chosen, version)
    requested = wanted.resource_classes()
    other = summaries.other_inventories(conn, found.world, providers, requested)
    answer = Answer(found, slots, ranked.chosen, providers, other, requested, version, ranked.ranks)
    return _Worked(answer, found, tally)


def _search(
    conn: Connection,
    wanted: Request,
    settings: Settings,
    first: int | None = None,
    answer_only: bool = False,
    ranked_first: int | None = None,
) -> Found:
    """search.search, with the request's budget of walk steps."""
    found = search.search(
        conn, wanted, first=first, answer_only=answer_only, ranked_first=ranked_first
    )
    found.budget = model.Budget(settings.budget)
    return found


def _walk(
    found: Found,
    wanted: Request,
    version: Version,
    settings: Settings,
    rng: random.Random | None,
    tally: merge.Tally,
) -> tuple[merge.Walked, list[Assignment], list[Assignment] | None]:
    """The walk's slots, the candidates chosen and (before 1.29, when a
    limit cut it) the whole answer they were chosen from."""
    walked = merge.assignments(wanted, found, settings.strategy, rng, tally)
    chosen, whole = merge.choose(
        walked.stream,
        wanted.limit,
        settings.max_candidates,
        rng,
        keep_whole=version < mv.NESTED_CANDIDATES,
    )
    return walked, chosen, whole


# A second window is this many times the first at most; past it, every tree.
WIDER_AT_MOST = 8


def _wider(first: int, got: int, needed: int) -> int | None:
    """How many anchors the second window reads after the first ``first``
    gave ``got`` candidates of the ``needed``: as many as that yield says
    give enough, and a quarter more (the groups' own filters, member_of or
    traits, may keep half the trees out); every tree (None) when the first
    gave none, or when the yield asks for more than WIDER_AT_MOST times the
    first. After the second window, every tree."""
    if got == 0:
        return None
    anchors = first * needed // got
    anchors += anchors // 4 + 1
    return anchors if anchors <= first * WIDER_AT_MOST else None


def _needed(wanted: Request, settings: Settings) -> int:
    """How many candidates the answer holds at most: the limit, or the cap
    when that is smaller (0 for no limit)."""
    limit = wanted.limit or 0
    return min(limit, settings.max_candidates) if settings.max_candidates >= 0 else limit


def _first(
    wanted: Request, version: Version, settings: Settings, rng: random.Random | None
) -> int | None:
    """How many anchors the search may stop at, or None for all of them.

    A limited answer, depth-first and in order, holds the first candidates
    of the walk, which takes tree after tree in anchor order: those of the
    first anchors, if they give enough, a quarter more than needed in case
    the rules leave some without a candidate. Not in a random order (a
    sample of the whole answer), round-robin (every tree), nor before 1.29,
    whose summaries depend on the whole answer under a limit."""
    needed = _needed(wanted, settings)
    if (
        not needed
        or rng is not None
        or settings.strategy != "depth-first"
        or version < mv.NESTED_CANDIDATES
    ):
        return None
    return needed + needed // 4 + 1


class Noted(NamedTuple):
    """An answer and what the service notes of it: for an answer without
    candidates the step that left it empty (what the request log says of
    it), and for the metrics whether the trees searched were nested and how
    many of them the walk pruned."""

    answer: Answer
    empty_because: str | None
    nested: bool
    pruned: int


def find_noting_empty(
    conn: Connection,
    wanted: Request,
    version: Version,
    settings: Settings = Settings(),
    rng: random.Random | None = None,
) -> Noted:
    """``find``, and what Noted holds, from the same snapshot, with not one
    statement more. An empty answer comes from a search of every tree (see
    ``_answer``): its reason is the explanation of that very search, on
    the shape of the cloud it was made of (explain/cloud.py)."""
    answer, found, tally = _answer(conn, wanted, version, settings, rng)
    nested = _nested(found)
    if answer.chosen:
        return Noted(answer, None, nested, tally.pruned)
    why = explain_rules.why_empty(found, cloud.of(found), wanted)
    return Noted(answer, why, nested, tally.pruned)


def _nested(found: Found) -> bool:
    """Whether a tree ``found`` searched has several providers: worked out
    once per kept world when the search covered all of its trees."""
    if found.members is None:
        return any(provider.parent_id is not None for provider in found.providers.values())
    members = found.members

    def nested() -> bool:
        return any(len(tree) > 1 for tree in members.values())

    if found.world is not None and members is found.world.members:
        return bool(found.world.remember("nested", nested))
    return nested()


def explain(
    conn: Connection,
    wanted: Request,
    settings: Settings = Settings(),
    near: int = explain_rules.NEAR_MISSES,
) -> dict[str, Any]:
    """The body of GET /allocation_candidates/explain: the search the answer
    runs, seen whole (explain/cloud.py); for near misses, the providers'
    names and the inventories' numbers beside it."""
    found = _search(conn, wanted, settings)
    whole = cloud.of(found)
    if near > 0:
        whole.names = names.provider_names(conn)
        whole.inventories = names.inventories(conn, found.classes)
    return explain_rules.explain(found, whole, wanted, settings.max_candidates, near)


def capacity(conn: Connection, wanted: Request, settings: Settings = Settings()) -> dict[str, Any]:
    """The body of GET /allocation_candidates/capacity: copies per tree,
    ``wanted.limit`` trees at most (the most copies first), and the total."""
    found = _search(conn, wanted, settings)
    counted = capacity_rules.capacity(found, wanted)
    shown = counted["trees"][: wanted.limit] if wanted.limit else counted["trees"]
    named = names.provider_names(conn, (tree["root"] for tree in shown))
    return {
        "trees": [
            {
                "root": {"uuid": found.providers[t["root"]].uuid, "name": named[t["root"]]},
                "copies": t["copies"],
                "exact": t["exact"],
            }
            for t in shown
        ],
        "trees_with_room": len(counted["trees"]),
        "total": counted["total"],
        "total_exact": counted["total_exact"],
    }
