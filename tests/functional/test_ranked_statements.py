"""The SQL statements a ranked GET /allocation_candidates runs (1.48: sort=,
prefer=) do not grow with the number of providers: the same ranked queries
on a cloud of 4 hosts and of 40 hosts run the same statements, one by one,
and exactly those listed in EXPECTED (counted as test_candidate_statements
counts them: a ``before_cursor_execute`` listener on the application's
engine), on a cloud of flat hosts and on one of nested hosts (a root with
two NUMA children holding the VCPU).

What is proven, per query (see EXPECTED for each statement):

- **Under a limit** (the windowed path, search._ranked_window): the sort
  class's usage of the whole cloud is read once, for the trees' bounds; the
  requested classes' usage of the best trees only (search.used_of), an IN
  list as long for 40 hosts as for 4, or nothing more when every requested
  class is sorted by (the first read has it).
- **member_of** (on the two hosts last by bound): the trees member_of
  does not allow are left out before the bounds (kept per shape), so the
  window holds the hosts that can answer and no wider search follows.
- **A wider search** (prefer=CUSTOM_R:5, a trait of roots a VCPU request
  allocates nothing from, so the bounds promise more than the candidates
  give): at most two searches more, each the world generation and at most
  one usage read; a wider search reuses the first's bounds and sort usage
  (``again=``).
- **Without a limit**, **with prefer=TRAIT:W**, **with a sharing provider**
  (ranked whole): as many statements for 40 hosts as for 4.

And two reports, fixed: the ranked search widened round after round,
one search more per round, so that its statements grew with the cloud
(log of the number of trees): it now widens once, then reads every tree;
and a wider search after a first window that gave nothing read the sort
classes' usage of the whole cloud again: it now starts from the first's.
"""

from __future__ import annotations

import functools
import uuid
from typing import Any, NamedTuple

import pytest
import sqlalchemy as sa
from sqlalchemy import event

from placement_svc import app
from placement_svc.db import tables
from placement_svc.db.engine import Database, create_engine
from tests.support import databases, fixtures
from tests.support.small_cloud import api_provider

SIZES = (4, 40)
SHAPES = ("flat", "nested")
# Aggregates, by each host's place in the order of the spread:VCPU bounds:
# hosts 2, 3, ..., n-1 (nothing used), then host 0 (4 VCPU used), host 1 (6).
LATE = str(uuid.uuid5(uuid.NAMESPACE_URL, "ranked-statements-late"))  # the last two
AGAIN = str(uuid.uuid5(uuid.NAMESPACE_URL, "ranked-statements-again"))  # the 1st and 4th
MIXED = str(uuid.uuid5(uuid.NAMESPACE_URL, "ranked-statements-mixed"))  # the 1st and last
SHARE = str(uuid.uuid5(uuid.NAMESPACE_URL, "ranked-statements-share"))  # every host, the storage
USED = {0: 4, 1: 6}  # host -> VCPU allocated (from its first NUMA node when nested)

QUERIES = {
    "windowed": "resources=VCPU:1&sort=spread:VCPU&limit=2",
    "wider from nothing": "resources=VCPU:1&sort=spread:VCPU&limit=1&member_of={late}",
    "wider again": "resources=MEMORY_MB:1&sort=spread:VCPU&limit=2&member_of={again}",
    "no limit": "resources=VCPU:1&sort=spread:VCPU",
    "prefer": "resources=VCPU:1&sort=spread:VCPU&prefer=CUSTOM_W:5&limit=2",
    "sharing": "resources=VCPU:1,DISK_GB:10&sort=spread:VCPU&limit=2",
    # The two reports (see their tests)
    "rounds, member_of": "resources=VCPU:1&sort=spread:VCPU&limit=2&member_of={mixed}",
    "rounds, prefer": "resources=VCPU:1&sort=spread:VCPU&prefer=CUSTOM_R:5&limit=2",
    "sort re-read": "resources=MEMORY_MB:1&sort=spread:VCPU&limit=1&member_of={late}",
}

