"""The body GET /allocation_candidates sends in pieces (render.chunks) is the
body render.body makes, byte for byte, at every microversion.

On a real SQLite connection (in memory, schema from the tables' metadata)
with a cloud that gives every shape of answer: nested trees, a sharing
provider, a wide host of identical devices (more candidates than one chunk
holds), classes not requested, traits. Each query is asked at each
microversion that has its parameters, as is, with a limit, capped, in a
random order and breadth-first: the pieces, joined, are exactly the compact
JSON of the dict (orjson's, what answering.render sends), so they parse to the
same body, key order included. Also: an empty answer; a capacity no 64-bit
integer holds (the standard library writes that piece); the providers to
summarise worked out from assignments as from candidates; and
answering.render_chunks sending a small body whole and a large one streamed.
"""

from __future__ import annotations

import itertools
import json
import random
import re
from urllib.parse import parse_qsl

import falcon
import falcon.testing
import orjson
import pytest
import sqlalchemy as sa
from microversion_parse import Version

from placement_svc.candidates import find, merge, render, request, search
from placement_svc.candidates.find import Settings
from placement_svc.db import tables
from placement_svc.http import answering
from tests.support.cloud_rows import Cloud, uuid_of

CLASSES = {"VCPU": 0, "MEMORY_MB": 1, "DISK_GB": 2, "CUSTOM_DEV": 10000}
SHARING = "MISC_SHARES_VIA_AGGREGATE"
AGG = "aaaaaaaa-aaaa-4aaa-8aaa-aaaaaaaaaaaa"
DEVICES = 7  # 7 * 6 * 5 * 4 = 840 candidates for four isolated groups: two chunks


@pytest.fixture(scope="module")
def conn():
    engine = sa.create_engine("sqlite://")
    with engine.connect() as connection:
        tables.metadata.create_all(connection)
        cloud = Cloud(connection, CLASSES)
        # host1: VCPU, memory and disk of its own, a NUMA child, a custom trait.
        cloud.provider(
            "host1",
            inventory={"VCPU": 8, "MEMORY_MB": 4096, "DISK_GB": 100},
            used={"VCPU": 2},
            traits=["CUSTOM_FAST"],
        )
        cloud.provider("numa1", parent="host1", inventory={"VCPU": 2})
        cloud.provider("dev1", parent="numa1", inventory={"CUSTOM_DEV": 2}, used={"CUSTOM_DEV": 1})
        # host2: its disk from the shared storage.
        cloud.provider(
            "host2",
            inventory={"VCPU": 4, "MEMORY_MB": 2048},
            used={"MEMORY_MB": 512},
            aggregates=[AGG],
        )
        cloud.provider("numa2", parent="host2", inventory={"VCPU": 2}, traits=["CUSTOM_FAST"])
        cloud.provider(
            "storage",
            inventory={"DISK_GB": 1000},
            used={"DISK_GB": 10},
            traits=[SHARING],
            aggregates=[AGG],
        )
        # Two hosts of one device each: no two isolated groups fit on either.
        for host in ("lone-a", "lone-b"):
            cloud.provider(host, inventory={"VCPU": 4})
            cloud.provider(f"{host}-dev", parent=host, inventory={"CUSTOM_DEV": 1})
        # wide: identical one-unit devices under a root with VCPU and memory.
        cloud.provider("wide", inventory={"VCPU": 64, "MEMORY_MB": 65536})
        for device in range(DEVICES):
            cloud.provider(f"wide-dev{device}", parent="wide", inventory={"CUSTOM_DEV": 1})
        # A provider no candidate of these queries uses.
        cloud.provider("idle", inventory={"MEMORY_MB": 16})
        yield connection
    engine.dispose()


