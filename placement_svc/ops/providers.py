"""Units of work on resource providers: creation, rename and (re/un)parenting,
deletion, in upstream's check order."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from sqlalchemy.engine import Connection

from placement_svc import microversion as mv
from placement_svc.db import embedded as bulk
from placement_svc.db import providers as store
from placement_svc.db.exceptions import ParentProviderNotFound
from placement_svc.db.inventories import Inventory
from placement_svc.db.providers import Provider
from placement_svc.ops.exceptions import (
    ProviderIsOwnParent,
    ProviderNameMissing,
    ProviderTreeLoop,
    ReparentingNotAllowed,
    UnparentingNotAllowed,
)
from placement_svc.schemas import resource_provider as schema

# Reads with no rule beyond the data layer's.
get = store.get
list_filtered = store.list_filtered
# A row of a list, with its uuids by name (for a body made the slow way).
ListedProvider = store.ListedProvider

# What include= may embed in a provider (1.45), in the order bodies list them.
INCLUDES = ("inventories", "traits", "aggregates", "usages")


@dataclass
class Embedded:
    """What include= asked for, per provider id (None: not asked)."""

    inventories: dict[int, list[Inventory]] | None = None
    traits: dict[int, list[str]] | None = None
    aggregates: dict[int, list[str]] | None = None
    # per provider, the used amount of each class it has inventory of
    usages: dict[int, dict[str, int]] | None = None


def list_including(
    conn: Connection, include: frozenset[str], **filters: Any
) -> tuple[store.Listed, Embedded]:
    """``list_filtered``, with what ``include`` names of every provider found
    read in one statement each, whatever their number."""
    found = store.list_filtered(conn, **filters)
    return found, embedded(conn, [p.id for p in found.providers], include)


def get_including(
    conn: Connection, uuid: str, include: frozenset[str]
) -> tuple[Provider, Embedded]:
    provider = store.get(conn, uuid)
    return provider, embedded(conn, [provider.id], include)


def embedded(conn: Connection, ids: list[int], include: frozenset[str]) -> Embedded:
    answer = Embedded()
    if "inventories" in include or "usages" in include:
        held = bulk.inventories(conn, ids)
        if "inventories" in include:
            answer.inventories = held
        if "usages" in include:
            used = bulk.used(conn, ids)
            answer.usages = {
                pid: {
                    inv.resource_class: used.get(pid, {}).get(inv.resource_class, 0)
                    for inv in held.get(pid, [])
                }
                for pid in ids
            }
    if "traits" in include:
        answer.traits = bulk.traits(conn, ids)
    if "aggregates" in include:
        answer.aggregates = bulk.aggregates(conn, ids)
    return answer


def create(conn: Connection, name: str, uuid: str, parent_uuid: str | None) -> Provider:
    """A new root, or a child of ``parent_uuid``.

    Upstream matches the parent as written (a dashless parent is unknown)."""
    if not name:
        raise ProviderNameMissing(uuid)
    parent = None
    if parent_uuid is not None:
        if parent_uuid == uuid:
            raise ProviderIsOwnParent(uuid)
        parent = store.find(conn, parent_uuid)
        if parent is None:
            raise ParentProviderNotFound(uuid, parent_uuid)
    return store.create(conn, name, uuid, parent)


def update(conn: Connection, uuid: str, data: dict, version) -> Provider:
    """PUT /resource_providers/{uuid}: the provider (404) before the body's
    schema (400), then the parent rules, then the name (409)."""
    provider = store.get(conn, uuid)
    schema.for_version(version).update.check(data)
    parent = _new_parent(conn, provider, data, version)
    return store.update(conn, provider, data["name"], parent)


def _new_parent(conn: Connection, provider: Provider, data: dict, version) -> Any:
    """The parent the body asks for (a Provider, or None for a root), or
    KEEP_PARENT when it names none. Moving a child to another parent or
    making it a root needs 1.37; no provider may go under its own subtree."""
    if "parent_provider_uuid" not in data:
        return store.KEEP_PARENT
    may_move = version >= mv.REPARENTING
    parent_uuid = data["parent_provider_uuid"]
    if parent_uuid is None:
        if provider.parent_id is not None and not may_move:
            raise UnparentingNotAllowed(provider.uuid)
        return None
    parent = store.find(conn, parent_uuid)
    if parent is None:
        raise ParentProviderNotFound(provider.uuid, parent_uuid)
    if provider.parent_id not in (None, parent.id) and not may_move:
        raise ReparentingNotAllowed(provider.uuid)
    if parent.id in store.subtree_ids(conn, provider):
        raise ProviderTreeLoop(provider.uuid)
    return parent


def delete(conn: Connection, uuid: str) -> None:
    store.delete(conn, store.get(conn, uuid))
