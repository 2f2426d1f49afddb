"""Code tested on a real database connection, no HTTP (tests/unit opens none).

The units of work (``placement_svc.ops``, test_ops_*.py) and the explain
agreement run once per backend of the matrix (the ``db`` fixture below,
through tests/conftest.py: SQLite always, PostgreSQL and MariaDB when wanted
and reachable), each time on an emptied database with the standard classes
and traits in it. The engine, the kept world, the candidates search and the
streamed body (test_engine, test_candidates_world, test_candidates_find,
test_render_stream) open SQLite databases of their own.
"""

from __future__ import annotations

import uuid

import pytest
import sqlalchemy as sa

from placement_svc.db import names, tables
from placement_svc.db.engine import Database
from tests.support import databases


@pytest.fixture
def db(test_db: databases.TestDatabase) -> Database:
    """The unit of work's boundary over a fresh database of one backend."""
    return test_db.db


def new_uuid() -> str:
    return str(uuid.uuid4())


def add_provider(db: Database, inventory: dict[str, int] | None = None, **columns) -> str:
    """A root provider (with ``total`` of each class in ``inventory``), written
    straight to the tables so a test of one unit of work needs no other; its uuid."""
    rp_uuid = columns.pop("uuid", None) or new_uuid()

    def write(conn):
        rp_id = conn.execute(
            sa.insert(tables.resource_providers).values(
                uuid=rp_uuid, name=columns.get("name", f"rp-{rp_uuid}"), generation=0
            )
        ).inserted_primary_key[0]
        conn.execute(
            sa.update(tables.resource_providers)
            .where(tables.resource_providers.c.id == rp_id)
            .values(root_provider_id=rp_id)
        )
        if inventory:
            ids = names.resource_class_ids(conn, inventory)
            conn.execute(
                sa.insert(tables.inventories),
                [
                    {
                        "resource_provider_id": rp_id,
                        "resource_class_id": ids[rc],
                        "total": total,
                        "reserved": 0,
                        "min_unit": 1,
                        "max_unit": total,
                        "step_size": 1,
                        "allocation_ratio": 1.0,
                    }
                    for rc, total in inventory.items()
                ],
            )

    db.write(write)
    return rp_uuid


def add_allocation(db: Database, rp_uuid: str, resources: dict[str, int]) -> str:
    """Allocation rows of a new consumer on the provider (no consumer row: the
    rows alone are what makes inventory in use); the consumer's uuid."""
    consumer_uuid = new_uuid()

    def write(conn):
        rp = tables.resource_providers
        rp_id = conn.execute(sa.select(rp.c.id).where(rp.c.uuid == rp_uuid)).scalar_one()
        ids = names.resource_class_ids(conn, resources)
        conn.execute(
            sa.insert(tables.allocations),
            [
                {
                    "resource_provider_id": rp_id,
                    "resource_class_id": ids[rc],
                    "consumer_id": consumer_uuid,
                    "used": used,
                }
                for rc, used in resources.items()
            ],
        )

    db.write(write)
    return consumer_uuid
