"""POST /reshaper (from 1.30): the three-step write is ops/reshaper.py's."""

from __future__ import annotations

from functools import partial

from placement_svc import errors
from placement_svc import microversion as mv
from placement_svc.api.allocation_writes import incomplete_ids, wanted_for, write_words
from placement_svc.api.wording import inventory_in_use, no_provider
from placement_svc.db.exceptions import InventoryInUse, ProviderNotFound, UnknownResourceClass
from placement_svc.http import web
from placement_svc.ops import reshaper as ops
from placement_svc.ops.exceptions import ProviderGenerationMismatch
from placement_svc.policies import reshaper as policies
from placement_svc.schemas import reshaper as schema


def _words(fact: Exception) -> errors.PlacementError | None:
    """Upstream's answer to what the reshape reports."""
    match fact:
        case ProviderNotFound(uuid):
            return errors.BadRequest(
                f"Resource provider {uuid} in inventories not found: {no_provider(uuid)}",
                code=errors.RESOURCE_PROVIDER_NOT_FOUND,
            )
        case ProviderGenerationMismatch(uuid, actual, given):
            return errors.Conflict(
                f"resource provider generation conflict for provider {uuid}: actual: "
                f"{actual}, given: {given}",
                code=errors.CONCURRENT_UPDATE,
            )
        case UnknownResourceClass(names):
            return errors.BadRequest(f"malformed reshaper data: No such resource class {names[0]}.")
        case InventoryInUse(uuid, classes):
            return errors.Conflict(
                f"update conflict: {inventory_in_use(uuid, classes)}",
                code=errors.INVENTORY_INUSE,
            )
    return write_words(fact, "update conflict")


class Reshaper:
    def __init__(self, db, conf):
        self.db = db
        self.retries = conf.placement.allocation_conflict_retry_count
        self.incomplete = incomplete_ids(conf)

    def reshape(self, req, resp):
        web.require_version(req, mv.RESHAPER)
        web.require_json(req)
        req.context.placement.can(policies.RESHAPE)
        version = web.version(req)
        data = web.read_json(req, schema.for_version(version))
        work = partial(
            ops.reshape,
            new_inventories=data["inventories"],
            wanted=[wanted_for(uuid, body) for uuid, body in data["allocations"].items()],
            check_generation=version >= mv.CONSUMER_GENERATION,
            incomplete=self.incomplete,
        )
        with web.answering(_words):
            self.db.write(work)
        web.no_content(resp)
