"""allocation holds: allocations that expire unless confirmed (1.51)

placement-svc's own table (placement_svc/db/holds.py): a consumer whose
allocations are held, and when the hold expires, in microseconds since the
epoch by the database's clock. ``db hand-back`` drops it: upstream keeps
the allocations of a hold that has not expired as ordinary ones.

Revision ID: 0004
Revises: 0003
Create Date: 2026-11-26 19:00:00
"""

import sqlalchemy as sa
from alembic import op

from placement_svc.db.tables import Name

revision = "0004"
down_revision = "0003"
branch_labels = None
depends_on = None


def upgrade():
    # Safe to run again over a schema whose version was set back (as 0003's
    # own re-run after a halfway stop does): what is there already stays.
    if "allocation_holds" in sa.inspect(op.get_bind()).get_table_names():
        return
    op.create_table(
        "allocation_holds",
        sa.Column("consumer_id", Name(36), nullable=False),
        sa.Column("expires_at", sa.BigInteger(), nullable=False),
        sa.Column("created_at", sa.DateTime(), nullable=True),
        sa.PrimaryKeyConstraint("consumer_id"),
        mysql_charset="utf8mb4",
        mysql_engine="InnoDB",
    )
    op.create_index("allocation_holds_expires_at_idx", "allocation_holds", ["expires_at"])


def downgrade():
    op.drop_table("allocation_holds")