FOUR_DEVICES = "&".join(f"resources{g}=CUSTOM_DEV:1" for g in range(1, 5))
# (query, the first microversion that has its parameters)
QUERIES = [
    ("resources=VCPU:1", (1, 10)),
    ("resources=VCPU:1,DISK_GB:10", (1, 10)),
    ("resources=VCPU:1,MEMORY_MB:256,DISK_GB:10", (1, 10)),
    ("resources=VCPU:1000", (1, 10)),  # empty
    ("resources=VCPU:1&limit=2", (1, 16)),
    ("resources=VCPU:1,DISK_GB:10&limit=3", (1, 16)),
    ("resources=VCPU:1&required=CUSTOM_FAST", (1, 17)),
    ("resources=VCPU:1&required=!CUSTOM_FAST", (1, 22)),
    (f"{FOUR_DEVICES}&group_policy=isolate", (1, 25)),
    (f"{FOUR_DEVICES}&resources=VCPU:2,MEMORY_MB:128&group_policy=isolate", (1, 25)),
    (f"{FOUR_DEVICES}&resources=VCPU:2&group_policy=isolate&limit=600", (1, 25)),
    ("resources=VCPU:1,MEMORY_MB:64&resources1=CUSTOM_DEV:1&group_policy=none", (1, 25)),
    ("resources1=VCPU:1&resources2=DISK_GB:5&group_policy=none", (1, 25)),
    ("resources1=VCPU:1&resources2=DISK_GB:5&group_policy=isolate&limit=1", (1, 25)),
    ("resources_A=CUSTOM_DEV:1&resources_B=VCPU:1&group_policy=none", (1, 33)),
    (
        "resources1=CUSTOM_DEV:1&required2=CUSTOM_FAST&same_subtree=1,2&group_policy=none",
        (1, 36),
    ),
    ("resources=VCPU:1&root_required=CUSTOM_FAST", (1, 35)),
]
VERSIONS = [
    (1, 10),
    (1, 11),
    (1, 12),
    (1, 16),
    (1, 17),
    (1, 22),
    (1, 25),
    (1, 26),
    (1, 27),
    (1, 28),
    (1, 29),
    (1, 33),
    (1, 34),
    (1, 35),
    (1, 36),
    (1, 39),
    (1, 43),
]
CASES = [
    pytest.param(query, Version(*version), id=f"{version[0]}.{version[1]}-{query}")
    for query, since in QUERIES
    for version in VERSIONS
    if version >= since
]


def ask(qs: str, version: Version) -> request.Request:
    params: dict[str, list[str]] = {}
    for key, value in parse_qsl(qs, keep_blank_values=True):
        params.setdefault(key, []).append(value)
    return request.parse(params, version)


def answer(conn, qs: str, version: Version, settings=Settings(), rng=None) -> find.Answer:
    return find._answer(conn, ask(qs, version), version, settings, rng).answer


