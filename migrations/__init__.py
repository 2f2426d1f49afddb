"""Alembic migrations for placement-svc (installed as placement_svc.migrations)."""
