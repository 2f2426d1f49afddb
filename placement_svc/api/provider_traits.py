"""/resource_providers/{uuid}/traits (1.6+)."""

from __future__ import annotations

from functools import partial

from placement_svc import errors
from placement_svc.api.wording import concurrent_update, generation_changed, no_provider
from placement_svc.db.exceptions import ConcurrentUpdate, ProviderNotFound, UnknownTrait
from placement_svc.http import answering, reading
from placement_svc.ops import provider_traits as ops
from placement_svc.ops.exceptions import ProviderGenerationMismatch


def _words(fact: Exception, action: str) -> errors.PlacementError | None:
    """Upstream's answer to what the provider trait units of work report."""
    match fact:
        case ProviderNotFound(uuid) if action == "list":
            return errors.NotFound(f"{no_provider(uuid)}: {no_provider(uuid)}")
        case ProviderNotFound(uuid):
            return errors.NotFound(no_provider(uuid))
        case ProviderGenerationMismatch():
            return generation_changed()
        case UnknownTrait(names):
            return errors.BadRequest(f"No such trait {', '.join(names)}")
        case ConcurrentUpdate(uuid):
            return concurrent_update(uuid)
    return None


class ProviderTraits:
    def __init__(self, db):
        self.db = db

    def _send(self, req, resp, generation, traits):
        answering.render(
            resp,
            {"traits": [t.name for t in traits], "resource_provider_generation": generation},
        )
        answering.cache_headers(req, resp, answering.newest(traits))

    def list(self, req, resp, uuid):
        reading.check_version(req)
        reading.check_accept(req)
        reading.authorize(req)
        with answering.worded(_words, "list"):
            self._send(req, resp, *self.db.read(partial(ops.list_for, uuid=uuid)))

    def replace(self, req, resp, uuid):
        reading.check_version(req)
        reading.require_json(req)
        reading.authorize(req)
        data = reading.read_body(req)
        work = partial(
            ops.replace,
            uuid=uuid,
            trait_names=data["traits"],
            seen=data["resource_provider_generation"],
        )
        with answering.worded(_words, "replace"):
            self._send(req, resp, *self.db.write(work))

    def delete(self, req, resp, uuid):
        reading.check_version(req)
        reading.authorize(req)
        with answering.worded(_words, "delete"):
            self.db.write(partial(ops.delete_all, uuid=uuid))
        answering.no_content(resp)
