"""Which failures are worth running a whole unit of work again, and how often.

The one retry policy of the service. Two kinds of failure may not happen
again in a new transaction:

- the database's: a deadlock, a serialization failure, a lock wait that
  timed out, a connection lost, a Galera node not ready, a server out of
  reach (``[placement_database] db_max_retries`` retries);
- a provider generation conflict that is no client's fault
  (``ProviderChanged``: another writer changed a provider between the unit
  of work's read and its write; ``[placement] allocation_conflict_retry_count``
  retries, upstream's option), or a consumer's (``ConsumerMoved``: an
  allocation delta without a consumer generation, whose consumer another
  writer changed meanwhile; the same budget).

``retry_reason`` names the reason (the metrics' label, the log's words);
``Retries`` counts one unit of work's retries against their budgets;
``Database._run`` (engine.py) runs the unit of work again while they allow
it. A conflict over a generation the client gave (a provider's or a
consumer's) is never retried: only the client can decide what to write now.
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from typing import Any

from sqlalchemy import event
from sqlalchemy.engine import Engine
from sqlalchemy.exc import DBAPIError

from placement_svc.db.exceptions import ConsumerMoved, DomainError, ProviderChanged

# Why a transaction is run again: deadlock, serialization, lock (a lock wait
# that timed out, SQLite's "database is locked"), lost_connection,
# not_ready (a Galera node that is not part of the cluster yet, or any
# more), or unreachable (no connection could be made; see Database._run).
# MySQL/MariaDB error codes: deadlock, lock wait timeout, server gone, lost
# connection, Galera's "WSREP has not yet prepared node for application use"
# (1047, ER_UNKNOWN_COM_ERROR reused: some releases say "Unknown command");
# PostgreSQL SQLSTATEs: serialization failure, deadlock. A Galera
# certification failure is a 1213 raised by the COMMIT: the whole
# transaction runs again, like any deadlock. Other errors at COMMIT (1180,
# "Got error N during COMMIT", e.g. a write set over wsrep_max_ws_size)
# would fail again: not retried.
_MYSQL_REASONS = {
    1213: "deadlock",
    1205: "lock",
    2006: "lost_connection",
    2013: "lost_connection",
    1047: "not_ready",
}
_PG_REASONS = {"40001": "serialization", "40P01": "deadlock"}
_MYSQL_NO_SAVEPOINT = 1305  # "SAVEPOINT ... does not exist"
_MYSQL_NOT_READY = 1047

# Reasons for which the database is out of reach rather than busy: another
# try soon is worth one (a failover, a node rejoining), not twenty; then the
# request fails at once with 503 and a longer Retry-After.
OUT_OF_REACH = frozenset({"unreachable", "not_ready"})
# A provider changed under an allocation write (ProviderChanged): run it
# again at once, the other writer has committed.
GENERATION_CONFLICT = "generation_conflict"
# A unit of work that waited pool_timeout seconds for a pooled connection
# (DatabaseUnavailable.reason): never retried, see Database._run.
POOL_TIMEOUT = "pool_timeout"


def is_retryable(exc: BaseException) -> bool:
    """True for failures where re-running the whole transaction may succeed."""
    return retry_reason(exc) is not None


def _mysql_error_number(exc: BaseException) -> int | None:
    args = getattr(getattr(exc, "orig", None), "args", ())
    return args[0] if args and isinstance(args[0], int) else None


def retry_reason(exc: BaseException) -> str | None:
    """Why re-running the whole transaction may succeed (see _MYSQL_REASONS
    and GENERATION_CONFLICT), or None when it would fail again."""
    if isinstance(exc, (ProviderChanged, ConsumerMoved)):
        return GENERATION_CONFLICT
    if not isinstance(exc, DBAPIError):
        return None
    # MySQL's error number first: PyMySQL's errors carry a SQLSTATE too, and
    # a MariaDB deadlock's (40001) would read as PostgreSQL's serialization;
    # and a node not ready has its connection invalidated (see
    # not_ready_is_a_disconnect) without being lost.
    number = _mysql_error_number(exc)
    if number in _MYSQL_REASONS:
        return _MYSQL_REASONS[number]
    if exc.connection_invalidated:
        return "lost_connection"
    orig = exc.orig
    if orig is None:
        return None
    state = getattr(orig, "sqlstate", None) or getattr(orig, "pgcode", None)
    if state in _PG_REASONS:
        return _PG_REASONS[state]
    if number == _MYSQL_NO_SAVEPOINT:
        # A deadlock inside a SAVEPOINT makes MariaDB roll back the whole
        # transaction, savepoint included; leaving the savepoint then fails
        # with 1305 while the deadlock is being handled: the deadlock is why.
        behind = exc.__context__
        for _link in range(8):
            if behind is None:
                break
            if isinstance(behind, DBAPIError) and (reason := retry_reason(behind)):
                return reason
            behind = behind.__context__
    text = str(orig).lower()
    if "database is locked" in text or "database table is locked" in text:
        return "lock"
    return None


def not_ready_is_a_disconnect(engine: Engine) -> None:
    """A Galera node that is not ready (1047) is as good as gone: SQLAlchemy
    is told it is a disconnect, so the connection is thrown away and every
    other one the pool holds is replaced at its next checkout (they reach
    the same node; a new one may reach another, through a load balancer)."""

    @event.listens_for(engine, "handle_error")
    def _not_ready(context: Any) -> None:
        if _mysql_error_number(context.sqlalchemy_exception) == _MYSQL_NOT_READY:
            context.is_disconnect = True


def _one_line(text: object) -> str:
    """A driver's message on one line: PostgreSQL's span several (LINE 1: ...)."""
    return " ".join(str(text).split())


def message(exc: BaseException) -> str:
    """The first line of what the driver said (SQLAlchemy's own text for its
    own errors), without the statement, its parameters or PostgreSQL's
    LINE/DETAIL/HINT lines; a domain fact as its repr."""
    if isinstance(exc, DomainError):
        return str(exc)
    orig = getattr(exc, "orig", None)
    said = orig if orig is not None else (exc.args[0] if exc.args else "")
    first = next((line for line in str(said).splitlines() if line.strip()), "")
    return _one_line(first) or type(orig or exc).__name__


# Why a unit of work gave up, for its one WARNING line (Database._run's).
GAVE_UP = {
    "unreachable": "the database cannot be reached",
    "not_ready": "the database node is not ready for use (Galera: not synced with its cluster)",
    "lost_connection": "the connection to the database was lost, no retry left",
    "deadlock": "deadlocks went on",
    "serialization": "serialization failures went on",
    "lock": "lock waits went on timing out",
    GENERATION_CONFLICT: "another writer changed a provider each time",
}

# Times a unit of work tries again to connect to a database that refused
# its connection (or a Galera node that is not ready), before the request
# fails with 503.
CONNECT_RETRIES = 1
# Reasons for which a unit of work that gives up says the database is out
# of reach (DatabaseUnavailable.unreachable: a longer Retry-After).
UNREACHABLE = OUT_OF_REACH | {"lost_connection"}


@dataclass
class Retries:
    """One unit of work's retries so far, counted against their budgets.

    The database's reasons draw on ``max_retries`` ([placement_database]
    db_max_retries), and a database out of reach (OUT_OF_REACH) gets
    CONNECT_RETRIES of those at most: a failover may be under way, and the
    request should not wait on twenty tries of one. Generation conflicts
    draw on ``conflict_retries`` ([placement] allocation_conflict_retry_count).
    The two are counted apart, as their options say: a unit of work that met
    both runs at most 1 + max_retries + conflict_retries times.
    """

    max_retries: int
    conflict_retries: int = 0
    database: int = 0  # retries for the database's reasons
    conflicts: int = 0  # retries for generation conflicts

    @property
    def retried(self) -> int:
        return self.database + self.conflicts

    @property
    def attempts(self) -> int:
        """The runs so far, the first included."""
        return 1 + self.retried

    def reason(self, exc: BaseException, connected: bool) -> str | None:
        """Why running the unit of work again after ``exc`` may succeed, or
        None: ``exc`` is raised as it is. ``connected``: whether a connection
        had been made (a failure to make one is ``unreachable``)."""
        reason = retry_reason(exc)
        if not connected and isinstance(exc, DBAPIError) and reason in (None, "lost_connection"):
            # Refused, unresolvable, dropped during the handshake, or a
            # file that cannot be opened.
            return "unreachable"
        return reason

    def allow(self, reason: str) -> bool:
        """Whether the budget allows another run for ``reason``; counted if so."""
        if reason == GENERATION_CONFLICT:
            if self.conflicts >= self.conflict_retries:
                return False
            self.conflicts += 1
            return True
        limit = self.max_retries
        if reason in OUT_OF_REACH:
            limit = min(limit, CONNECT_RETRIES)
        if self.database >= limit:
            return False
        self.database += 1
        return True

    def pause(self, reason: str) -> float:
        """Seconds to wait before the next run: none after a generation
        conflict (the writer that won has committed); after the database's
        failures growing, jittered, at most half a second."""
        if reason == GENERATION_CONFLICT:
            return 0.0
        return min(0.5, 0.01 * 2**self.database) * random.random()
