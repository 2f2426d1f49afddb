"""/resource_providers/{uuid}/aggregates (1.1+; generation in the body from 1.19)."""

from __future__ import annotations

from functools import partial

from placement_svc import errors
from placement_svc import microversion as mv
from placement_svc.api.wording import concurrent_update, generation_changed, no_provider
from placement_svc.db.exceptions import ConcurrentUpdate, ProviderNotFound
from placement_svc.http import answering, reading
from placement_svc.ops import aggregates as ops
from placement_svc.ops.exceptions import ProviderGenerationMismatch


def _words(fact: Exception) -> errors.PlacementError | None:
    """Upstream's answer to what the aggregate units of work report."""
    match fact:
        case ProviderNotFound(uuid):
            return errors.NotFound(no_provider(uuid))
        case ProviderGenerationMismatch():
            return generation_changed()
        case ConcurrentUpdate(uuid):
            return concurrent_update(uuid)
    return None


class Aggregates:
    def __init__(self, db):
        self.db = db

    def _send(self, req, resp, generation, uuids):
        body = {"aggregates": uuids}
        if reading.version(req) >= mv.AGGREGATE_GENERATION:
            body["resource_provider_generation"] = generation
        answering.render(resp, body)
        answering.cache_headers(req, resp)

    def list(self, req, resp, uuid):
        # Upstream checks the media types of these two before the version.
        reading.check_accept(req)
        reading.check_version(req)
        reading.authorize(req)
        with answering.worded(_words):
            self._send(req, resp, *self.db.read(partial(ops.list_for, uuid=uuid)))

    def replace(self, req, resp, uuid):
        reading.require_json(req)
        reading.check_version(req)
        reading.authorize(req)
        data = reading.read_json(req)
        work = partial(ops.replace, uuid=uuid, data=data, version=reading.version(req))
        with answering.worded(_words):
            self._send(req, resp, *self.db.write(work))
