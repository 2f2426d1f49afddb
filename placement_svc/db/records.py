"""Plain records the data-access modules return: no ORM objects leave db/."""

from __future__ import annotations

import contextlib
import datetime
from dataclasses import dataclass

import sqlalchemy as sa
from sqlalchemy.engine import Connection


@dataclass(frozen=True)
class Named:
    """A resource class or a trait: a name with timestamps."""

    id: int
    name: str
    created_at: datetime.datetime | None
    updated_at: datetime.datetime | None

    @property
    def modified(self) -> datetime.datetime | None:
        return self.updated_at or self.created_at


def statement_savepoint(conn: Connection) -> contextlib.AbstractContextManager:
    """Around one statement that may fail on a constraint, with the
    transaction going on after the failure: a savepoint on PostgreSQL, where
    any failed statement aborts the transaction; nothing elsewhere (MySQL,
    MariaDB and SQLite undo only the failed statement), which saves the two
    round trips of SAVEPOINT and RELEASE."""
    if conn.dialect.name == "postgresql":
        return conn.begin_nested()
    return contextlib.nullcontext()


def inserted_id(result: sa.CursorResult) -> int:
    """The primary key of the row an INSERT of one row made."""
    key = result.inserted_primary_key
    if key is None:  # not for a single-row INSERT, which is all this is for
        raise ValueError("the statement inserted no row")
    return int(key[0])


def storable(name: str) -> bool:
    """False for names no row can hold; PostgreSQL refuses to even compare
    a string with a NUL in it, so such names are never sent to it."""
    return "\x00" not in name


def get_named(conn: Connection, table: sa.Table, name: str) -> Named | None:
    """The row of ``table`` with exactly this name, or None.

    MariaDB compares "X " equal to "X", so the name is checked again here.
    """
    if not storable(name):
        return None
    row = conn.execute(sa.select(table).where(table.c.name == name)).first()
    if row is None or row.name != name:
        return None
    return Named(row.id, row.name, row.created_at, row.updated_at)
