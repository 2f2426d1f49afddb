"""Schema migrations with alembic, driven from code (no alembic.ini needed)."""

from __future__ import annotations

from importlib import resources
from typing import TYPE_CHECKING

import sqlalchemy as sa
from sqlalchemy.engine import Connection, Engine

from placement_svc.db import adoption

if TYPE_CHECKING:
    from alembic.config import Config

# alembic is imported where a function needs it: it takes a tenth of a
# second to import, which every command and worker would pay, and only the
# schema's revision and its migrations need it.


def _config(connection: Connection | None = None) -> Config:
    from alembic.config import Config

    cfg = Config()
    cfg.set_main_option("script_location", str(resources.files("placement_svc.migrations")))
    if connection is not None:
        cfg.attributes["connection"] = connection
    return cfg


def head() -> str:
    """The newest revision the package ships."""
    from alembic.script import ScriptDirectory

    found = ScriptDirectory.from_config(_config()).get_current_head()
    if found is None:  # not for an installed package: its migrations ship with it
        raise LookupError("no migration scripts in placement_svc.migrations")
    return found


def current(engine: Engine) -> str | None:
    """The schema revision of the database, or None for an empty one."""
    with engine.connect() as conn:
        return adoption.revision(conn)


def is_empty(engine: Engine) -> bool:
    return not sa.inspect(engine).get_table_names()


def upgrade(engine: Engine, revision: str = "head") -> None:
    from alembic import command

    with engine.begin() as conn:
        command.upgrade(_config(conn), revision)


def sync_standard_names(engine: Engine) -> tuple[int, int]:
    """Insert missing standard resource classes and traits (upstream does this at start)."""
    from placement_svc.db import resource_classes, traits

    with engine.begin() as conn:
        return resource_classes.sync_standard(conn), traits.sync_standard(conn)


def sync(engine: Engine) -> str | None:
    """Schema to head, then the standard names: what ``db sync`` does. A
    database upstream Placement made is adopted first (adoption.py); returns
    the upstream revision it was at, None for any other database."""
    adopted = None
    if adoption.is_upstream(current(engine)):
        adopted = adoption.adopt(engine)
    upgrade(engine)
    sync_standard_names(engine)
    return adopted


def hand_back(engine: Engine) -> list[str]:
    """``db hand-back``: the database as upstream Placement 16.0.0 serves it
    (adoption.hand_back); returns the tables of ours that were dropped."""
    return adoption.hand_back(engine, head())
