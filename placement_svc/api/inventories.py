"""/resource_providers/{uuid}/inventories[/{resource_class}].

The checks and their order are the units of work's (ops/inventories.py);
here the facts they report get upstream's words, which differ per handler.
"""

from __future__ import annotations

from functools import partial

from placement_svc import errors
from placement_svc import microversion as mv
from placement_svc.api.wording import (
    concurrent_update,
    inventory_in_use,
    no_provider,
    provider_changed,
)
from placement_svc.db.exceptions import (
    ConcurrentUpdate,
    InventoryInUse,
    ProviderNotFound,
    UnknownResourceClass,
)
from placement_svc.http import answering, reading
from placement_svc.ops import inventories as ops
from placement_svc.ops.exceptions import (
    InvalidInventory,
    InventoryExists,
    InventoryNotFound,
    ProviderGenerationMismatch,
)


def _words(fact: Exception, action: str, uuid: str, rc: str = "") -> errors.PlacementError | None:
    """Upstream's answer to what the inventory units of work report.

    ``action`` names the handler (list, show, replace_all, create, update,
    delete, delete_all); ``uuid`` and ``rc`` are the URL's.
    """
    if action == "delete":
        return _delete_words(fact, uuid, rc)
    match fact:
        case ProviderNotFound() if action in ("list", "show"):
            # The GET handlers word their 404 as upstream's do, the cause repeated.
            return errors.NotFound(f"{no_provider(uuid)} : {no_provider(uuid)}")
        case ProviderNotFound():
            return errors.NotFound(no_provider(uuid))
        case InventoryNotFound() if action == "show":
            return errors.NotFound(f"No inventory of class {rc} for {uuid}")
        case InventoryNotFound():
            return errors.BadRequest(
                "No inventory record with resource class for resource provider "
                f"{uuid}: No inventory of class {rc} found."
            )
        case ProviderGenerationMismatch():
            return errors.Conflict(
                "resource provider generation conflict", code=errors.CONCURRENT_UPDATE
            )
        case InvalidInventory(rp_uuid, invalid_rc, zero_allowed):
            comparison = "greater than" if zero_allowed else "greater than or equal to"
            doing = "create" if action == "create" else "update"
            return errors.BadRequest(
                f"Unable to {doing} inventory for resource provider {rp_uuid}: Invalid "
                f"inventory for '{invalid_rc}' on resource provider '{rp_uuid}'. The reserved "
                f"value is {comparison} total."
            )
        case InventoryExists(_uuid, existing_rc):
            return errors.Conflict(
                f"Update conflict: Inventory for '{existing_rc}' on resource provider "
                f"'{uuid}' already exists.",
                code=errors.CONCURRENT_UPDATE,
            )
        case UnknownResourceClass(names):
            return _unknown_class(action, uuid, f"No such resource class {names[0]}.")
        case InventoryInUse(rp_uuid, classes) if action == "delete_all":
            return errors.Conflict(inventory_in_use(rp_uuid, classes), code=errors.INVENTORY_INUSE)
        case InventoryInUse(rp_uuid, classes):
            return errors.Conflict(
                f"update conflict: {inventory_in_use(rp_uuid, classes)}",
                code=errors.INVENTORY_INUSE,
            )
        case ConcurrentUpdate() if action == "delete_all":
            return errors.Conflict(
                f"Unable to delete inventory for resource provider {uuid} because the "
                "inventory was updated by another process. Please retry your request.",
                code=errors.CONCURRENT_UPDATE,
            )
        case ConcurrentUpdate(rp_uuid):
            return concurrent_update(rp_uuid)
    return None


def _unknown_class(action: str, uuid: str, cause: str) -> errors.PlacementError:
    if action == "update":
        return errors.NotFound(cause)
    if action == "create":
        return errors.BadRequest(
            f"Unable to create inventory for resource provider {uuid}: {cause}"
        )
    return errors.BadRequest(
        f"Unknown resource class in inventory for resource provider {uuid}: {cause}"
    )


