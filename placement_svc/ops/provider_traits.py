"""Units of work on a provider's traits (1.6+)."""

from __future__ import annotations

from sqlalchemy.engine import Connection

from placement_svc.db import names, providers, traits
from placement_svc.db import provider_traits as store
from placement_svc.db.exceptions import UnknownTrait
from placement_svc.db.records import Named
from placement_svc.ops.exceptions import ProviderGenerationMismatch


def list_for(conn: Connection, uuid: str) -> tuple[int, list[Named]]:
    """The provider's generation and traits."""
    provider = providers.get(conn, uuid)
    return provider.generation, store.for_provider(conn, provider.id)


def replace(
    conn: Connection, uuid: str, trait_names: list[str], seen: int
) -> tuple[int, list[Named]]:
    """Give the provider exactly these traits: the provider (404), the
    generation the client saw (409), then the names (400).

    Upstream moves the generation only when the set of traits changes, and
    answers with the traits it looked up by the body's names.
    """
    provider = providers.get(conn, uuid)
    if seen != provider.generation:
        raise ProviderGenerationMismatch(uuid, provider.generation, seen)
    ids = names.trait_ids(conn, trait_names)
    missing = sorted(set(trait_names) - set(ids))
    if missing:
        raise UnknownTrait(tuple(missing))
    changed = store.replace(conn, provider.id, set(ids.values()))
    generation = providers.bump_generation(conn, provider, seen) if changed else seen
    return generation, store.for_provider(conn, provider.id, traits.lookup_order(conn))


def delete_all(conn: Connection, uuid: str) -> None:
    """Take every trait away; the generation moves only if there were some."""
    provider = providers.get(conn, uuid)
    if store.replace(conn, provider.id, set()):
        providers.bump_generation(conn, provider)
