"""world changes: the database counts the changes to the cloud's shape

The world generation was one row that placement-svc's own transactions
moved: a change written by anything else (upstream Placement serving the
same database during a rolling switch, SQL by hand) went unseen until a
process's kept shape grew old, and every shape-changing transaction of
every process queued on that row. Now triggers on the shape's tables move
one of STRIPES rows, the one of the writing session, and the generation is
their sum (placement_svc/db/shape_changes.py). The old row stays for the
processes of the previous release during a rolling upgrade.

Revision ID: 0003
Revises: 0002
Create Date: 2026-11-26 04:00:00
"""

import sqlalchemy as sa
from alembic import op

from placement_svc.db import shape_changes

revision = "0003"
down_revision = "0002"
branch_labels = None
depends_on = None


def upgrade():
    # Safe to run again after a run that stopped halfway: MySQL commits each
    # DDL statement, and refuses CREATE TRIGGER to a user without SUPER when
    # binary logging is on (error 1419); run again by one who may, this
    # finishes the work.
    bind = op.get_bind()
    present = set(sa.inspect(bind).get_table_names())
    if shape_changes.TABLE not in present:
        table = op.create_table(
            shape_changes.TABLE,
            sa.Column("stripe", sa.Integer(), nullable=False, autoincrement=False),
            sa.Column("generation", sa.BigInteger(), nullable=False),
            sa.PrimaryKeyConstraint("stripe"),
            mysql_charset="utf8mb4",
            mysql_engine="InnoDB",
        )
        op.bulk_insert(table, shape_changes.initial_rows())
    shape_changes.drop(bind)
    shape_changes.create(bind)
    # world_generation stays: processes of the previous release, still
    # serving during a rolling upgrade, update it in every shape write and
    # read it for every candidates request. Nothing of this release reads
    # it; db hand-back drops it.


def downgrade():
    bind = op.get_bind()
    if "world_generation" not in set(sa.inspect(bind).get_table_names()):
        table = op.create_table(
            "world_generation",
            sa.Column("id", sa.Integer(), nullable=False, autoincrement=False),
            sa.Column("generation", sa.BigInteger(), nullable=False),
            sa.PrimaryKeyConstraint("id"),
            mysql_charset="utf8mb4",
            mysql_engine="InnoDB",
        )
        op.bulk_insert(table, [{"id": 1, "generation": 0}])
    shape_changes.drop(bind)
    op.drop_table(shape_changes.TABLE)