def _delete_words(fact: Exception, uuid: str, rc: str) -> errors.PlacementError | None:
    """DELETE of one class: a missing one says why; a conflict, in use or
    changed meanwhile, is placement.concurrent_update either way, as upstream."""
    match fact:
        case ProviderNotFound():
            return errors.NotFound(no_provider(uuid))
        case InventoryNotFound():
            return _not_found_for_delete(rc, f"No inventory of class {rc} found for delete")
        case UnknownResourceClass():
            return _not_found_for_delete(rc, f"No such resource class {rc}.")
        case InventoryInUse(rp_uuid, classes):
            return _cannot_delete(rc, inventory_in_use(rp_uuid, classes))
        case ConcurrentUpdate(rp_uuid):
            return _cannot_delete(rc, provider_changed(rp_uuid))
    return None


def _not_found_for_delete(rc: str, cause: str) -> errors.NotFound:
    return errors.NotFound(f"No inventory of class {rc} found for delete: {cause}")


def _cannot_delete(rc: str, cause: str) -> errors.Conflict:
    return errors.Conflict(
        f"Unable to delete inventory of class {rc}: {cause}", code=errors.CONCURRENT_UPDATE
    )


class Inventories:
    def __init__(self, db):
        self.db = db

    def _send_all(self, req, resp, generation, found):
        body = {
            "resource_provider_generation": generation,
            "inventories": {inv.resource_class: inv.fields() for inv in found},
        }
        answering.render(resp, body)
        if found:
            answering.cache_headers(req, resp, answering.newest(found))
        elif reading.version(req) >= mv.CACHE_HEADERS:
            # Upstream takes last-modified from the inventories; with none
            # there is no last-modified, only cache-control.
            resp.set_header("Cache-Control", "no-cache")

    def _send_one(self, req, resp, generation, inv, status=200):
        body = {**inv.fields(), "resource_provider_generation": generation}
        answering.render(resp, body, status)
        answering.cache_headers(req, resp, inv.modified)

    def list(self, req, resp, uuid):
        reading.check_accept(req)
        reading.authorize(req)
        with answering.worded(_words, "list", uuid):
            generation, found = self.db.read(partial(ops.list_for, uuid=uuid))
        self._send_all(req, resp, generation, found)

    def show(self, req, resp, uuid, resource_class):
        reading.check_accept(req)
        reading.authorize(req)
        with answering.worded(_words, "show", uuid, resource_class):
            generation, inv = self.db.read(
                partial(ops.show, uuid=uuid, resource_class=resource_class)
            )
        self._send_one(req, resp, generation, inv)

    def replace_all(self, req, resp, uuid):
        reading.require_json(req)
        reading.authorize(req)
        work = partial(
            ops.replace_all, uuid=uuid, data=reading.read_json(req), version=reading.version(req)
        )
        with answering.worded(_words, "replace_all", uuid):
            generation, found = self.db.write(work)
        self._send_all(req, resp, generation, found)

    def create(self, req, resp, uuid):
        reading.require_json(req)
        reading.authorize(req)
        work = partial(
            ops.create, uuid=uuid, data=reading.read_json(req), version=reading.version(req)
        )
        with answering.worded(_words, "create", uuid):
            generation, inv = self.db.write(work)
        resp.set_header(
            "Location",
            answering.location(req, f"/resource_providers/{uuid}/inventories/{inv.resource_class}"),
        )
        self._send_one(req, resp, generation, inv, status=201)

    def update(self, req, resp, uuid, resource_class):
        reading.require_json(req)
        reading.authorize(req)
        work = partial(
            ops.update_one,
            uuid=uuid,
            resource_class=resource_class,
            data=reading.read_json(req),
            version=reading.version(req),
        )
        with answering.worded(_words, "update", uuid, resource_class):
            generation, inv = self.db.write(work)
        self._send_one(req, resp, generation, inv)

    def delete(self, req, resp, uuid, resource_class):
        reading.authorize(req)
        with answering.worded(_words, "delete", uuid, resource_class):
            self.db.write(partial(ops.delete_one, uuid=uuid, resource_class=resource_class))
        answering.no_content(resp)

    def delete_all(self, req, resp, uuid):
        if reading.version(req) < mv.DELETE_INVENTORIES:
            raise errors.MethodNotAtThisVersion(
                req.method, reading.version_hint(req, mv.DELETE_INVENTORIES, "This method")
            )
        reading.authorize(req)
        with answering.worded(_words, "delete_all", uuid):
            self.db.write(partial(ops.delete_all, uuid=uuid))
        answering.no_content(resp)
