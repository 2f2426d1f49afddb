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
"""

from __future__ import annotations

import dataclasses
import re

from placement_svc import errors, web
from placement_svc import microversion as mv
from placement_svc.api.allocation_writes import incomplete_ids, wanted_for, write_retrying
from placement_svc.api.wording import inventory_in_use
from placement_svc.db import allocations as store
from placement_svc.db import capacity, inventories, providers, tables
from placement_svc.db.exceptions import InventoryInUse, UnknownResourceClass
from placement_svc.policies import reshaper as policies
from placement_svc.schemas import reshaper as schema

_CLASS_NAME = re.compile(r"^[A-Z0-9_]+$")


def _schema(version) -> dict:
    if version >= mv.CONSUMER_TYPES:
        return schema.POST_V1_38
    if version >= mv.MAPPINGS:
        return schema.POST_V1_34
    return schema.POST_V1_30


def _malformed(message: str) -> str:
    return f"malformed reshaper data: {message}"


def _inventory_list(records: dict) -> list[inventories.Inventory]:
    """The schema checked records whose class looks like one; any other is unknown."""
    for name in records:
        if not _CLASS_NAME.match(name):
            raise errors.BadRequest(_malformed(f"No such resource class {name}."))
    return [inventories.with_defaults(name, record) for name, record in records.items()]


class Reshaper:
    def __init__(self, db, conf):
        self.db = db
        self.conf = conf

    def reshape(self, req, resp):
        web.require_version(req, mv.RESHAPER)
        web.require_json(req)
        req.context.placement.can(policies.RESHAPE)
        version = web.version(req)
        data = web.read_json(req, _schema(version))
        new = {
            rp_uuid: (entry["resource_provider_generation"], entry["inventories"])
            for rp_uuid, entry in data["inventories"].items()
        }
        wanted = [wanted_for(uuid, body) for uuid, body in data["allocations"].items()]
        check_generation = version >= mv.CONSUMER_GENERATION
        incomplete = incomplete_ids(self.conf)

        def write(conn):
            known = _inventory_providers(conn, new)
            ensured = store.ensure_consumers(conn, wanted, check_generation, incomplete)
            known = {**store.resolve_providers(conn, wanted), **known}
            for rp_uuid, (_generation, records) in new.items():
                if not records:
                    continue  # nothing to add, so nothing to do in this step
                provider = known[rp_uuid]
                union = {inv.resource_class: inv for inv in inventories.list_for(conn, provider.id)}
                union.update((inv.resource_class, inv) for inv in _inventory_list(records))
                known[rp_uuid] = _replace_inventory(conn, provider, list(union.values()))
            store.replace(conn, wanted, ensured, known)
            current = _inventory_providers(conn, new, check=False)
            for rp_uuid, (_generation, records) in new.items():
                _replace_inventory(conn, current[rp_uuid], _inventory_list(records))

        try:
            write_retrying(self.db, self.conf, write, prefix="update conflict")
        except store.UnknownResourceClass as exc:
            raise errors.BadRequest(_malformed(exc.message)) from None
        except UnknownResourceClass as fact:
            raise errors.BadRequest(
                _malformed(f"No such resource class {fact.names[0]}.")
            ) from None
        except InventoryInUse as fact:
            raise errors.Conflict(
                f"update conflict: {inventory_in_use(fact.uuid, fact.resource_classes)}",
                code=errors.INVENTORY_INUSE,
            ) from None
        except capacity.InvalidAllocation as exc:
            raise errors.Conflict(f"Unable to allocate inventory: {exc.message}") from None
        web.no_content(resp)


def _inventory_providers(conn, new: dict, check: bool = True) -> dict[str, providers.Provider]:
    """The providers whose inventories are replaced, at the generation the client saw."""
    found = {
        p.uuid: p
        for p in providers.query(conn, tables.resource_providers.c.uuid.in_(list(new)), order=False)
    }
    if not check:
        return found
    for rp_uuid, (generation, _records) in new.items():
        provider = found.get(rp_uuid)
        if provider is None:
            raise errors.BadRequest(
                f"Resource provider {rp_uuid} in inventories not found: No resource "
                f"provider with uuid {rp_uuid} found",
                code=errors.RESOURCE_PROVIDER_NOT_FOUND,
            )
        if generation != provider.generation:
            raise errors.Conflict(
                f"resource provider generation conflict for provider {rp_uuid}: actual: "
                f"{provider.generation}, given: {generation}",
                code=errors.CONCURRENT_UPDATE,
            )
    return found


def _replace_inventory(conn, provider, wanted) -> providers.Provider:
    generation = inventories.replace(
        conn,
        provider,
        wanted,
        seen_generation=provider.generation,
    )
    return dataclasses.replace(provider, generation=generation)
