"""The database counts the changes to the cloud's shape itself.

A process keeps the shape GET /allocation_candidates reads (candidates/
world.py) and reads it again when the world generation moves. That
generation is the sum of the rows of ``world_changes``, and triggers on the
shape's tables add a random step to one of those rows in every statement
that changes the shape: whoever writes (placement-svc, upstream Placement
serving the same database during a rolling switch, an operator in SQL),
the next reader sees the sum move.

No single row is locked by every shape write: a statement adds to the row
of its own database session (its backend pid or connection id, modulo
STRIPES), so two writers queue on one row only when their sessions' numbers
meet modulo STRIPES. SQLite writes one transaction at a time anyway: its
triggers add to row 0.

The steps are random and the rows start at random values, so the sum names
one history of the shape, not a count of changes: a database dropped and
made again, or restored from a backup, comes back through other values than
a process has kept (two histories meet with odds of about one in 2**19 a
change).

What changes the shape (the same as tables.changes_world): any row of
inventories, provider traits and aggregates, traits and resource classes
inserted, updated or deleted; a provider inserted or deleted, or updated in
its uuid, parent or root (not a claim's generation, nor a rename).

Revision 0003 creates these triggers and ``db hand-back`` drops them; a
change to them is a new revision. On SQLite, a migration that rebuilds one
of these tables (alembic's batch mode) drops its triggers: create them again.
"""

from __future__ import annotations

import random

import sqlalchemy as sa
from sqlalchemy.engine import Connection

TABLE = "world_changes"
STRIPES = 128
MAX_STEP = 2**20
# Tables any row change of which changes the shape.
WHOLE = ("inventories", "resource_provider_traits", "resource_provider_aggregates", "traits",
         "resource_classes")  # fmt: skip
PROVIDERS = "resource_providers"
# A provider's columns that are its place in the shape.
PLACE = ("uuid", "parent_provider_id", "root_provider_id")
PREFIX = "placement_svc_shape_"
PG_FUNCTION = "placement_svc_shape_changed"


def initial_rows() -> list[dict[str, int]]:
    """One row per stripe, each at a random value: a database made again
    starts another history."""
    rng = random.SystemRandom()
    return [{"stripe": stripe, "generation": rng.randrange(2**40)} for stripe in range(STRIPES)]


def trigger_names(dialect: str) -> list[tuple[str, str]]:
    """(trigger, table) for each trigger this dialect has."""
    if dialect == "postgresql":
        return [(f"{PREFIX}{table}", table) for table in (*WHOLE, PROVIDERS)] + [
            (f"{PREFIX}{PROVIDERS}_moved", PROVIDERS)
        ]
    names = [
        (f"{PREFIX}{table}_{event}", table)
        for table in WHOLE
        for event in ("insert", "update", "delete")
    ]
    return names + [(f"{PREFIX}{PROVIDERS}_{event}", PROVIDERS)
                    for event in ("insert", "update", "delete")]  # fmt: skip


def _moved(old: str, new: str, distinct: str) -> str:
    return " OR ".join(f"{old}.{c} {distinct} {new}.{c}" for c in PLACE)


def create_statements(dialect: str) -> list[str]:
    """The DDL that makes the triggers (and PostgreSQL's trigger function)."""
    if dialect == "postgresql":
        step = f"1 + floor(random() * {MAX_STEP})::bigint"
        function = (
            f"CREATE OR REPLACE FUNCTION {PG_FUNCTION}() RETURNS trigger LANGUAGE plpgsql AS $$\n"
            f"BEGIN\n"
            f"    UPDATE {TABLE} SET generation = generation + {step}\n"
            f"     WHERE stripe = mod(pg_backend_pid(), {STRIPES});\n"
            f"    RETURN NULL;\n"
            f"END\n$$"
        )
        run = f"EXECUTE PROCEDURE {PG_FUNCTION}()"
        # Once per statement: a statement that changes many rows (a
        # provider's inventories replaced) adds one step.
        statements = [function] + [
            f"CREATE TRIGGER {PREFIX}{table} AFTER INSERT OR UPDATE OR DELETE ON {table} "
            f"FOR EACH STATEMENT {run}"
            for table in WHOLE
        ]
        statements.append(
            f"CREATE TRIGGER {PREFIX}{PROVIDERS} AFTER INSERT OR DELETE ON {PROVIDERS} "
            f"FOR EACH STATEMENT {run}"
        )
        statements.append(
            f"CREATE TRIGGER {PREFIX}{PROVIDERS}_moved AFTER UPDATE ON {PROVIDERS} "
            f"FOR EACH ROW WHEN ({_moved('OLD', 'NEW', 'IS DISTINCT FROM')}) {run}"
        )
        return statements
    if dialect in ("mysql", "mariadb"):
        bump = (
            f"UPDATE {TABLE} SET generation = generation + 1 + FLOOR(RAND() * {MAX_STEP}) "
            f"WHERE stripe = MOD(CONNECTION_ID(), {STRIPES})"
        )
        moved = " AND NOT (" + " AND ".join(f"OLD.{c} <=> NEW.{c}" for c in PLACE) + ")"
        when = {"update": moved}
    elif dialect == "sqlite":
        bump = (
            f"UPDATE {TABLE} SET generation = generation + 1 + abs(random() % {MAX_STEP}) "
            f"WHERE stripe = 0"
        )
        when = {"update": " AND (" + _moved("OLD", "NEW", "IS NOT") + ")"}
    else:
        raise ValueError(f"no shape triggers for {dialect}")
    statements = []
    for name, table in trigger_names(dialect):
        event = name.rsplit("_", 1)[1]
        condition = when.get(event, "") if table == PROVIDERS else ""
        body = bump + condition
        if dialect == "sqlite":
            body = f"BEGIN {body}; END"
        statements.append(
            f"CREATE TRIGGER {name} AFTER {event.upper()} ON {table} FOR EACH ROW {body}"
        )
    return statements


def drop_statements(dialect: str) -> list[str]:
    statements = [
        f"DROP TRIGGER IF EXISTS {name} ON {table}"
        if dialect == "postgresql"
        else f"DROP TRIGGER IF EXISTS {name}"
        for name, table in trigger_names(dialect)
    ]
    if dialect == "postgresql":
        statements.append(f"DROP FUNCTION IF EXISTS {PG_FUNCTION}()")
    return statements


def create(conn: Connection) -> None:
    for statement in create_statements(conn.dialect.name):
        conn.exec_driver_sql(statement)


def drop(conn: Connection) -> None:
    for statement in drop_statements(conn.dialect.name):
        conn.exec_driver_sql(statement)


SUM = sa.text(f"SELECT SUM(generation) FROM {TABLE}")