def assert_same(answered: find.Answer) -> bytes:
    """The pieces joined are the dict's compact JSON, byte for byte."""
    pieces = list(answered.chunks())
    streamed = b"".join(pieces)
    body = answered.body()
    assert streamed == orjson.dumps(body)
    assert json.loads(streamed) == body
    assert list(json.loads(streamed)) == ["allocation_requests", "provider_summaries"]
    assert len(pieces) == 1 + -(-len(answered.chosen) // render.BATCH)
    return streamed


@pytest.mark.parametrize("qs, version", CASES)
def test_the_pieces_are_the_body(conn, qs, version):
    assert_same(answer(conn, qs, version))


@pytest.mark.parametrize("qs, version", CASES)
def test_the_pieces_are_the_body_capped_shuffled_and_breadth_first(conn, qs, version):
    for settings in (Settings(max_candidates=3), Settings(strategy="breadth-first")):
        assert_same(answer(conn, qs, version, settings))
    assert_same(answer(conn, qs, version, rng=random.Random(7)))


def test_the_cloud_gives_every_shape_of_answer(conn):
    """What the cases above rest on: several chunks, an empty answer, a
    limit that cuts a bigger answer, repeated providers in one candidate."""
    latest = Version(1, 39)
    wide = answer(conn, f"{FOUR_DEVICES}&group_policy=isolate", latest)
    assert len(wide.chosen) == 7 * 6 * 5 * 4 > render.BATCH
    assert answer(conn, "resources=VCPU:1000", latest).chosen == []
    assert assert_same(answer(conn, "resources=VCPU:1000", latest)) == (
        b'{"allocation_requests":[],"provider_summaries":{}}'
    )
    nova = answer(conn, "resources=VCPU:1,MEMORY_MB:256,DISK_GB:10", latest)
    assert any(len(set(assigned)) < len(assigned) for assigned in nova.chosen)
    assert any(len(set(assigned)) == len(assigned) for assigned in nova.chosen)
    cut = answer(conn, "resources=VCPU:1,DISK_GB:10&limit=3", Version(1, 28))
    assert len(cut.chosen) == 3


@pytest.mark.parametrize("qs, version", CASES)
def test_the_providers_to_summarise_are_the_same_from_assignments(conn, qs, version):
    """render.providers_to_summarise (assignments) against
    render.summary_providers (candidates), limit cut included."""
    wanted = ask(qs, version)
    found = search.search(conn, wanted)
    walked = merge.assignments(wanted, found)
    whole = list(walked.stream)
    for limit in (None, 1, 2, len(whole)):
        chosen, kept = merge.choose(iter(whole), limit, None, keep_whole=True)
        as_candidates = [merge.candidate(walked.slots, a) for a in chosen]
        whole_candidates = [merge.candidate(walked.slots, a) for a in kept] if kept else None
        assert render.providers_to_summarise(
            found, walked.slots, chosen, version, kept
        ) == render.summary_providers(found, as_candidates, version, whole_candidates)


def test_assignments_make_the_candidates_generate_yields(conn):
    for qs, since in QUERIES:
        version = max(Version(*since), Version(1, 29))
        wanted = ask(qs, version)
        found = search.search(conn, wanted)
        walked = merge.assignments(wanted, found)
        made = [merge.candidate(walked.slots, a) for a in walked.stream]
        assert made == list(merge.generate(wanted, found))


def test_a_capacity_beyond_64_bits_is_written_by_the_standard_library(conn):
    """orjson refuses an integer beyond 64 bits; that piece falls back, as
    answering.dumps does, and still parses to the body."""
    savepoint = conn.begin_nested()
    try:
        Cloud(conn, CLASSES, create_classes=False).provider(
            "vast", inventory={"DISK_GB": 1000}, ratio=1e30
        )
        answered = answer(conn, "resources=DISK_GB:10", Version(1, 39))
        streamed = b"".join(answered.chunks())
        body = answered.body()
        assert json.loads(streamed) == body
        vast = body["provider_summaries"][uuid_of("vast")]["resources"]["DISK_GB"]
        assert vast["capacity"] == int(1000 * 1e30)
    finally:
        savepoint.rollback()


# -- answering.render_chunks --------------------------------------------------------


def _served(pieces, whole_up_to, done=None):
    app = falcon.App()

    class Resource:
        def on_get(self, req, resp):
            answering.render_chunks(resp, iter(pieces), done, whole_up_to)

    app.add_route("/", Resource())
    answered = {}

    def start_response(status, headers, exc_info=None):
        answered["status"], answered["headers"] = status, dict(headers)

    iterable = app(falcon.testing.create_environ("/"), start_response)
    return answered, iterable


def test_a_body_within_the_bound_is_sent_whole_with_its_length():
    spent = []
    answered, iterable = _served([b'{"a":', b"[1,2]", b"}"], 100, spent.append)
    assert answered["status"].startswith("200")
    assert answered["headers"]["content-length"] == "11"
    assert b"".join(iterable) == b'{"a":[1,2]}'
    assert len(spent) == 1  # made in full before the handler returned


def test_a_body_beyond_the_bound_is_streamed_and_made_as_it_is_read():
    made = []

    def pieces():
        for n in range(5):
            made.append(n)
            yield b"x" * 10

    spent = []
    answered, iterable = _served(pieces(), 15, spent.append)
    assert "content-length" not in answered["headers"]
    assert made == [0, 1]  # two pieces made before the handler returned, the others later
    assert spent == []
    assert b"".join(iterable) == b"x" * 50
    assert made == [0, 1, 2, 3, 4] and len(spent) == 1


def test_a_streamed_body_the_client_leaves_half_way_still_reports_its_time():
    spent = []
    _answered, iterable = _served((b"x" * 10 for _ in range(5)), 15, spent.append)
    iterator = iter(iterable)
    next(iterator)
    iterable.close()  # what the WSGI server does when the client goes away
    assert len(spent) == 1


# -- a limited answer from the first trees ------------------------------------

LIMITED = [
    pytest.param(query, Version(*version), id=f"{version[0]}.{version[1]}-{query}")
    for query, since in QUERIES
    for version in VERSIONS
    if version >= max(since, (1, 29))
]


@pytest.mark.parametrize("qs, version", LIMITED)
def test_a_limited_answer_from_the_first_trees_is_the_whole_searchs(conn, monkeypatch, qs, version):
    """find reads the first anchors' trees only for a limit (depth-first,
    in order, from 1.29): the answer is the one a search of every tree gives."""
    qs = re.sub(r"&limit=\d+", "", qs)
    for limit, cap in itertools.product((1, 2, 3, 5, 50, 700), (-1, 2)):
        settings = Settings(max_candidates=cap)
        windowed = answer(conn, f"{qs}&limit={limit}", version, settings)
        with monkeypatch.context() as patch:
            patch.setattr(find, "_first", lambda *args: None)
            whole = answer(conn, f"{qs}&limit={limit}", version, settings)
        assert windowed.chosen == whole.chosen
        assert windowed.providers == whole.providers
        assert b"".join(windowed.chunks()) == b"".join(whole.chunks())


def test_the_first_trees_are_read_alone_when_they_give_enough(conn, monkeypatch):
    searched = []
    real = search.search

    def spy(connection, wanted, worlds=None, first=None, answer_only=False, **ranked):
        assert answer_only  # the answer's own searches
        assert not any(ranked.values())  # an unranked query: no ranked window
        found = real(connection, wanted, worlds, first, answer_only)
        searched.append((first, found.complete))
        return found

    monkeypatch.setattr(search, "search", spy)
    latest = Version(1, 39)
    # host1, host2, lone-a, lone-b and wide have VCPU: the first two give one each.
    assert len(answer(conn, "resources=VCPU:1&limit=1", latest).chosen) == 1
    assert searched == [(2, False)]
    searched.clear()
    # Two isolated devices: host1 and lone-a (the first two anchors) give
    # none, so every tree is read, and wide gives them.
    two = "resources1=CUSTOM_DEV:1&resources2=CUSTOM_DEV:1&group_policy=isolate&limit=1"
    assert len(answer(conn, two, latest).chosen) == 1
    assert searched == [(2, False), (None, True)]
    searched.clear()
    # host1's and host2's trees have the trait, of the first four anchors':
    # 2 of the 3 asked, so a second window reads 4 * 3 / 2 and a quarter
    # more, 8 anchors (here every tree).
    assert len(answer(conn, "resources=VCPU:1&required=CUSTOM_FAST&limit=3", latest).chosen) == 2
    assert searched == [(4, False), (8, True)]
    searched.clear()
    # Neither a random order, nor breadth-first, nor before 1.29, nor without limit.
    answer(conn, "resources=VCPU:1&limit=1", latest, rng=random.Random(1))
    answer(conn, "resources=VCPU:1&limit=1", latest, Settings(strategy="breadth-first"))
    answer(conn, "resources=VCPU:1&limit=1", Version(1, 28))
    answer(conn, "resources=VCPU:1", latest)
    assert searched == [(None, True)] * 4


def test_a_second_window_is_sized_by_the_yield_of_the_first():
    # 1251 anchors gave 600 of 1000: 2085 and a quarter more.
    assert find._wider(1251, 600, 1000) == 2085 + 521 + 1
    assert find._wider(1251, 0, 1000) is None  # no yield to go by: every tree
    # a yield that asks for more than WIDER_AT_MOST times the first: every tree
    assert find._wider(1251, 10, 1000) is None
    assert find._wider(4, 2, 3) == 8
