"""/resource_providers/{uuid}/aggregates (1.1+; generation in the body from 1.19)."""

from __future__ import annotations

from placement_svc import microversion as mv
from placement_svc import web
from placement_svc.db import aggregates as store
from placement_svc.db import providers
from placement_svc.policies import aggregates as policies
from placement_svc.schemas import aggregate as schema


class Aggregates:
    def __init__(self, db):
        self.db = db

    def _send(self, req, resp, generation, uuids):
        body = {"aggregates": uuids}
        if web.version(req) >= mv.AGGREGATE_GENERATION:
            body["resource_provider_generation"] = generation
        web.render(resp, body)
        web.cache_headers(req, resp)

    def list(self, req, resp, uuid):
        # Upstream checks the media types of these two before the version.
        web.check_accept(req)
        web.require_version(req, mv.AGGREGATES)
        req.context.placement.can(policies.LIST)

        def read(conn):
            provider = providers.get(conn, uuid)
            return provider.generation, store.for_provider(conn, provider.id)

        self._send(req, resp, *self.db.read(read))

    def replace(self, req, resp, uuid):
        web.require_json(req)
        web.require_version(req, mv.AGGREGATES)
        req.context.placement.can(policies.UPDATE)
        with_generation = web.version(req) >= mv.AGGREGATE_GENERATION
        data = web.read_json(req)

        def write(conn):
            provider = providers.get(conn, uuid)  # 404 before the body's 400, as upstream
            web.validate(data, schema.REPLACE_V1_19 if with_generation else schema.REPLACE_V1_1)
            uuids = data["aggregates"] if with_generation else data
            seen = data["resource_provider_generation"] if with_generation else None
            if seen is not None and seen != provider.generation:
                raise providers.ConcurrentUpdate(
                    uuid,
                    "Resource provider's generation already changed. Please update the "
                    "generation and try again.",
                )
            # Before 1.19 the body carries no generation; the change still bumps it
            # (checked against the generation just read) so other writers see it.
            generation = providers.bump_generation(conn, provider, seen)
            store.replace(conn, provider.id, uuids)
            # The answer echoes the list as sent (its order and spelling), as upstream's.
            return generation, uuids

        self._send(req, resp, *self.db.write(write))
