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
from placement_svc.db.consumers import Consumer
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


Holding = tuple[Consumer | None, list[Allocation]]


def for_consumers(conn: Connection, consumer_uuids: list[str]) -> dict[str, Holding]:
    """GET /allocations?consumer_uuid= (1.46): each uuid asked, as spelled,
    with its consumer and allocations ``(None, [])`` when it has none, as
    the single read. A uuid asked in capitals also finds a consumer stored
    in lower case (as PUT stores it); beyond that the database compares, as
    for the single read (POST /allocations keeps the client's spelling)."""
    asked = list(dict.fromkeys(consumer_uuids))
    found = store.for_consumers(conn, list(dict.fromkeys(asked + [u.lower() for u in asked])))
    by_lower = {uuid.lower(): holding for uuid, holding in found.items()}
    return {uuid: found.get(uuid) or by_lower.get(uuid.lower()) or (None, []) for uuid in asked}


def for_providers(
    conn: Connection, provider_uuids: list[str] | None = None, in_tree: str | None = None
) -> dict[str, Holding]:
    """GET /allocations?resource_provider_uuid= or ?in_tree= (1.46): every
    consumer with allocations against those providers, with all of its
    allocations. An unknown provider (or tree) matches nothing, as
    GET /resource_providers?in_tree= of one answers an empty list."""
    return dict(store.for_providers(conn, provider_uuids=provider_uuids, in_tree=in_tree))


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
