"""Upstream's words for facts several handler families report alike."""

from __future__ import annotations

from placement_svc import errors


def no_provider(uuid: str) -> str:
    """The sentence upstream's 404s for a missing provider start from."""
    return f"No resource provider with uuid {uuid} found"


def concurrent_update(uuid: str) -> errors.Conflict:
    """Another writer moved the provider's generation between our read and our write."""
    return errors.Conflict(
        "Another thread concurrently updated the resource provider data. Please "
        f"retry your update (resource provider {uuid})",
        code=errors.CONCURRENT_UPDATE,
    )


def generation_changed() -> errors.Conflict:
    """The client's generation is stale (aggregates and traits of a provider)."""
    return errors.Conflict(
        "Resource provider's generation already changed. Please update the "
        "generation and try again.",
        code=errors.CONCURRENT_UPDATE,
    )
