"""Taking over a database upstream OpenStack Placement made, and handing it back.

Upstream's schema is this service's in all that its code reads and writes:
the same tables, columns, names and ids (standard resource classes numbered
by their place in os-resource-classes' list, custom ones from 10000). What
differs is bookkeeping: upstream's alembic revisions, a few indexes, and
placement-svc's own table ``world_changes`` with the triggers that count
changes to the cloud's shape in it (shape_changes.py). So adoption changes
no row of the cloud: it brings an older upstream schema up to upstream's
newest (the consumer types table of 1.38, the redundant indexes dropped),
adds placement-svc's index, and records placement-svc's first revision;
``db sync`` goes on from there to add the table and the triggers.
Handing back undoes the bookkeeping: upstream 16.0.0 then finds its own
newest revision and serves the database as it would one it made.

A database whose revision is upstream's but whose tables are not what that
revision made is refused, naming the first difference, before anything is
written; so is one with providers that have no root provider id (upstream's
own migrations refuse it too, and its online data migration fills them).
"""

from __future__ import annotations

import sys
from collections.abc import Iterable
from typing import TYPE_CHECKING

import sqlalchemy as sa
from sqlalchemy.engine import Connection, Engine

from placement_svc.db import holds, shape_changes, tables

if TYPE_CHECKING:
    from alembic.migration import MigrationContext
    from alembic.operations import Operations

# Upstream's alembic revisions, oldest first (openstack-placement 1.0.0, Stein,
# to 16.0.0): the initial schema, two data checks, consumer types, and the
# redundant indexes dropped.
UPSTREAM_REVISIONS = (
    "b4ed3a175331",
    "611cd6dffd7b",
    "b5c396305c25",
    "422ece571366",
    "a082b8bb98d0",
)
UPSTREAM_HEAD = UPSTREAM_REVISIONS[-1]
CONSUMER_TYPES = "422ece571366"  # the revision that added them
# placement-svc's first revision: upstream's newest schema, in the same
# tables and columns (our own revisions follow from it).
OUR_BASE = "0001"

# Indexes upstream's newest revision dropped as redundant with unique constraints.
REDUNDANT_INDEXES = (
    ("inventories", "inventories_resource_provider_id_idx"),
    ("inventories", "inventories_resource_provider_resource_class_idx"),
    ("placement_aggregates", "ix_placement_aggregates_uuid"),
    ("resource_providers", "resource_providers_name_idx"),
    ("resource_providers", "resource_providers_uuid_idx"),
)
# Indexes one schema has and the other lacks, created where missing on the
# way in (ours) and on the way back (upstream's), so either service finds the
# query plans it expects: (table, name, columns).
OUR_INDEXES = (
    (
        "resource_provider_traits",
        "resource_provider_traits_resource_provider_id_idx",
        ("resource_provider_id",),
    ),
)
UPSTREAM_INDEXES = (
    ("consumers", "consumers_project_id_uuid_idx", ("project_id", "uuid")),
    (
        "resource_provider_traits",
        "resource_provider_traits_resource_provider_trait_idx",
        ("resource_provider_id", "trait_id"),
    ),
)
# placement-svc's own tables, newest revision first (world_generation was
# revision 0002's).
OWN_TABLES = ("world_changes", "world_generation", "allocation_holds")


class NotAdoptable(Exception):
    """The database cannot be taken over as it is; the message says why."""


def revision(conn: Connection) -> str | None:
    """The alembic revision recorded in the database, whoever's it is."""
    return _context(conn).get_current_revision()


def _context(conn: Connection) -> MigrationContext:
    """alembic, imported here: it takes a tenth of a second, which every
    command and worker would pay, and only a migration needs it."""
    from alembic.migration import MigrationContext

    return MigrationContext.configure(conn)


def _operations(conn: Connection) -> Operations:
    from alembic.operations import Operations

    return Operations(_context(conn))


def is_upstream(found: str | None) -> bool:
    return found in UPSTREAM_REVISIONS


def expected_columns(upstream_revision: str) -> dict[str, set[str]]:
    """table -> column names, as upstream's ``upstream_revision`` leaves them."""
    expected = {table.name: {c.name for c in table.columns} for table in tables.ALL_TABLES}
    if UPSTREAM_REVISIONS.index(upstream_revision) < UPSTREAM_REVISIONS.index(CONSUMER_TYPES):
        del expected[tables.consumer_types.name]
        expected[tables.consumers.name].discard("consumer_type_id")
    return expected


def differences(conn: Connection, upstream_revision: str) -> list[str]:
    """What in the database differs from what ``upstream_revision`` makes, one
    phrase each (empty: nothing)."""
    inspector = sa.inspect(conn)
    present = set(inspector.get_table_names()) - {"alembic_version"}
    expected = expected_columns(upstream_revision)
    found = [f"table {name} is missing" for name in sorted(set(expected) - present)]
    found += [f"table {name} is not upstream's" for name in sorted(present - set(expected))]
    for name in sorted(set(expected) & present):
        columns = {c["name"] for c in inspector.get_columns(name)}
        found += [f"column {name}.{c} is missing" for c in sorted(expected[name] - columns)]
        found += [f"column {name}.{c} is not upstream's" for c in sorted(columns - expected[name])]
    return found


