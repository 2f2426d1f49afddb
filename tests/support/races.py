"""A provider changed by another writer between a unit of work's read and its write.

Two real writers can race like this on PostgreSQL and MariaDB only: SQLite
writers take the write lock at BEGIN, one after the other. So the tests that
must see the race on every backend replay it inside the unit of work's own
transaction: right after it reads the providers, their generations move, as
if another writer had committed in between. What the unit of work read is then
stale when it bumps the generations, and the conditional UPDATE finds nothing:
a genuine generation conflict, met by the real statements.

The other writer's change outlives the run it interrupted, as a committed one
would: the unit of work's rollback takes it away, so each later transaction
gets it again before its first read (it is in the database only as far as
the unit of work's last transaction committed).
"""

from __future__ import annotations

from collections import Counter

import sqlalchemy as sa

from placement_svc.db import providers, tables

RP = tables.resource_providers


class ChangedAfterRead:
    """The next ``times`` reads of providers through ``providers.<reader>`` are
    each followed by a change to the providers read; ``reads`` counts every
    read, ``left`` the changes still to come. A new one for the same reader
    takes the place of the last."""

    def __init__(self, monkeypatch, times: int, reader: str = "by_uuids"):
        self.left = times
        self.reads = 0
        current = getattr(providers, reader)
        previous = getattr(current, "__self__", None)
        self._real = previous._real if isinstance(previous, ChangedAfterRead) else current
        self._changed: Counter[int] = Counter()  # provider id: changes made by the other writer
        self._transaction = None
        monkeypatch.setattr(providers, reader, self._read)

    def _read(self, conn, *args, **kwargs):
        if conn.get_transaction() is not self._transaction:
            self._transaction = conn.get_transaction()
            for provider_id, times in self._changed.items():
                self._change(conn, [provider_id], times)  # committed before this run began
        found = self._real(conn, *args, **kwargs)
        self.reads += 1
        if self.left and found:
            self.left -= 1
            self._change(conn, [p.id for p in found], 1)
            self._changed.update(p.id for p in found)
        return found

    @staticmethod
    def _change(conn, provider_ids: list[int], times: int) -> None:
        conn.execute(
            sa.update(RP)
            .where(RP.c.id.in_(provider_ids))
            .values(generation=RP.c.generation + times)
        )
