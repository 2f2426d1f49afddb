"""Alembic environment: runs on the connection placement_svc.db.migration hands it."""

from alembic import context

from placement_svc.db import tables

connection = context.config.attributes.get("connection")
if connection is None:
    raise RuntimeError("run migrations through 'placement-svc db sync'")

context.configure(connection=connection, target_metadata=tables.metadata)
with context.begin_transaction():
    context.run_migrations()
