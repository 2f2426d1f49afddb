"""/allocations, /allocations/{consumer_uuid} and /resource_providers/{uuid}/allocations."""

from __future__ import annotations

import uuid as uuidlib
from functools import partial

from placement_svc import errors, web
from placement_svc import microversion as mv
from placement_svc.api.allocation_writes import (
    CHANGED_WHILE_ALLOCATING,
    incomplete_ids,
    wanted_for,
    write_words,
)
from placement_svc.api.wording import no_provider
from placement_svc.db.exceptions import ProviderNotFound, UnknownResourceClass
from placement_svc.ops import allocations as ops
from placement_svc.ops.exceptions import NoAllocations
from placement_svc.policies import allocations as policies
from placement_svc.schemas import allocation as schema
from placement_svc.uuidutil import is_uuid_like


def _words(fact: Exception, action: str, consumer_uuid: str = "") -> errors.PlacementError | None:
    """Upstream's answer to what the allocation units of work report."""
    match fact:
        case ProviderNotFound(uuid):
            return errors.NotFound(f"Resource provider '{uuid}' not found: {no_provider(uuid)}")
        case NoAllocations(uuid):
            return errors.NotFound(f"No allocations for consumer '{uuid}'")
        case UnknownResourceClass(names) if action == "put":
            return errors.BadRequest(
                f"Unable to allocate inventory for consumer {consumer_uuid}: "
                f"No such resource class {names[0]}."
            )
        case UnknownResourceClass(names):
            return errors.BadRequest(
                f"Unable to allocate inventory No such resource class {names[0]}."
            )
    return write_words(fact, CHANGED_WHILE_ALLOCATING)


class Allocations:
    def __init__(self, db, conf):
        self.db = db
        self.retries = conf.placement.allocation_conflict_retry_count
        self.incomplete = incomplete_ids(conf)

    def show(self, req, resp, consumer_uuid):
        """Never a 404: a consumer without allocations has ``{}``."""
        web.check_accept(req)
        req.context.placement.can(policies.ALLOC_LIST)
        version = web.version(req)
        consumer, found = self.db.read(partial(ops.for_consumer, consumer_uuid=consumer_uuid))
        by_provider: dict[str, dict] = {}
        for alloc in found:
            entry = by_provider.setdefault(alloc.provider_uuid, {"resources": {}})
            entry["resources"][alloc.resource_class] = alloc.used
            entry["generation"] = alloc.provider_generation
        body: dict = {"allocations": by_provider}
        if found and version >= mv.ALLOCATIONS_DICT:
            body["project_id"] = consumer.project_id
            body["user_id"] = consumer.user_id
            if version >= mv.CONSUMER_GENERATION:
                body["consumer_generation"] = consumer.generation
            if version >= mv.CONSUMER_TYPES:
                body["consumer_type"] = consumer.type_name
        web.render(resp, body)
        web.cache_headers(req, resp, web.newest(found))

    def for_provider(self, req, resp, uuid):
        web.check_accept(req)
        req.context.placement.can(policies.RP_ALLOC_LIST)
        version = web.version(req)
        with web.answering(_words, "for_provider"):
            provider, found = self.db.read(partial(ops.for_provider, uuid=uuid))
        by_consumer: dict[str, dict] = {}
        for alloc in found:
            entry = by_consumer.setdefault(alloc.consumer_uuid, {"resources": {}})
            entry["resources"][alloc.resource_class] = alloc.used
            if version >= mv.CONSUMER_GENERATION:
                entry["consumer_generation"] = alloc.consumer_generation
        body = {"allocations": by_consumer, "resource_provider_generation": provider.generation}
        web.render(resp, body)
        web.cache_headers(req, resp, web.newest(found))

    def replace(self, req, resp, consumer_uuid):
        web.require_json(req)
        req.context.placement.can(policies.ALLOC_UPDATE)
        version = web.version(req)
        if not is_uuid_like(consumer_uuid):
            raise errors.BadRequest(f"Malformed consumer_uuid: {consumer_uuid}")
        data = web.read_json(req, schema.for_version(version).put)
        consumer_uuid = str(uuidlib.UUID(consumer_uuid))
        with web.answering(_words, "put", consumer_uuid):
            self._write([wanted_for(consumer_uuid, data)], version)
        web.no_content(resp)

    def post_many(self, req, resp):
        web.require_version(req, mv.POST_ALLOCATIONS)
        web.require_json(req)
        req.context.placement.can(policies.ALLOC_MANAGE)
        version = web.version(req)
        data = web.read_json(req, schema.for_version(version).post)
        with web.answering(_words, "post"):
            self._write([wanted_for(uuid, body) for uuid, body in data.items()], version)
        web.no_content(resp)

    def _write(self, wanted, version) -> None:
        work = partial(
            ops.write,
            wanted=wanted,
            check_generation=version >= mv.CONSUMER_GENERATION,
            incomplete=self.incomplete,
        )
        ops.write_retrying(self.db, self.retries, work)

    def delete(self, req, resp, consumer_uuid):
        req.context.placement.can(policies.ALLOC_DELETE)
        with web.answering(_words, "delete"):
            self.db.write(partial(ops.delete, consumer_uuid=consumer_uuid))
        web.no_content(resp)
