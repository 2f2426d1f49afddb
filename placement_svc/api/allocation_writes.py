"""What PUT/POST /allocations and POST /reshaper share: reading the body into
``Wanted`` records, and running the write with upstream's retry rule.

A provider generation conflict means another writer changed a provider
between our read and our write; the whole transaction is run again, up to
``[placement] allocation_conflict_retry_count`` more times, before the
answer is 409. A consumer generation conflict is never retried: only the
client can decide what the consumer's allocations should now be.
"""

from __future__ import annotations

import logging

from placement_svc import errors
from placement_svc.db import allocations as store
from placement_svc.db import consumers, providers

LOG = logging.getLogger(__name__)

# The sentence every 409 for a conflict found while writing starts with.
CHANGED_WHILE_ALLOCATING = "Inventory and/or allocations changed while attempting to allocate"


def wanted_for(consumer_uuid: str, body: dict) -> store.Wanted:
    """One consumer's entry (PUT body or POST value) as a Wanted record.

    Before 1.12 the allocations are a list of {resource_provider: {uuid},
    resources}; a provider named twice keeps its last resources.
    """
    allocations = body["allocations"]
    if isinstance(allocations, list):
        allocations = {
            entry["resource_provider"]["uuid"]: {"resources": entry["resources"]}
            for entry in allocations
        }
    return store.Wanted(
        consumer_uuid=consumer_uuid,
        resources={
            rp_uuid: {name: int(amount) for name, amount in entry["resources"].items()}
            for rp_uuid, entry in allocations.items()
        },
        project_id=body.get("project_id"),
        user_id=body.get("user_id"),
        generation=body.get("consumer_generation"),
        consumer_type=body.get("consumer_type"),
    )


def incomplete_ids(conf) -> tuple[str, str]:
    return (
        conf.placement.incomplete_consumer_project_id,
        conf.placement.incomplete_consumer_user_id,
    )


def write_retrying(db, conf, fn, prefix: str = CHANGED_WHILE_ALLOCATING):
    """db.write(fn), re-run on a provider generation conflict; 409s prefixed."""
    retries = conf.placement.allocation_conflict_retry_count
    attempt = 0
    while True:
        try:
            return db.write(fn)
        except providers.ConcurrentUpdate:
            if attempt >= retries:
                LOG.warning("Exceeded retry limit of %d on allocations write", retries)
                raise errors.Conflict(
                    f"{prefix}: {store.PROVIDER_CHANGED}", code=errors.CONCURRENT_UPDATE
                ) from None
            attempt += 1
            LOG.debug("Retrying allocations write on resource provider generation conflict")
        except consumers.ConsumerChanged as exc:
            raise errors.Conflict(
                f"{prefix}: {exc.message}", code=errors.CONCURRENT_UPDATE
            ) from None
