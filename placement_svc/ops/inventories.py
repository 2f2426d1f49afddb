"""Units of work on a provider's inventories.

Checks run in upstream's order: the provider (404), the body's schema (400),
the generation (409), capacity (400), then the resource class, so a request
with several faults gets upstream's answer.
"""

from __future__ import annotations

from sqlalchemy.engine import Connection

from placement_svc import microversion as mv
from placement_svc.db import inventories as store
from placement_svc.db import names, providers
from placement_svc.db.exceptions import UnknownResourceClass
from placement_svc.db.inventories import Inventory
from placement_svc.db.providers import Provider
from placement_svc.ops.exceptions import (
    InvalidInventory,
    InventoryExists,
    InventoryNotFound,
    ProviderGenerationMismatch,
)
from placement_svc.schemas import inventory as schema


def list_for(conn: Connection, uuid: str) -> tuple[int, list[Inventory]]:
    """The provider's generation and inventories."""
    provider = providers.get(conn, uuid)
    return provider.generation, store.list_for(conn, provider.id)


def show(conn: Connection, uuid: str, resource_class: str) -> tuple[int, Inventory]:
    provider = providers.get(conn, uuid)
    return provider.generation, _one(conn, provider, resource_class)


def replace_all(conn: Connection, uuid: str, data, version) -> tuple[int, list[Inventory]]:
    """PUT .../inventories: exactly the body's inventories."""
    provider = providers.get(conn, uuid)
    schema.for_version(version).replace_all.check(data)
    _check_generation(provider, data["resource_provider_generation"])
    wanted = [store.with_defaults(rc, record) for rc, record in data["inventories"].items()]
    _check_capacity(provider, wanted, version)
    generation = store.replace(conn, provider, wanted)
    return generation, store.list_for(conn, provider.id)


def create(conn: Connection, uuid: str, data, version) -> tuple[int, Inventory]:
    """POST .../inventories: one new class. The body's generation, when
    given, is not checked (as upstream)."""
    provider = providers.get(conn, uuid)
    schema.for_version(version).create.check(data)
    new = store.with_defaults(data["resource_class"], data)
    _check_capacity(provider, [new], version)
    current = store.list_for(conn, provider.id)
    if _find(current, new.resource_class) is not None:
        raise InventoryExists(uuid, new.resource_class)
    generation = store.replace(conn, provider, current + [new])
    return generation, _one(conn, provider, new.resource_class)


def update_one(
    conn: Connection, uuid: str, resource_class: str, data, version
) -> tuple[int, Inventory]:
    """PUT .../inventories/{resource_class}: the class must exist (404) and
    the provider have inventory of it (400)."""
    provider = providers.get(conn, uuid)
    schema.for_version(version).update_one.check(data)
    _check_generation(provider, data["resource_provider_generation"])
    changed = store.with_defaults(resource_class, data)
    _check_capacity(provider, [changed], version)
    if not names.resource_class_ids(conn, [resource_class]):
        raise UnknownResourceClass((resource_class,))
    current = store.list_for(conn, provider.id)
    if _find(current, resource_class) is None:
        raise InventoryNotFound(uuid, resource_class)
    others = [inv for inv in current if inv.resource_class != resource_class]
    generation = store.replace(conn, provider, others + [changed])
    return generation, _one(conn, provider, resource_class)


def delete_one(conn: Connection, uuid: str, resource_class: str) -> None:
    """DELETE .../inventories/{resource_class}: absent inventory is a 404
    that says whether the class exists at all."""
    provider = providers.get(conn, uuid)
    current = store.list_for(conn, provider.id)
    if _find(current, resource_class) is None:
        if not names.resource_class_ids(conn, [resource_class]):
            raise UnknownResourceClass((resource_class,))
        raise InventoryNotFound(uuid, resource_class)
    store.replace(conn, provider, [inv for inv in current if inv.resource_class != resource_class])


def delete_all(conn: Connection, uuid: str) -> None:
    """DELETE .../inventories (1.5+)."""
    store.replace(conn, providers.get(conn, uuid), [])


def _check_generation(provider: Provider, seen: int) -> None:
    if seen != provider.generation:
        raise ProviderGenerationMismatch(provider.uuid, provider.generation, seen)


def _check_capacity(provider: Provider, inventories: list[Inventory], version) -> None:
    """Upstream's rule, on capacity = int((total - reserved) * allocation_ratio):
    it must be positive before 1.26 and may be zero from 1.26 (reserved ==
    total, or allocation_ratio 0, is then accepted)."""
    zero_allowed = version >= mv.RESERVED_EQUALS_TOTAL
    for inv in inventories:
        if inv.capacity > 0 or (zero_allowed and inv.capacity == 0):
            continue
        raise InvalidInventory(provider.uuid, inv.resource_class, zero_allowed)


def _one(conn: Connection, provider: Provider, resource_class: str) -> Inventory:
    found = _find(store.list_for(conn, provider.id), resource_class)
    if found is None:
        raise InventoryNotFound(provider.uuid, resource_class)
    return found


def _find(inventories: list[Inventory], resource_class: str) -> Inventory | None:
    return next((inv for inv in inventories if inv.resource_class == resource_class), None)
