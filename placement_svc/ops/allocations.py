"""Units of work on allocations, and upstream's retry rule for their writes.

A provider generation conflict means another writer changed a provider
between our read and our write; the whole transaction is run again, up to
``[placement] allocation_conflict_retry_count`` more times, before the
conflict is reported. A consumer generation conflict is never retried: only
the client can decide what the consumer's allocations should now be.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Protocol, TypeVar

from sqlalchemy.engine import Connection

from placement_svc.db import allocations as store
from placement_svc.db import providers
from placement_svc.db.allocations import Allocation, Wanted
from placement_svc.db.exceptions import ConcurrentUpdate
from placement_svc.db.providers import Provider
from placement_svc.ops.exceptions import NoAllocations

LOG = logging.getLogger(__name__)
T = TypeVar("T")

# A read with no rule beyond the data layer's.
for_consumer = store.for_consumer


def for_provider(conn: Connection, uuid: str) -> tuple[Provider, list[Allocation]]:
    provider = providers.get(conn, uuid)
    return provider, store.for_provider(conn, provider.id)


def write(
    conn: Connection, wanted: list[Wanted], check_generation: bool, incomplete: tuple[str, str]
) -> None:
    """PUT and POST /allocations: the consumers (their generations checked
    from 1.28), then the providers they name, then the allocations."""
    ensured = store.ensure_consumers(conn, wanted, check_generation, incomplete)
    known = store.resolve_providers(conn, wanted)
    store.replace(conn, wanted, ensured, known)


def delete(conn: Connection, consumer_uuid: str) -> None:
    """DELETE /allocations/{consumer}: no generations involved, as upstream."""
    if not store.delete_for_consumer(conn, consumer_uuid):
        raise NoAllocations(consumer_uuid)


class Writer(Protocol):
    def write(self, fn: Callable[[Connection], T]) -> T: ...


def write_retrying(db: Writer, retries: int, work: Callable[[Connection], T]) -> T:
    """``db.write(work)``, the whole transaction run again on a provider
    generation conflict; the last ConcurrentUpdate is raised after ``retries``."""
    attempt = 0
    while True:
        try:
            return db.write(work)
        except ConcurrentUpdate:
            if attempt >= retries:
                LOG.warning("Exceeded retry limit of %d on allocations write", retries)
                raise
            attempt += 1
            LOG.debug("Retrying allocations write on resource provider generation conflict")
