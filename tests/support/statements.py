"""Counting the SQL an engine runs: ``with Statements(engine) as seen:``
collects the text of every statement run inside the block (a
``before_cursor_execute`` listener on the engine)."""

from __future__ import annotations

from sqlalchemy import event
from sqlalchemy.engine import Engine


class Statements:
    """Every SQL statement an engine runs inside the block."""

    def __init__(self, engine: Engine):
        self.engine = engine
        self.seen: list[str] = []

    def _listen(self, conn, cursor, statement, *_args):
        self.seen.append(statement)

    def __enter__(self) -> list[str]:
        event.listen(self.engine, "before_cursor_execute", self._listen)
        return self.seen

    def __exit__(self, *exc_info):
        event.remove(self.engine, "before_cursor_execute", self._listen)