# The statements of each query, on PostgreSQL and MariaDB (SQLite runs a
# BEGIN DEFERRED first: the engine begins its transactions itself, see
# db/engine.py). trees(): the trees (roots) whose providers an IN list names;
# the number of providers is that times 1 (flat) or 3 (nested).
GENERATION = ("generation",)  # SELECT SUM(generation) FROM world_changes (world.py)


def every(*classes):
    """The used amounts of these classes, of every provider (search.used_amounts)."""
    return ("all", frozenset(classes))


def trees(count, *classes):
    """The used amounts of these classes, of the providers of ``count``
    trees (search.used_of)."""
    return ("trees", frozenset(classes), count)


def summaries(*classes):
    """The used amounts of the classes not requested, of the providers the
    answer summarises, by a range of ids (summaries.other_inventories)."""
    return ("range", frozenset(classes))


EXPECTED = {
    # The world generation (the shape of the cloud is kept: warmed up before
    # counting); the sort class's usage of every tree, for the bounds, which
    # is the requested class's too (the room of the best limit + limit // 4
    # + 1 = 3 trees comes from it); the summaries' other classes.
    "windowed": [GENERATION, every("VCPU"), summaries("MEMORY_MB")],
    # member_of is applied to the trees before they are bounded (the trees
    # each filter allows are kept per shape): LATE's two hosts are the only
    # trees bounded, and the first window (limit 1: 2 trees) is both, which
    # is every tree: no wider search, and no read more (the first read has
    # VCPU of every tree).
    "wider from nothing": [GENERATION, every("VCPU"), summaries("MEMORY_MB")],
    # AGAIN's two hosts are the only trees bounded (member_of, as above):
    # no more of them than the window (3), so every tree is searched at
    # once, MEMORY_MB of every provider read beside the sort class's.
    "wider again": [GENERATION, every("VCPU"), every("MEMORY_MB"), summaries("VCPU")],
    # No limit: every tree, the sort class read with the requested ones.
    "no limit": [GENERATION, every("VCPU"), summaries("MEMORY_MB")],
    # A preferred trait held by the allocating providers: the bounds are
    # exact, the first window is enough.
    "prefer": [GENERATION, every("VCPU"), summaries("MEMORY_MB")],
    # A sharing provider serves DISK_GB: ranked whole, one read of every tree.
    "sharing": [GENERATION, every("VCPU", "DISK_GB"), summaries("MEMORY_MB")],
}


class Measured(NamedTuple):
    statements: list[tuple[Any, ...]]  # as EXPECTED writes them
    hosts: list[int]  # the host of each allocation request, in order
    ranks: list[dict[str, Any]]
    sharing: list[bool]  # whether each allocation request takes from the storage


def _build(client, hosts: int, shape: str) -> tuple[dict[str, int], str]:
    """The cloud; provider uuid -> its host's index (its NUMA nodes' too),
    and the storage's uuid."""

    provider = functools.partial(api_provider, client)

    for trait in ("CUSTOM_W", "CUSTOM_R"):
        assert client.put(f"/traits/{trait}").status_code == 201
    storage = provider(
        "storage",
        inventory={"DISK_GB": 10000},
        traits=["MISC_SHARES_VIA_AGGREGATE"],
        aggregates=[SHARE],
    )
    by_bound = [*range(2, hosts), 0, 1]
    members = {
        LATE: by_bound[-2:],
        AGAIN: [by_bound[0], by_bound[3]],
        MIXED: [by_bound[0], by_bound[-1]],
    }
    host_of: dict[str, int] = {}
    claims: dict[int, str] = {}  # host -> the provider its VCPU is claimed from
    for index in range(hosts):
        aggregates = [SHARE] + [agg for agg, them in members.items() if index in them]
        preferred = ["CUSTOM_W"] if index % 3 == 2 else []  # CUSTOM_W: on the VCPU's provider
        if shape == "flat":
            host = provider(
                f"host{index}",
                inventory={"VCPU": 16, "MEMORY_MB": 4096},
                traits=preferred,
                aggregates=aggregates,
            )
            claims[index] = host
        else:
            host = provider(
                f"host{index}",
                inventory={"MEMORY_MB": 4096},
                # CUSTOM_R: on the root, which a VCPU request allocates nothing from
                traits=["CUSTOM_R"] if index % 3 == 1 else [],
                aggregates=aggregates,
            )
            for numa in range(2):
                node = provider(
                    f"host{index}-numa{numa}", parent=host, inventory={"VCPU": 8}, traits=preferred
                )
                host_of[node] = index
                claims.setdefault(index, node)
        host_of[host] = index
    for index, vcpu in USED.items():
        claim = {
            "allocations": {claims[index]: {"resources": {"VCPU": vcpu}}},
            "consumer_generation": None,
            "project_id": str(uuid.uuid4()),
            "user_id": str(uuid.uuid4()),
            "consumer_type": "INSTANCE",
        }
        answer = client.put(f"/allocations/{uuid.uuid4()}", json=claim)
        assert answer.status_code == 204, answer.text
    return host_of, storage


