"""Units of work on a provider's aggregates (1.1+)."""

from __future__ import annotations

from sqlalchemy.engine import Connection

from placement_svc import microversion as mv
from placement_svc.db import aggregates as store
from placement_svc.db import providers
from placement_svc.ops.exceptions import ProviderGenerationMismatch
from placement_svc.schemas import aggregate as schema


def list_for(conn: Connection, uuid: str) -> tuple[int, list[str]]:
    """The provider's generation and aggregate uuids."""
    provider = providers.get(conn, uuid)
    return provider.generation, store.for_provider(conn, provider.id)


def replace(conn: Connection, uuid: str, data, version) -> tuple[int, list[str]]:
    """Make the provider a member of exactly the body's aggregates.

    The provider (404) before the body's schema (400), then the generation
    the body carries from 1.19 (409). Before 1.19 the body is the bare list
    and carries no generation; the change still bumps it (checked against
    the generation just read) so other writers see it. The answer echoes
    the list as sent (its order and spelling), as upstream's.
    """
    provider = providers.get(conn, uuid)
    schema.for_version(version).check(data)
    with_generation = version >= mv.AGGREGATE_GENERATION
    uuids = data["aggregates"] if with_generation else data
    seen = data["resource_provider_generation"] if with_generation else None
    if seen is not None and seen != provider.generation:
        raise ProviderGenerationMismatch(uuid, provider.generation, seen)
    generation = providers.bump_generation(conn, provider, seen)
    store.replace(conn, provider.id, uuids)
    return generation, uuids
