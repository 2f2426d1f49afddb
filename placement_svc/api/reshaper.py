"""POST /reshaper (from 1.30): the three-step write is ops/reshaper.py's."""

from __future__ import annotations

from functools import partial

from placement_svc import errors
from placement_svc import microversion as mv
from placement_svc.api.allocation_writes import incomplete_ids, wanted_for, write_words
from placement_svc.api.wording import inventory_in_use, no_provider
from placement_svc.db.exceptions import InventoryInUse, ProviderNotFound, UnknownResourceClass
from placement_svc.http import answering, reading
from placement_svc.ops import reshaper as ops
from placement_svc.ops.exceptions import ProviderGenerationMismatch


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
        self.incomplete = incomplete_ids(conf)

    def reshape(self, req, resp):
        reading.check_version(req)
        reading.require_json(req)
        reading.authorize(req)
        version = reading.version(req)
        data = reading.read_body(req)
        work = partial(
            ops.reshape,
            new_inventories=data["inventories"],
            wanted=[wanted_for(uuid, body) for uuid, body in data["allocations"].items()],
            check_generation=version >= mv.CONSUMER_GENERATION,
            incomplete=self.incomplete,
        )
        with answering.worded(_words):
            self.db.write(work)
        answering.no_content(resp)
