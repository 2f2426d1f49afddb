"""An empty GET /allocation_candidates says in the request log why it is empty.

One INFO line on ``placement_svc.requests``, "No allocation candidates for
<request id>: <step>", where the request id is the one the answer's
``x-openstack-request-id`` header carries and the step is the first one of
the explanation that left nothing. Neither an answer with candidates nor
an empty one costs a statement more for it: each runs the very statements
``find.find`` alone issues (counted with a ``before_cursor_execute``
listener on the engine), an empty one as many as one with candidates: the
reason is the explanation of the search the answer ran, on the shape of
the cloud it was made of, with nothing read again. On every database
backend, through the whole WSGI application.
"""

from __future__ import annotations

import logging
from functools import partial
from urllib.parse import parse_qs

import pytest

from placement_svc import app
from placement_svc import microversion as mv
from placement_svc.candidates import find, request
from placement_svc.db.engine import Database, create_engine
from tests.support import fixtures
from tests.support.small_cloud import FLAVOR, small_cloud
from tests.support.statements import Statements

REQUESTS = "placement_svc.requests"
EMPTY = "No allocation candidates for "


@pytest.fixture
def cloud(test_db):
    """(a client of the whole application, its engine, its configuration) on
    this backend's test database, with the small cloud in it
    (tests/support/small_cloud.py): three hosts, none with room for FLAVOR."""
    engine = create_engine(test_db.url)
    conf = fixtures.make_conf()
    client = fixtures.api_client(app.create_app(conf, Database(engine)))
    small_cloud(client)
    yield client, engine, conf
    engine.dispose()


def requests_log(caplog) -> list[logging.LogRecord]:
    return [r for r in caplog.records if r.name == REQUESTS]


@pytest.mark.parametrize(
    "query, step",
    [
        pytest.param(FLAVOR, "tree_traits HW_CPU_X86_AVX2 left none of 1 tree", id="a-merge-rule"),
        pytest.param(
            "resources=VCPU:4,MEMORY_MB:65536",
            "group '' resources MEMORY_MB:65536 left none of 3 providers",
            id="a-group-filter",
        ),
        pytest.param(
            "resources=VCPU:1&member_of=eeeeeeee-0000-4000-8000-00000000000e",
            "group '' member_of eeeeeeee-0000-4000-8000-00000000000e left none of 3 providers",
            id="member-of",
        ),
    ],
)
def test_an_empty_answer_logs_one_line_naming_the_step(cloud, caplog, query, step):
    client, _engine, _conf = cloud
    caplog.set_level(logging.INFO, logger=REQUESTS)
    caplog.clear()
    answer = client.get(f"/allocation_candidates?{query}")
    assert answer.status_code == 200, answer.text
    assert answer.json()["allocation_requests"] == []
    request_id = answer.headers["x-openstack-request-id"]
    records = requests_log(caplog)
    empty = [r for r in records if r.getMessage().startswith(EMPTY)]
    assert [r.getMessage() for r in empty] == [f"{EMPTY}{request_id}: {step}"]
    assert empty[0].levelno == logging.INFO
    # The request's own line follows, with the same id; nothing else.
    others = [r.getMessage() for r in records if r not in empty]
    assert len(others) == 1
    assert '"GET /allocation_candidates?' in others[0]
    assert f"request_id: {request_id} " in others[0]


@pytest.mark.parametrize(
    "query",
    [
        "resources=VCPU:2,MEMORY_MB:2048",
        "resources=VCPU:4,MEMORY_MB:8192",
        "resources=VCPU:2&required=HW_CPU_X86_AVX2&limit=1",
    ],
)
def test_an_answer_with_candidates_logs_no_reason_and_runs_only_the_search(cloud, caplog, query):
    client, engine, conf = cloud
    version = mv.MAX_VERSION
    wanted = request.parse(parse_qs(query, keep_blank_values=True), version)
    work = partial(
        find.find, wanted=wanted, version=version, settings=find.Settings.of(conf.placement)
    )
    Database(engine).read(work)  # the process reads the cloud's shape once, and keeps it
    with Statements(engine) as alone:
        Database(engine).read(work)
    caplog.set_level(logging.INFO, logger=REQUESTS)
    caplog.clear()
    with Statements(engine) as served:
        answer = client.get(f"/allocation_candidates?{query}")
    assert answer.status_code == 200, answer.text
    assert answer.json()["allocation_requests"]
    assert not [r for r in requests_log(caplog) if r.getMessage().startswith(EMPTY)]
    assert len(requests_log(caplog)) == 1
    assert served == alone


EMPTY_QUERIES = [
    FLAVOR,
    "resources=VCPU:4,MEMORY_MB:65536",
    "resources=VCPU:1&member_of=eeeeeeee-0000-4000-8000-00000000000e",
]
WITH_CANDIDATES = "resources=VCPU:2,MEMORY_MB:2048"


def _alone(engine, conf, query: str) -> list[str]:
    """The statements find.find alone runs for ``query`` (the shape of the
    cloud read once before, and kept)."""
    version = mv.MAX_VERSION
    wanted = request.parse(parse_qs(query, keep_blank_values=True), version)
    work = partial(
        find.find, wanted=wanted, version=version, settings=find.Settings.of(conf.placement)
    )
    Database(engine).read(work)  # the process reads the cloud's shape once, and keeps it
    with Statements(engine) as alone:
        Database(engine).read(work)
    return alone


@pytest.mark.parametrize("query", EMPTY_QUERIES)
def test_the_reason_of_an_empty_answer_costs_no_statement(cloud, caplog, query):
    """An empty answer logs its reason and runs find.find's statements, no
    more: as many as an answer with candidates (three here, the shape of
    the cloud being kept). The explanation used to read the whole cloud
    again: four statements more, five with member_of."""
    client, engine, conf = cloud
    alone = _alone(engine, conf, query)
    caplog.set_level(logging.INFO, logger=REQUESTS)
    caplog.clear()
    with Statements(engine) as served:
        assert client.get(f"/allocation_candidates?{query}").json()["allocation_requests"] == []
    assert [r for r in requests_log(caplog) if r.getMessage().startswith(EMPTY)]
    assert served == alone
    with Statements(engine) as answered:
        body = client.get(f"/allocation_candidates?{WITH_CANDIDATES}").json()
    assert body["allocation_requests"]
    assert len(served) == len(answered) == len(_alone(engine, conf, WITH_CANDIDATES))
