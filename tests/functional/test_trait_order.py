"""Traits looked up by a list of names come in upstream's order for each backend.

Upstream sets no ORDER BY. For ``GET /traits?name=in:...`` and for the answer
to ``PUT /resource_providers/{uuid}/traits`` (the traits it looked up by the
body's names) its SQLite and MySQL read the unique index on name, so list by
name, while its PostgreSQL scans the table's heap, so lists in id order
(creation order). A gabbi file runs the same expectations on every backend,
so these orders are pinned here; the orders shared by all backends are in
gabbits/traits-order.yaml.
"""

from __future__ import annotations

import uuid

from placement_svc import app
from tests.support import fixtures

CREATED = ["CUSTOM_ZULU", "CUSTOM_ALPHA", "CUSTOM_MIKE"]  # in this order, not by name
BY_NAME = {"sqlite": True, "mysql": True, "postgresql": False}


def _client(test_db):
    client = fixtures.api_client(app.create_app(fixtures.make_conf(), test_db.db))
    for name in CREATED:
        assert client.put(f"/traits/{name}").status_code == 201
    return client


def _lookup_order(backend, names):
    """``names`` as upstream lists a lookup on ``backend``: HW_NUMA_ROOT, a
    standard trait, is older than every custom one."""
    if BY_NAME[backend]:
        return sorted(names)
    age = ["HW_NUMA_ROOT", *CREATED]
    return sorted(names, key=age.index)


def test_name_in_lists_in_the_backends_lookup_order(backend, test_db):
    client = _client(test_db)
    asked = ["CUSTOM_MIKE", "HW_NUMA_ROOT", "CUSTOM_ZULU", "CUSTOM_ALPHA", "CUSTOM_NONE"]
    listed = client.get("/traits", params={"name": "in:" + ",".join(asked)}).json()["traits"]
    assert listed == _lookup_order(backend, asked[:4])


def test_trait_put_answers_in_the_backends_lookup_order(backend, test_db):
    client = _client(test_db)
    rp = str(uuid.uuid4())
    assert client.post("/resource_providers", json={"name": "cn", "uuid": rp}).status_code == 200
    body = {"resource_provider_generation": 0, "traits": ["CUSTOM_MIKE", "HW_NUMA_ROOT"]}
    assert client.put(f"/resource_providers/{rp}/traits", json=body).status_code == 200
    body = {"resource_provider_generation": 1, "traits": [*body["traits"], "CUSTOM_ZULU"]}
    answer = client.put(f"/resource_providers/{rp}/traits", json=body).json()
    assert answer["traits"] == _lookup_order(backend, body["traits"])
    # A GET lists them in id order on every backend.
    listed = client.get(f"/resource_providers/{rp}/traits").json()["traits"]
    assert listed == ["HW_NUMA_ROOT", "CUSTOM_ZULU", "CUSTOM_MIKE"]


def test_name_in_with_associated_keeps_the_lookup_order(backend, test_db):
    """Upstream's SQLite and MySQL still read the name index here. Its
    PostgreSQL makes the list distinct by hashing, an order no rule gives, so
    id order stands in for it."""
    client = _client(test_db)
    rp = str(uuid.uuid4())
    assert client.post("/resource_providers", json={"name": "cn", "uuid": rp}).status_code == 200
    held = ["CUSTOM_MIKE", "CUSTOM_ZULU", "HW_NUMA_ROOT"]
    body = {"resource_provider_generation": 0, "traits": held}
    assert client.put(f"/resource_providers/{rp}/traits", json=body).status_code == 200
    asked = ",".join([*held, "CUSTOM_ALPHA"])
    listed = client.get(f"/traits?associated=true&name=in:{asked}").json()["traits"]
    assert listed == _lookup_order(backend, held)
