"""world generation: one row counting the changes to the cloud's shape

placement-svc's own table. Every transaction that changes providers' trees,
inventories, traits or aggregates adds one to it, so that a process can keep
what GET /allocation_candidates reads of the cloud between requests and know
with one read when it must read it again.

Revision ID: 0002
Revises: 0001
Create Date: 2026-11-24 09:00:00
"""

import sqlalchemy as sa
from alembic import op

revision = "0002"
down_revision = "0001"
branch_labels = None
depends_on = None


def upgrade():
    table = op.create_table(
        "world_generation",
        sa.Column("id", sa.Integer(), nullable=False, autoincrement=False),
        sa.Column("generation", sa.BigInteger(), nullable=False),
        sa.PrimaryKeyConstraint("id"),
        mysql_charset="utf8mb4",
        mysql_engine="InnoDB",
    )
    op.bulk_insert(table, [{"id": 1, "generation": 0}])


def downgrade():
    op.drop_table("world_generation")