def check(conn: Connection) -> str:
    """The upstream revision of a database that can be adopted; raises
    NotAdoptable with the reason otherwise."""
    found = revision(conn)
    if not is_upstream(found):
        raise NotAdoptable(f"schema revision {found} is not one of upstream Placement's")
    assert found is not None
    wrong = differences(conn, found)
    if wrong:
        raise NotAdoptable(
            f"the tables are not what upstream Placement's revision {found} makes: {wrong[0]}"
            + (f" (and {len(wrong) - 1} more)" if len(wrong) > 1 else "")
        )
    rp = tables.resource_providers
    rootless = conn.execute(
        sa.select(sa.func.count()).select_from(rp).where(rp.c.root_provider_id.is_(None))
    ).scalar_one()
    if rootless:
        raise NotAdoptable(
            f"{rootless} resource providers have no root provider id: run upstream's "
            "'placement-manage db online_data_migrations' first"
        )
    return found


def adopt(engine: Engine) -> str:
    """Take over a database upstream Placement made; returns the upstream
    revision it was at. Afterwards the database is at placement-svc's first
    revision: ``migration.sync`` brings it on from there."""
    with engine.begin() as conn:
        found = check(conn)
        ops = _operations(conn)
        if UPSTREAM_REVISIONS.index(found) < UPSTREAM_REVISIONS.index(CONSUMER_TYPES):
            _add_consumer_types(ops)
        indexes = _indexes(conn)
        for table, name in REDUNDANT_INDEXES:
            if name in indexes.get(table, ()):
                ops.drop_index(name, table_name=table)
        _create_missing(ops, indexes, OUR_INDEXES)
        _stamp(conn, OUR_BASE)
    return found


def hand_back(engine: Engine, our_head: str) -> list[str]:
    """Make a database placement-svc serves one upstream Placement 16.0.0
    serves as its own; returns what was dropped that upstream does not know
    (placement-svc's own tables). Refuses a database not at ``our_head``."""
    with engine.begin() as conn:
        found = revision(conn)
        if found != our_head:
            raise NotAdoptable(
                f"the schema is at revision {found}, not {our_head}: run 'db sync' first"
            )
        ops = _operations(conn)
        present = set(sa.inspect(conn).get_table_names())
        dropped = []
        for table in OWN_TABLES:
            if table not in present:
                continue
            if table == shape_changes.TABLE:
                # The triggers first: upstream's writes would move a table
                # that is no longer there.
                shape_changes.drop(conn)
            what = f"{table} and its triggers" if table == shape_changes.TABLE else table
            if table == tables.allocation_holds.name:
                # Upstream has no holds: an expired one's allocations go
                # now, a live one's stay as ordinary allocations.
                freed = holds.sweep(conn, [], at_most=sys.maxsize).freed
                kept = conn.execute(sa.select(sa.func.count()).select_from(holds.HOLD)).scalar()
                what += f" ({len(freed)} expired holds freed, {kept} kept as allocations)"
            ops.drop_table(table)
            dropped.append(what)
        _create_missing(ops, _indexes(conn), UPSTREAM_INDEXES)
        _stamp(conn, UPSTREAM_HEAD)
    return dropped


def _add_consumer_types(ops: Operations) -> None:
    """What upstream's revision 422ece571366 adds: the consumer types table,
    and each consumer's type (none for the consumers there are)."""
    ops.create_table(
        tables.consumer_types.name,
        sa.Column("created_at", sa.DateTime(), nullable=True),
        sa.Column("updated_at", sa.DateTime(), nullable=True),
        sa.Column("id", sa.Integer(), autoincrement=True, nullable=False),
        sa.Column("name", sa.Unicode(length=255), nullable=False),
        sa.PrimaryKeyConstraint("id"),
        sa.UniqueConstraint("name", name="uniq_consumer_types0name"),
    )
    with ops.batch_alter_table(tables.consumers.name) as batch:
        batch.add_column(
            sa.Column(
                "consumer_type_id",
                sa.Integer(),
                sa.ForeignKey("consumer_types.id", name="consumers_consumer_type_id_fkey"),
                nullable=True,
            )
        )
    ops.create_index("consumers_consumer_type_id_idx", tables.consumers.name, ["consumer_type_id"])


def _indexes(conn: Connection) -> dict[str, set[str]]:
    inspector = sa.inspect(conn)
    return {
        name: {index["name"] for index in inspector.get_indexes(name) if index["name"]}
        for name in inspector.get_table_names()
    }


def _create_missing(
    ops: Operations,
    indexes: dict[str, set[str]],
    wanted: Iterable[tuple[str, str, tuple[str, ...]]],
) -> None:
    for table, name, columns in wanted:
        if name not in indexes.get(table, ()):
            ops.create_index(name, table, list(columns))


def _stamp(conn: Connection, to: str) -> None:
    conn.execute(sa.text("UPDATE alembic_version SET version_num = :to"), {"to": to})