def _kind(statement: str, context: Any, class_names: dict[int, str]) -> tuple[Any, ...]:
    """A statement as EXPECTED writes it."""
    text = " ".join(statement.split())
    if text.startswith("BEGIN"):
        return ("begin",)
    if "world_changes" in text:
        return GENERATION
    if "FROM allocations" in text:
        (params,) = context.compiled_parameters
        classes = frozenset(class_names[v] for k, v in params.items() if k.startswith("classes_"))
        if "BETWEEN" in text:
            return ("range", classes)
        providers = sum(1 for k in params if k.startswith("providers_"))
        return ("providers", classes, providers) if providers else ("all", classes)
    return ("other", text)


@functools.cache
def _measured(test_db: databases.TestDatabase, shape: str, hosts: int) -> dict[str, Measured]:
    """Each query's statements and answer, on a cloud of ``hosts`` hosts
    (kept for the process: the two reports' tests read the same clouds)."""
    test_db.reset()
    engine = create_engine(test_db.url)
    client = fixtures.api_client(app.create_app(fixtures.make_conf(), Database(engine)))
    host_of, storage = _build(client, hosts, shape)
    # The shape of the cloud is read and kept by the first request: not counted
    assert client.get("/allocation_candidates?resources=VCPU:1").status_code == 200
    with engine.connect() as conn:
        rc = tables.resource_classes
        class_names = dict(conn.execute(sa.select(rc.c.id, rc.c.name)).all())
    per_tree = 1 if shape == "flat" else 3
    measured = {}
    for name, query in QUERIES.items():
        seen: list[tuple[str, Any]] = []

        def listener(*args, seen=seen):
            seen.append((args[2], args[4]))  # the statement text, its context

        event.listen(engine, "before_cursor_execute", listener)
        try:
            answer = client.get(
                "/allocation_candidates?" + query.format(late=LATE, again=AGAIN, mixed=MIXED)
            )
        finally:
            event.remove(engine, "before_cursor_execute", listener)
        assert answer.status_code == 200, answer.text
        statements = []
        for text, context in seen:
            kind = _kind(text, context, class_names)
            if kind[0] == "providers":  # as trees() writes it
                assert kind[2] % per_tree == 0, (name, kind)
                kind = ("trees", kind[1], kind[2] // per_tree)
            statements.append(kind)
        requests = answer.json()["allocation_requests"]
        measured[name] = Measured(
            statements,
            [
                {host_of[rp] for rp in request["allocations"] if rp != storage}.pop()
                for request in requests
            ],
            [request["rank"] for request in requests],
            [storage in request["allocations"] for request in requests],
        )
    engine.dispose()
    return measured


def _expected(test_db, name: str, hosts: int) -> list[tuple[Any, ...]]:
    wanted = EXPECTED[name]
    statements = wanted[hosts] if isinstance(wanted, dict) else wanted
    return [("begin",), *statements] if test_db.backend == "sqlite" else list(statements)


@pytest.mark.parametrize("shape", SHAPES)
def test_ranked_statements_do_not_grow_with_providers(test_db, shape):
    small, large = (_measured(test_db, shape, hosts) for hosts in SIZES)
    for name in EXPECTED:
        assert len(small[name].statements) == len(large[name].statements), name
        for hosts, measured in zip(SIZES, (small, large)):
            assert measured[name].statements == _expected(test_db, name, hosts), (name, hosts)
    sqlite = test_db.backend == "sqlite"
    counts = {name: len(_expected(test_db, name, 40)) for name in EXPECTED}
    assert counts == {
        "windowed": 3 + sqlite,
        "wider from nothing": 3 + sqlite,
        "wider again": 4 + sqlite,
        "no limit": 3 + sqlite,
        "prefer": 3 + sqlite,
        "sharing": 3 + sqlite,
    }


@pytest.mark.parametrize("shape", SHAPES)
def test_the_ranked_answers_counted_are_the_right_ones(test_db, shape):
    """What the counted requests answered: the statements are those of
    the ranking asked for, not of an empty or unranked answer."""
    two = [2, 3] if shape == "flat" else [2, 2]  # a NUMA node each, or both of host 2
    for hosts in SIZES:
        measured = _measured(test_db, shape, hosts)
        by_bound = [*range(2, hosts), 0, 1]
        assert measured["windowed"].hosts == two
        assert measured["wider from nothing"].hosts == [0]  # the less used of LATE's two
        assert measured["wider again"].hosts == [by_bound[0], by_bound[3]]
        unlimited = measured["no limit"].hosts
        assert len(unlimited) == (hosts if shape == "flat" else 2 * hosts)
        assert unlimited[0] == 2 and unlimited[-1] == 1
        assert measured["prefer"].hosts[0] == 2 and measured["prefer"].ranks[0]["score"] == 5
        assert measured["sharing"].hosts == two and measured["sharing"].sharing == [True, True]
        assert measured["windowed"].ranks[0] == {"score": 0, "keys": [15 / 16]}


@pytest.mark.parametrize(
    ("shape", "name"), [("flat", "rounds, member_of"), ("nested", "rounds, prefer")]
)
def test_a_ranked_search_widens_at_most_twice(test_db, shape, name):
    """find._ranked: the first window, once as many as its yield says give
    enough (twice as many when it gave enough but a tree left out could
    still come first), then every tree: three searches at most, whatever
    the number of trees. Two queries that used to widen round after round:

    - member_of MIXED (the 1st and the last host by bound), limit=2: each
      window gave one candidate (the 1st host's), so find._wider asked for
      2.5 times as many trees, round after round (3, 8, 21, 53: every
      tree); now the trees member_of leaves out are not bounded at all;
    - prefer=CUSTOM_R:5, a trait of the roots of a third of the nested
      hosts, which a VCPU request allocates nothing from: their bounds count
      5, their candidates 0, so each window gives enough but leaves out a
      tree whose bound comes first, and the next window is twice as large
      (3, 6, 12, 24 trees: then every tree with CUSTOM_R is read).

    Searches before the fix: member_of 2 on 4 hosts, 4 on 40, 7 on 400;
    prefer 1, 4, 7: one more search each time the trees were 2.5
    (member_of) or 2 (prefer) times as many."""
    for hosts in SIZES:
        measured = _measured(test_db, shape, hosts)[name]
        assert measured.hosts[0] == 2
        searches = measured.statements.count(GENERATION)
        assert searches <= 3, (hosts, searches, measured.statements)


@pytest.mark.parametrize("shape", SHAPES)
def test_a_wider_search_after_an_empty_window_does_not_read_the_sort_usage_again(test_db, shape):
    """resources=MEMORY_MB:1&sort=spread:VCPU&limit=1&member_of=LATE: VCPU
    (only sorted by) is read once, for the bounds, and MEMORY_MB (requested)
    once. (Before member_of left trees out of the bounds, the first window
    held neither host of LATE and the wider search read VCPU again.)"""
    for hosts in SIZES:
        measured = _measured(test_db, shape, hosts)["sort re-read"]
        assert measured.hosts == [0]
        reads = [kind for kind in measured.statements if kind[0] == "all"]
        assert reads == [every("VCPU"), every("MEMORY_MB")], (hosts, measured.statements)
