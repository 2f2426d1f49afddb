"""/resource_providers/{uuid}/inventories[/{resource_class}]."""

from __future__ import annotations

from placement_svc import errors, web
from placement_svc import microversion as mv
from placement_svc.db import inventories as store
from placement_svc.db import providers
from placement_svc.schemas import inventory as schema


def _provider(conn, uuid):
    return providers.get(conn, uuid, f"No resource provider with uuid {uuid} found")


def _check_capacity(req, provider, inventories) -> None:
    """Capacity must be positive; from 1.26 reserved may equal total."""
    allow_equal = web.version(req) >= mv.RESERVED_EQUALS_TOTAL
    for inv in inventories:
        if inv.allocation_ratio <= 0 or (
            inv.reserved > inv.total if allow_equal else inv.reserved >= inv.total
        ):
            comparison = "greater than" if allow_equal else "greater than or equal to"
            if inv.allocation_ratio <= 0:
                reason = "The allocation_ratio must be greater than 0."
            else:
                reason = f"The reserved value is {comparison} total."
            raise errors.BadRequest(
                f"Unable to update inventory for resource provider {provider.uuid}: Invalid "
                f"inventory for '{inv.resource_class}' on resource provider "
                f"'{provider.uuid}'. {reason}"
            )


def _representation(inv, generation=None) -> dict:
    body = inv.fields()
    if generation is not None:
        body["resource_provider_generation"] = generation
    return body


def _stale(uuid):
    return providers.ConcurrentUpdate(uuid, "resource provider generation conflict")


class Inventories:
    def __init__(self, db):
        self.db = db

    def list(self, req, resp, uuid):
        web.check_accept(req)

        def read(conn):
            provider = _provider(conn, uuid)
            return provider, store.list_for(conn, provider.id)

        provider, found = self.db.read(read)
        self._send_all(req, resp, provider.generation, found)

    def _send_all(self, req, resp, generation, found):
        body = {
            "resource_provider_generation": generation,
            "inventories": {inv.resource_class: inv.fields() for inv in found},
        }
        web.render(resp, body)
        web.cache_headers(req, resp, web.newest(found))

    def _send_one(self, req, resp, generation, inv, status=200):
        web.render(resp, _representation(inv, generation), status)
        web.cache_headers(req, resp, inv.modified)

    def show(self, req, resp, uuid, resource_class):
        web.check_accept(req)

        def read(conn):
            provider = _provider(conn, uuid)
            found = {inv.resource_class: inv for inv in store.list_for(conn, provider.id)}
            if resource_class not in found:
                raise errors.NotFound(f"No inventory of class {resource_class} for {uuid}")
            return provider, found[resource_class]

        provider, inv = self.db.read(read)
        self._send_one(req, resp, provider.generation, inv)

    def replace_all(self, req, resp, uuid):
        data = web.read_json(req, schema.REPLACE_ALL)
        wanted = [store.with_defaults(rc, rec) for rc, rec in data["inventories"].items()]

        def write(conn):
            provider = _provider(conn, uuid)
            if data["resource_provider_generation"] != provider.generation:
                raise _stale(uuid)
            _check_capacity(req, provider, wanted)
            generation = store.replace(
                conn,
                provider,
                wanted,
                unknown_class_message=lambda m: (
                    f"Unknown resource class in inventory for resource provider {uuid}: {m}"
                ),
            )
            return generation, store.list_for(conn, provider.id)

        generation, found = self.db.write(write)
        self._send_all(req, resp, generation, found)

    def create(self, req, resp, uuid):
        data = web.read_json(req, schema.CREATE)
        new = store.with_defaults(data["resource_class"], data)

        def write(conn):
            provider = _provider(conn, uuid)
            current = store.list_for(conn, provider.id)
            if any(inv.resource_class == new.resource_class for inv in current):
                raise errors.Conflict(
                    f"Update conflict: Inventory for '{new.resource_class}' on resource "
                    f"provider '{uuid}' already exists.",
                    code=errors.CONCURRENT_UPDATE,
                )
            _check_capacity(req, provider, [new])
            generation = store.replace(
                conn,
                provider,
                current + [new],
                unknown_class_message=lambda m: (
                    f"Unable to create inventory for resource provider {uuid}: {m}"
                ),
            )
            return generation, _find(store.list_for(conn, provider.id), new.resource_class)

        generation, inv = self.db.write(write)
        resp.set_header(
            "Location",
            web.url(req, f"/resource_providers/{uuid}/inventories/{new.resource_class}"),
        )
        self._send_one(req, resp, generation, inv, status=201)

    def update(self, req, resp, uuid, resource_class):
        data = web.read_json(req, schema.UPDATE_ONE)
        changed = store.with_defaults(resource_class, data)

        def write(conn):
            provider = _provider(conn, uuid)
            if data["resource_provider_generation"] != provider.generation:
                raise _stale(uuid)
            current = store.list_for(conn, provider.id)
            if _find(current, resource_class) is None:
                raise errors.BadRequest(
                    "No inventory record with resource class for resource provider "
                    f"{uuid}: No inventory of class {resource_class} found."
                )
            _check_capacity(req, provider, [changed])
            others = [inv for inv in current if inv.resource_class != resource_class]
            generation = store.replace(conn, provider, others + [changed])
            return generation, _find(store.list_for(conn, provider.id), resource_class)

        generation, inv = self.db.write(write)
        self._send_one(req, resp, generation, inv)

    def delete(self, req, resp, uuid, resource_class):
        def write(conn):
            provider = _provider(conn, uuid)
            current = store.list_for(conn, provider.id)
            if _find(current, resource_class) is None:
                raise errors.NotFound(
                    f"No inventory of class {resource_class} found for delete: No inventory "
                    f"of class {resource_class} found."
                )
            others = [inv for inv in current if inv.resource_class != resource_class]
            try:
                store.replace(conn, provider, others)
            except errors.Conflict as exc:
                raise errors.Conflict(
                    f"Unable to delete inventory of class {resource_class}: "
                    f"{exc.message.removeprefix('update conflict: ')}",
                    code=errors.CONCURRENT_UPDATE,
                ) from None

        self.db.write(write)
        web.no_content(resp)

    def delete_all(self, req, resp, uuid):
        if web.version(req) < mv.DELETE_INVENTORIES:
            raise errors.MethodNotAllowed(req.method, ["GET", "POST", "PUT"])

        def write(conn):
            provider = _provider(conn, uuid)
            try:
                store.replace(conn, provider, [])
            except errors.Conflict as exc:
                if exc.code == errors.INVENTORY_INUSE:
                    raise errors.Conflict(
                        exc.message.removeprefix("update conflict: "),
                        code=errors.INVENTORY_INUSE,
                    ) from None
                raise

        self.db.write(write)
        web.no_content(resp)


def _find(inventories, resource_class):
    return next((inv for inv in inventories if inv.resource_class == resource_class), None)
