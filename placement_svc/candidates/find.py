"""One GET /allocation_candidates as a plain function: search, merge, render.

The handler parses and checks the query; everything after that (what the
answer holds and in what order) is here, in one read transaction's
connection and plain arguments, so it runs the same from a test as from the
web.
"""

from __future__ import annotations

import random
from typing import Any, NamedTuple

from microversion_parse import Version
from sqlalchemy.engine import Connection

from placement_svc import microversion as mv
from placement_svc.candidates import merge, render, search, summaries
from placement_svc.candidates.request import Request


class Settings(NamedTuple):
    """The [placement] options that shape an answer."""

    strategy: str = "depth-first"  # allocation_candidates_generation_strategy
    max_candidates: int = -1  # max_allocation_candidates; -1: no cap

    @classmethod
    def of(cls, placement: Any) -> Settings:
        """From the [placement] group of the configuration (read per request,
        as every other option is)."""
        return cls(
            placement.allocation_candidates_generation_strategy,
            placement.max_allocation_candidates,
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
    found = search.search(conn, wanted)
    stream = merge.generate(wanted, found, settings.strategy, rng)
    chosen, whole = merge.choose(
        stream,
        wanted.limit,
        settings.max_candidates,
        rng,
        keep_whole=version < mv.NESTED_CANDIDATES,
    )
    providers = render.summary_providers(found, chosen, version, whole)
    requested = wanted.resource_classes()
    other = (
        summaries.other_inventories(conn, providers, requested)
        if version >= mv.ALL_RESOURCES_IN_SUMMARIES
        else {}
    )
    return render.body(found, chosen, providers, other, requested, version)
