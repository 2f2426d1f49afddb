"""Upstream's words for facts several handler families report alike."""

from __future__ import annotations

from placement_svc import errors


def no_provider(uuid: str) -> str:
    """The sentence upstream's 404s for a missing provider start from."""
    return f"No resource provider with uuid {uuid} found"


def provider_changed(uuid: str) -> str:
    """Another writer moved the provider's generation between our read and our write."""
    return (
        "Another thread concurrently updated the resource provider data. Please "
        f"retry your update (resource provider {uuid})"
    )


def concurrent_update(uuid: str) -> errors.Conflict:
    return errors.Conflict(provider_changed(uuid), code=errors.CONCURRENT_UPDATE)


def generation_changed() -> errors.Conflict:
    """The client's generation is stale (aggregates and traits of a provider)."""
    return errors.Conflict(
        "Resource provider's generation already changed. Please update the "
        "generation and try again.",
        code=errors.CONCURRENT_UPDATE,
    )


def inventory_in_use(uuid: str, resource_classes: tuple[str, ...]) -> str:
    """Allocations hold classes a write would take the inventory of away."""
    listed = ", ".join(resource_classes)
    return f"Inventory for '{listed}' on resource provider '{uuid}' in use."
