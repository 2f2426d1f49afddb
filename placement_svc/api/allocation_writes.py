"""What PUT/POST /allocations and POST /reshaper share: reading the body into
``Wanted`` records, and upstream's words for what their writes report."""

from __future__ import annotations

from placement_svc import errors
from placement_svc.db.allocations import Wanted
from placement_svc.db.exceptions import (
    AllocationProviderNotFound,
    AmountViolatesInventory,
    CapacityExceeded,
    ConcurrentUpdate,
    ConsumerChanged,
    ConsumerGenerationConflict,
    InventoryMissing,
)

# The sentence every 409 for a conflict found while writing starts with.
CHANGED_WHILE_ALLOCATING = "Inventory and/or allocations changed while attempting to allocate"


def wanted_for(consumer_uuid: str, body: dict) -> Wanted:
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
    return Wanted(
        consumer_uuid=consumer_uuid,
        resources={
            rp_uuid: {name: int(amount) for name, amount in entry["resources"].items()}
            for rp_uuid, entry in allocations.items()
        },
        project_id=body.get("project_id"),
        user_id=body.get("user_id"),
        generation=body.get("consumer_generation"),
        consumer_type=body.get("consumer_type"),
        hold_ttl=body["hold"]["ttl"] if "hold" in body else None,
    )


def incomplete_ids(conf) -> tuple[str, str]:
    return (
        conf.placement.incomplete_consumer_project_id,
        conf.placement.incomplete_consumer_user_id,
    )


def write_words(fact: Exception, prefix: str) -> errors.PlacementError | None:
    """Upstream's answer to what an allocation write reports; ``prefix``
    starts the 409s for a conflict found while writing."""
    match fact:
        case ConcurrentUpdate():  # still, after the retries
            return errors.Conflict(
                f"{prefix}: Another thread concurrently updated the resource provider "
                "data. Please retry your update",
                code=errors.CONCURRENT_UPDATE,
            )
        case ConsumerChanged():
            return errors.Conflict(
                f"{prefix}: Another thread concurrently updated the data. Please retry your update",
                code=errors.CONCURRENT_UPDATE,
            )
        case ConsumerGenerationConflict(_uuid, expected, given):
            expected_text = "null" if expected is None else expected
            return errors.Conflict(
                f"consumer generation conflict - expected {expected_text} but got {given}",
                code=errors.CONCURRENT_UPDATE,
            )
        case AllocationProviderNotFound(uuid):
            return errors.BadRequest(
                f"Allocation for resource provider '{uuid}' that does not exist."
            )
        case InventoryMissing(classes, provider_uuids):
            return _unable_to_allocate(
                f"Inventory for '{', '.join(classes)}' on resource provider "
                f"'{', '.join(provider_uuids)}' invalid."
            )
        case AmountViolatesInventory(uuid, rc):
            return _unable_to_allocate(
                f"Unable to create allocation for '{rc}' on resource provider '{uuid}'. "
                "The requested amount would violate inventory constraints."
            )
        case CapacityExceeded(uuid, rc):
            return _unable_to_allocate(
                f"Unable to create allocation for '{rc}' on resource provider '{uuid}'. "
                "The requested amount would exceed the capacity."
            )
    return None


def _unable_to_allocate(cause: str) -> errors.Conflict:
    return errors.Conflict(f"Unable to allocate inventory: {cause}")
