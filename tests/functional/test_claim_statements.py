"""A claim's statements, counted: what nova's scheduler sends for every
server it boots (PUT /allocations/{consumer}, 1.36, a new consumer) runs a
fixed, short list of statements on every backend, and moving or releasing a
consumer a few more; none of them grows with the cloud or repeats per class.

The list is the contract bench/claim_cost.py measures: a statement added to
the claim path shows up here first.
"""

from __future__ import annotations

import re
import uuid

import pytest

from placement_svc import app
from placement_svc.db.engine import Database, create_engine
from tests.functional.test_allocations_bulk_statements import Counter, _provider
from tests.support import fixtures

HEADERS = {**fixtures.ADMIN_HEADERS, "openstack-api-version": "placement 1.36"}
FLAVOR = {"VCPU": 1, "MEMORY_MB": 512, "DISK_GB": 1}
OWNER = {"project_id": "claims-project", "user_id": "claims-user"}

# What a new consumer's claim runs, in order, by its first words and table.
NEW_CONSUMER = [
    "SELECT allocation_holds allocations",  # expired holds to sweep, the consumer's own (1.51)
    "SELECT consumers projects users",  # is the consumer there (with its owner)?
    "SELECT projects UNION users",  # the project's and user's ids, one statement
    "INSERT consumers",  # the consumer, at generation 1
    "SELECT resource_providers",  # the providers named, with their generations
    "SELECT resource_classes inventories",  # class ids and inventories, one statement
    "UPDATE resource_providers",  # the guarded generation bump
    "DELETE allocations",  # what the consumer held (nothing), returned
    "SELECT allocations allocation_holds",  # the usage of the touched providers, but lapsed holds
    "INSERT allocations",  # the claim, one statement for every class
]
# MariaDB lacks INSERT ... ON CONFLICT: a racing writer's consumer is caught
# inside a savepoint instead.
SAVEPOINTED = {"mysql": ["SAVEPOINT", "INSERT consumers", "RELEASE SAVEPOINT"]}
# Moving an existing consumer: no insert of it, its generation bumped at the end.
MOVE = [
    "SELECT allocation_holds allocations",
    "SELECT consumers projects users",
    "SELECT projects UNION users",
    "SELECT resource_providers",
    "SELECT resource_classes inventories",
    "UPDATE resource_providers",
    "DELETE allocations",
    "SELECT allocations allocation_holds",
    "INSERT allocations",
    "UPDATE consumers",
]
# Releasing all (PUT with no allocations): its current ones are read to know
# which providers it leaves, and the consumer goes with its last allocation.
RELEASE = [
    "SELECT allocation_holds allocations",
    "SELECT consumers projects users",
    "SELECT projects UNION users",
    "SELECT allocations resource_providers resource_classes",
    "SELECT resource_providers",  # the providers it leaves, which it did not name
    "SELECT resource_classes inventories",
    "UPDATE resource_providers",
    "DELETE allocations",
    "SELECT allocations allocation_holds",
    "UPDATE consumers",
    "DELETE consumers allocations",  # unless it holds allocations still
    "DELETE allocation_holds allocations",  # and its hold with it (1.51)
]
TABLES = (
    "allocation_holds",
    "consumers",
    "projects",
    "users",
    "resource_providers",
    "resource_classes",
    "inventories",
    "allocations",
)


def shape(statement: str) -> str:
    """'SELECT consumers', 'UPDATE resource_providers'...: the verb, then the
    tables named, in order of first mention (joined and united ones too)."""
    words = statement.split()
    verb = words[0].upper()
    if verb in ("SAVEPOINT", "RELEASE"):
        return " ".join(words[:2]).upper() if verb == "RELEASE" else verb
    named = re.findall(r"\b(" + "|".join(TABLES) + r")\b", statement)
    if verb == "SELECT" and "UNION" in statement.upper():
        return "SELECT " + " UNION ".join(dict.fromkeys(named))
    return " ".join([verb, *dict.fromkeys(named)])


def _claim(client, consumer: str, host: str | None, generation: int | None) -> None:
    allocations = {host: {"resources": FLAVOR}} if host else {}
    body = {"allocations": allocations, **OWNER, "consumer_generation": generation}
    answer = client.put(f"/allocations/{consumer}", json=body)
    assert answer.status_code == 204, answer.text


@pytest.fixture
def cloud(test_db):
    test_db.reset()
    engine = create_engine(test_db.url)
    client = fixtures.api_client(app.create_app(fixtures.make_conf(), Database(engine)), HEADERS)
    hosts = [_provider(client, f"host{n}", {rc: 10**6 for rc in FLAVOR}) for n in range(20)]
    _claim(client, str(uuid.uuid4()), hosts[0], None)  # owners known, world read
    yield engine, client, hosts
    engine.dispose()


def _counted(engine, work) -> list[str]:
    with Counter(engine) as counter:
        work()
    return [shape(s) for s in counter.seen if not s.upper().startswith(("BEGIN", "COMMIT"))]


def test_a_new_consumer_claim_is_ten_statements(cloud, backend):
    engine, client, hosts = cloud
    expected = list(NEW_CONSUMER)
    if backend in SAVEPOINTED:
        at = expected.index("INSERT consumers")
        expected[at : at + 1] = SAVEPOINTED[backend]
    for host in hosts[:3]:
        assert _counted(engine, lambda h=host: _claim(client, str(uuid.uuid4()), h, None)) == (
            expected
        )


def test_moving_and_releasing_a_consumer(cloud):
    engine, client, hosts = cloud
    consumer = str(uuid.uuid4())
    _claim(client, consumer, hosts[1], None)
    assert _counted(engine, lambda: _claim(client, consumer, hosts[2], 1)) == MOVE
    assert _counted(engine, lambda: _claim(client, consumer, None, 2)) == RELEASE
    assert client.get(f"/allocations/{consumer}").json()["allocations"] == {}
