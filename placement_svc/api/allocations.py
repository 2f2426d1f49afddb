"""/allocations, /allocations/{consumer_uuid} and /resource_providers/{uuid}/allocations.

``Allocations`` is also what the route table binds /usages and /reshaper to;
those two live in their own modules and are reached through it.
"""

from __future__ import annotations

import uuid as uuidlib

from placement_svc import errors, web
from placement_svc import microversion as mv
from placement_svc.api import reshaper, usages_total
from placement_svc.api.allocation_writes import incomplete_ids, wanted_for, write_retrying
from placement_svc.db import allocations as store
from placement_svc.db import capacity, providers
from placement_svc.db.exceptions import ProviderNotFound
from placement_svc.policies import allocations as policies
from placement_svc.schemas import allocation as schema
from placement_svc.uuidutil import is_uuid_like


def put_schema(version) -> dict:
    if version >= mv.CONSUMER_TYPES:
        return schema.PUT_V1_38
    if version >= mv.MAPPINGS:
        return schema.PUT_V1_34
    if version >= mv.CONSUMER_GENERATION:
        return schema.PUT_V1_28
    if version >= mv.ALLOCATIONS_DICT:
        return schema.PUT_V1_12
    if version >= mv.ALLOCATION_PROJECT_USER:
        return schema.PUT_V1_8
    return schema.PUT_V1_0


def post_schema(version) -> dict:
    if version >= mv.CONSUMER_TYPES:
        return schema.POST_V1_38
    if version >= mv.MAPPINGS:
        return schema.POST_V1_34
    if version >= mv.CONSUMER_GENERATION:
        return schema.POST_V1_28
    return schema.POST_V1_13


class Allocations:
    def __init__(self, db, conf):
        self.db = db
        self.conf = conf
        self._usages = usages_total.TotalUsages(db)
        self._reshaper = reshaper.Reshaper(db, conf)

    def show(self, req, resp, consumer_uuid):
        """Never a 404: a consumer without allocations has ``{}``."""
        web.check_accept(req)
        req.context.placement.can(policies.ALLOC_LIST)
        version = web.version(req)
        consumer, found = self.db.read(lambda conn: store.for_consumer(conn, consumer_uuid))
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

        not_found = (
            f"Resource provider '{uuid}' not found: No resource provider with uuid {uuid} found"
        )

        def read(conn):
            try:
                provider = providers.get(conn, uuid)
            except ProviderNotFound:
                raise errors.NotFound(not_found) from None
            return provider, store.for_provider(conn, provider.id)

        provider, found = self.db.read(read)
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
        data = web.read_json(req, put_schema(version))
        consumer_uuid = str(uuidlib.UUID(consumer_uuid))
        self._write(
            [wanted_for(consumer_uuid, data)],
            version,
            unknown_class=f"Unable to allocate inventory for consumer {consumer_uuid}:",
        )
        web.no_content(resp)

    def post_many(self, req, resp):
        web.require_version(req, mv.POST_ALLOCATIONS)
        web.require_json(req)
        req.context.placement.can(policies.ALLOC_MANAGE)
        version = web.version(req)
        data = web.read_json(req, post_schema(version))
        wanted = [wanted_for(consumer_uuid, body) for consumer_uuid, body in data.items()]
        self._write(wanted, version, unknown_class="Unable to allocate inventory")
        web.no_content(resp)

    def _write(self, wanted, version, unknown_class: str) -> None:
        check_generation = version >= mv.CONSUMER_GENERATION
        incomplete = incomplete_ids(self.conf)
        try:
            write_retrying(
                self.db,
                self.conf,
                lambda conn: store.write(conn, wanted, check_generation, incomplete),
            )
        except store.UnknownResourceClass as exc:
            raise errors.BadRequest(f"{unknown_class} {exc.message}") from None
        except capacity.InvalidAllocation as exc:
            raise errors.Conflict(f"Unable to allocate inventory: {exc.message}") from None

    def delete(self, req, resp, consumer_uuid):
        req.context.placement.can(policies.ALLOC_DELETE)
        if not self.db.write(lambda conn: store.delete_for_consumer(conn, consumer_uuid)):
            raise errors.NotFound(f"No allocations for consumer '{consumer_uuid}'")
        web.no_content(resp)

    def usages(self, req, resp):
        self._usages.show(req, resp)

    def reshape(self, req, resp):
        self._reshaper.reshape(req, resp)
