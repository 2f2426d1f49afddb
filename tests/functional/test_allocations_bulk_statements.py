"""GET /allocations (1.46) reads any number of consumers in the same number of
SQL statements: counted for 10 consumers and for 1000, in each of its three
forms, on every backend. And naming more than 1000 uuids is a 400.

A query string naming 1000 consumers (37,000 characters) fits in a URL the
service takes (middleware.MAX_URL_LENGTH); one naming 1001 is the 400 that
names the limit, over HTTP too."""

from __future__ import annotations

import uuid
from functools import partial

import pytest
from sqlalchemy import event

from placement_svc import app, errors
from placement_svc.api.allocations import bulk_query
from placement_svc.db.engine import Database, create_engine
from placement_svc.http import middleware
from placement_svc.ops import allocations as ops
from tests.support import fixtures

HEADERS = {**fixtures.ADMIN_HEADERS, "openstack-api-version": "placement 1.46"}
MOST = 1000  # consumer uuids one request may name


def _provider(client, name, inventory, parent=None) -> str:
    rp_uuid = str(uuid.uuid4())
    body = {"name": name, "uuid": rp_uuid}
    if parent:
        body["parent_provider_uuid"] = parent
    assert client.post("/resource_providers", json=body).status_code == 200
    answer = client.put(
        f"/resource_providers/{rp_uuid}/inventories",
        json={
            "resource_provider_generation": 0,
            "inventories": {rc: {"total": total} for rc, total in inventory.items()},
        },
    )
    assert answer.status_code == 200, answer.text
    return rp_uuid


def _build(client, consumers: int) -> dict:
    """A rack (root) with a host per ten consumers, shared storage; each
    consumer a VCPU on a host and a DISK_GB on the storage, in one POST."""
    rack = _provider(client, "rack", {})
    hosts = [
        _provider(client, f"host{i}", {"VCPU": 1000}, parent=rack)
        for i in range(max(1, consumers // 10))
    ]
    storage = _provider(client, "storage", {"DISK_GB": 100000})
    owner = {"project_id": str(uuid.uuid4()), "user_id": str(uuid.uuid4())}
    wanted = {
        str(uuid.uuid4()): {
            "allocations": {
                hosts[i % len(hosts)]: {"resources": {"VCPU": 1}},
                storage: {"resources": {"DISK_GB": 1}},
            },
            **owner,
            "consumer_generation": None,
            "consumer_type": "INSTANCE",
        }
        for i in range(consumers)
    }
    answer = client.post("/allocations", json=wanted)
    assert answer.status_code == 204, answer.text
    return {"consumers": list(wanted), "hosts": hosts, "rack": rack, "storage": storage}


def _queries(cloud: dict) -> dict[str, tuple[str, int]]:
    """Each form: its query and how many consumers it answers."""
    named = cloud["consumers"][: MOST - 1] + [str(uuid.uuid4())]  # one without
    everyone = len(cloud["consumers"])
    return {
        "consumer_uuid": ("consumer_uuid=in:" + ",".join(named), len(named)),
        "resource_provider_uuid": (
            "resource_provider_uuid=in:" + ",".join(cloud["hosts"]),
            everyone,
        ),
        "storage": ("resource_provider_uuid=" + cloud["storage"], everyone),
        "in_tree": ("in_tree=" + cloud["hosts"][0], everyone),
    }


class Counter:
    """The statements run on ``engine`` inside the with block."""

    def __init__(self, engine):
        self.engine = engine
        self.seen: list[str] = []

    def _listener(self, *args):
        self.seen.append(args[2])  # the statement text

    def __enter__(self):
        event.listen(self.engine, "before_cursor_execute", self._listener)
        return self

    def __exit__(self, *_exc):
        event.remove(self.engine, "before_cursor_execute", self._listener)


def _statements(test_db, consumers: int) -> dict[str, int]:
    test_db.reset()
    engine = create_engine(test_db.url)
    db = Database(engine)
    client = fixtures.api_client(app.create_app(fixtures.make_conf(), db), HEADERS)
    cloud = _build(client, consumers)
    counts = {}
    for form, (query, expected) in _queries(cloud).items():
        assert len(query) < middleware.MAX_URL_LENGTH
        with Counter(engine) as counter:
            answer = client.get(f"/allocations?{query}")
        assert answer.status_code == 200, answer.text
        found = answer.json()["allocations"]
        assert len(found) == expected, form
        assert all(len(body["allocations"]) in (0, 2) for body in found.values()), form
        counts[form] = len(counter.seen)
    # The unit of work behind the consumer form, with every consumer named.
    with Counter(engine) as counter:
        held = db.read(partial(ops.for_consumers, consumer_uuids=cloud["consumers"]))
    assert len(held) == consumers
    assert all(len(found) == 2 for _consumer, found in held.values())
    counts["consumer_uuid, every one"] = len(counter.seen)
    engine.dispose()
    return counts


def test_statement_count_does_not_grow_with_consumers(test_db):
    small = _statements(test_db, consumers=10)
    large = _statements(test_db, consumers=1000)
    assert small == large
    assert max(large.values()) <= 2, large


@pytest.mark.parametrize("form", ["consumer_uuid", "resource_provider_uuid"])
def test_more_than_1000_uuids_is_a_400_naming_the_limit(form):
    many = [str(uuid.uuid4()) for _ in range(1001)]
    with pytest.raises(errors.BadRequest) as refused:
        bulk_query({form: ["in:" + ",".join(many)]})
    assert refused.value.code == errors.QUERYPARAM_BAD_VALUE
    assert f"'{form}' names 1001 uuids; at most 1000 are allowed per request" in str(refused.value)
    # 1000, and 1001 of which two are the same, are served.
    assert len(bulk_query({form: ["in:" + ",".join(many[:1000])]})[1]) == 1000
    assert len(bulk_query({form: ["in:" + ",".join([*many[:1000], many[0]])]})[1]) == 1000


def test_over_http_1001_uuids_are_the_400_naming_the_limit(test_db):
    """1001 uuids fit in a URL the service takes: the 400 answers, not a 414."""
    client = fixtures.api_client(app.create_app(fixtures.make_conf(), test_db.db), HEADERS)
    many = ",".join(str(uuid.uuid4()) for _ in range(MOST + 1))
    answer = client.get(f"/allocations?consumer_uuid=in:{many}")
    assert answer.status_code == 400, answer.text
    assert "names 1001 uuids; at most 1000 are allowed per request" in answer.text
