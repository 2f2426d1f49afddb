"""/resource_providers/{uuid}/inventories[/{resource_class}].

Checks run in upstream's order: the media type, the provider (404), the
body's schema (400), the generation (409), capacity (400), then the
resource class, so a request with several faults gets upstream's answer.
"""

from __future__ import annotations

from placement_svc import errors, web
from placement_svc import microversion as mv
from placement_svc.api.wording import concurrent_update, no_provider
from placement_svc.db import inventories as store
from placement_svc.db import names, providers
from placement_svc.db.exceptions import ConcurrentUpdate, ProviderNotFound
from placement_svc.policies import inventories as policies
from placement_svc.schemas import inventory as schema


def _provider(conn, uuid):
    try:
        return providers.get(conn, uuid)
    except ProviderNotFound:
        raise errors.NotFound(no_provider(uuid)) from None


def _provider_for_read(conn, uuid):
    """The GET handlers word their 404 as upstream's do, the cause repeated."""
    try:
        return providers.get(conn, uuid)
    except ProviderNotFound:
        raise errors.NotFound(f"{no_provider(uuid)} : {no_provider(uuid)}") from None


def _changed_meanwhile(fact: Exception):
    """Until the inventory family's own mapping: a lost generation race."""
    if isinstance(fact, ConcurrentUpdate):
        return concurrent_update(fact.uuid)
    return None


def _check_capacity(req, provider, inventories, action: str) -> None:
    """Upstream's rule, on capacity = int((total - reserved) * allocation_ratio):
    it must be positive before 1.26 and may be zero from 1.26 (reserved ==
    total, or allocation_ratio 0, is then accepted)."""
    allow_zero = web.version(req) >= mv.RESERVED_EQUALS_TOTAL
    for inv in inventories:
        if inv.capacity > 0 or (allow_zero and inv.capacity == 0):
            continue
        comparison = "greater than" if allow_zero else "greater than or equal to"
        raise errors.BadRequest(
            f"Unable to {action} inventory for resource provider {provider.uuid}: Invalid "
            f"inventory for '{inv.resource_class}' on resource provider "
            f"'{provider.uuid}'. The reserved value is {comparison} total."
        )


def _stale(uuid):
    return errors.Conflict("resource provider generation conflict", code=errors.CONCURRENT_UPDATE)


def _find(inventories, resource_class):
    return next((inv for inv in inventories if inv.resource_class == resource_class), None)


