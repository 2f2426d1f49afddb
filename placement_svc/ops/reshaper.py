"""POST /reshaper (from 1.30): new inventories and allocations in one transaction.

Used when inventory moves between providers of a tree (a root's VCPU going
to new NUMA children, say) while it is in use. Inventories cannot lose a
class that has allocations, and allocations cannot be made against a class
a provider lacks, so the write goes in three steps, as upstream's does:

1. each provider gets the union of its current and its new inventory;
2. the consumers' allocations are replaced (capacity checked as usual);
3. each provider gets exactly its new inventory.

Every step bumps the generations it touches, so a reshaped provider's
generation moves by as many steps as touched it, exactly as upstream's.
Another writer that changes a provider meanwhile (``ProviderChanged``) has
the whole reshape run again, as an allocation write is.
"""

from __future__ import annotations

import re

from sqlalchemy.engine import Connection

from placement_svc.db import holds, inventories, providers, tables
from placement_svc.db.allocations import Wanted
from placement_svc.db.exceptions import (
    ConcurrentUpdate,
    ProviderChanged,
    ProviderNotFound,
    UnknownResourceClass,
)
from placement_svc.db.inventories import Inventory
from placement_svc.db.providers import Provider
from placement_svc.ops import allocations
from placement_svc.ops.exceptions import ProviderGenerationMismatch

_CLASS_NAME = re.compile(r"^[A-Z0-9_]+$")


def reshape(
    conn: Connection,
    new_inventories: dict[str, dict],
    wanted: list[Wanted],
    check_generation: bool,
    incomplete: tuple[str, str],
) -> None:
    """``new_inventories``: {provider uuid: {resource_provider_generation,
    inventories}} as the body gives them; ``wanted``: every consumer's new
    allocations. The inventories' providers are checked first (missing,
    then stale), then the consumers and the providers they name."""
    known = _inventory_providers(conn, new_inventories)
    holds.sweep(conn, [item.consumer_uuid for item in wanted])  # expired holds are gone
    ensured = allocations.ensure_consumers(conn, wanted, check_generation, incomplete)
    known = {**allocations.resolve_providers(conn, wanted), **known}
    for rp_uuid, entry in new_inventories.items():
        if not entry["inventories"]:
            continue  # nothing to add, so nothing to do in this step
        provider = known[rp_uuid]
        union = {inv.resource_class: inv for inv in inventories.list_for(conn, provider.id)}
        union.update((inv.resource_class, inv) for inv in _inventory_list(entry["inventories"]))
        known[rp_uuid] = _replace_inventory(conn, provider, list(union.values()))
    allocations.replace(conn, wanted, ensured, known)
    current = _providers(conn, new_inventories)
    for rp_uuid, entry in new_inventories.items():
        _replace_inventory(conn, current[rp_uuid], _inventory_list(entry["inventories"]))


def _providers(conn: Connection, new_inventories: dict) -> dict[str, Provider]:
    where = tables.resource_providers.c.uuid.in_(list(new_inventories))
    return {p.uuid: p for p in providers.query(conn, where, order=False)}


def _inventory_providers(conn: Connection, new_inventories: dict) -> dict[str, Provider]:
    """The providers whose inventories are replaced, at the generation the client saw."""
    found = _providers(conn, new_inventories)
    for rp_uuid, entry in new_inventories.items():
        provider = found.get(rp_uuid)
        if provider is None:
            raise ProviderNotFound(rp_uuid)
        given = entry["resource_provider_generation"]
        if given != provider.generation:
            raise ProviderGenerationMismatch(rp_uuid, provider.generation, given)
    return found


def _inventory_list(records: dict) -> list[Inventory]:
    """The schema checked records whose class looks like one; any other is unknown."""
    for name in records:
        if not _CLASS_NAME.match(name):
            raise UnknownResourceClass((name,))
    return [inventories.with_defaults(name, record) for name, record in records.items()]


def _replace_inventory(conn: Connection, provider: Provider, wanted: list[Inventory]) -> Provider:
    """At the generation this unit of work read (the client's was checked
    against it): a conflict is a race, worth running the reshape again."""
    try:
        generation = inventories.replace(
            conn, provider, wanted, seen_generation=provider.generation
        )
    except ConcurrentUpdate as exc:
        raise ProviderChanged(exc.uuid) from exc
    return provider._replace(generation=generation)