class Inventories:
    def __init__(self, db):
        self.db = db

    def _send_all(self, req, resp, generation, found):
        body = {
            "resource_provider_generation": generation,
            "inventories": {inv.resource_class: inv.fields() for inv in found},
        }
        web.render(resp, body)
        if found:
            web.cache_headers(req, resp, web.newest(found))
        elif web.version(req) >= mv.CACHE_HEADERS:
            # Upstream takes last-modified from the inventories; with none
            # there is no last-modified, only cache-control.
            resp.set_header("Cache-Control", "no-cache")

    def _send_one(self, req, resp, generation, inv, status=200):
        body = {**inv.fields(), "resource_provider_generation": generation}
        web.render(resp, body, status)
        web.cache_headers(req, resp, inv.modified)

    def list(self, req, resp, uuid):
        web.check_accept(req)
        req.context.placement.can(policies.LIST)

        def read(conn):
            provider = _provider_for_read(conn, uuid)
            return provider, store.list_for(conn, provider.id)

        provider, found = self.db.read(read)
        self._send_all(req, resp, provider.generation, found)

    def show(self, req, resp, uuid, resource_class):
        web.check_accept(req)
        req.context.placement.can(policies.SHOW)

        def read(conn):
            provider = _provider_for_read(conn, uuid)
            inv = _find(store.list_for(conn, provider.id), resource_class)
            if inv is None:
                raise errors.NotFound(f"No inventory of class {resource_class} for {uuid}")
            return provider, inv

        provider, inv = self.db.read(read)
        self._send_one(req, resp, provider.generation, inv)

    def replace_all(self, req, resp, uuid):
        web.require_json(req)
        req.context.placement.can(policies.UPDATE)
        data = web.read_json(req)

        def write(conn):
            provider = _provider(conn, uuid)
            web.validate(data, schema.REPLACE_ALL)
            if data["resource_provider_generation"] != provider.generation:
                raise _stale(uuid)
            wanted = [store.with_defaults(rc, rec) for rc, rec in data["inventories"].items()]
            _check_capacity(req, provider, wanted, "update")
            generation = store.replace(
                conn,
                provider,
                wanted,
                unknown_class_message=lambda m: (
                    f"Unknown resource class in inventory for resource provider {uuid}: {m}"
                ),
            )
            return generation, store.list_for(conn, provider.id)

        with web.answering(_changed_meanwhile):
            generation, found = self.db.write(write)
        self._send_all(req, resp, generation, found)

    def create(self, req, resp, uuid):
        """POST one class; the body's generation, when given, is not checked (as upstream)."""
        web.require_json(req)
        req.context.placement.can(policies.CREATE)
        data = web.read_json(req)

        def write(conn):
            provider = _provider(conn, uuid)
            web.validate(data, schema.CREATE)
            new = store.with_defaults(data["resource_class"], data)
            _check_capacity(req, provider, [new], "create")
            current = store.list_for(conn, provider.id)
            if _find(current, new.resource_class) is not None:
                raise errors.Conflict(
                    f"Update conflict: Inventory for '{new.resource_class}' on resource "
                    f"provider '{uuid}' already exists.",
                    code=errors.CONCURRENT_UPDATE,
                )
            generation = store.replace(
                conn,
                provider,
                current + [new],
                unknown_class_message=lambda m: (
                    f"Unable to create inventory for resource provider {uuid}: {m}"
                ),
            )
            return generation, _find(store.list_for(conn, provider.id), new.resource_class)

        with web.answering(_changed_meanwhile):
            generation, inv = self.db.write(write)
        resp.set_header(
            "Location",
            web.location(req, f"/resource_providers/{uuid}/inventories/{inv.resource_class}"),
        )
        self._send_one(req, resp, generation, inv, status=201)

    def update(self, req, resp, uuid, resource_class):
        web.require_json(req)
        req.context.placement.can(policies.UPDATE)
        data = web.read_json(req)

        def write(conn):
            provider = _provider(conn, uuid)
            web.validate(data, schema.UPDATE_ONE)
            if data["resource_provider_generation"] != provider.generation:
                raise _stale(uuid)
            changed = store.with_defaults(resource_class, data)
            _check_capacity(req, provider, [changed], "update")
            if not names.resource_class_ids(conn, [resource_class]):
                raise errors.NotFound(f"No such resource class {resource_class}.")
            current = store.list_for(conn, provider.id)
            if _find(current, resource_class) is None:
                raise errors.BadRequest(
                    "No inventory record with resource class for resource provider "
                    f"{uuid}: No inventory of class {resource_class} found."
                )
            others = [inv for inv in current if inv.resource_class != resource_class]
            generation = store.replace(conn, provider, others + [changed])
            return generation, _find(store.list_for(conn, provider.id), resource_class)

        with web.answering(_changed_meanwhile):
            generation, inv = self.db.write(write)
        self._send_one(req, resp, generation, inv)

    def delete(self, req, resp, uuid, resource_class):
        req.context.placement.can(policies.DELETE)

        def write(conn):
            provider = _provider(conn, uuid)
            current = store.list_for(conn, provider.id)
            if _find(current, resource_class) is None:
                known = names.resource_class_ids(conn, [resource_class])
                cause = (
                    f"No inventory of class {resource_class} found for delete"
                    if known
                    else f"No such resource class {resource_class}."
                )
                raise errors.NotFound(
                    f"No inventory of class {resource_class} found for delete: {cause}"
                )
            others = [inv for inv in current if inv.resource_class != resource_class]
            try:
                store.replace(conn, provider, others)
            except ConcurrentUpdate as fact:
                raise errors.Conflict(
                    f"Unable to delete inventory of class {resource_class}: "
                    f"{concurrent_update(fact.uuid).message}",
                    code=errors.CONCURRENT_UPDATE,
                ) from None
            except errors.Conflict as exc:
                # In use, or changed meanwhile: upstream codes both concurrent_update.
                raise errors.Conflict(
                    f"Unable to delete inventory of class {resource_class}: "
                    f"{exc.message.removeprefix('update conflict: ')}",
                    code=errors.CONCURRENT_UPDATE,
                ) from None

        self.db.write(write)
        web.no_content(resp)

    def delete_all(self, req, resp, uuid):
        if web.version(req) < mv.DELETE_INVENTORIES:
            raise errors.MethodNotAtThisVersion(
                req.method, web.version_hint(req, mv.DELETE_INVENTORIES, "This method")
            )
        req.context.placement.can(policies.DELETE)

        def write(conn):
            provider = _provider(conn, uuid)
            try:
                store.replace(conn, provider, [])
            except (errors.Conflict, ConcurrentUpdate) as exc:
                if getattr(exc, "code", None) == errors.INVENTORY_INUSE:
                    raise errors.Conflict(
                        exc.message.removeprefix("update conflict: "),
                        code=errors.INVENTORY_INUSE,
                    ) from None
                raise errors.Conflict(
                    f"Unable to delete inventory for resource provider {uuid} because the "
                    "inventory was updated by another process. Please retry your request.",
                    code=errors.CONCURRENT_UPDATE,
                ) from None

        self.db.write(write)
        web.no_content(resp)
