"""/resource_providers/{uuid}/traits (1.6+)."""

from __future__ import annotations

from placement_svc import errors, web
from placement_svc import microversion as mv
from placement_svc.db import names, providers, traits
from placement_svc.db import provider_traits as store
from placement_svc.policies import traits as policies
from placement_svc.schemas import trait as schema


class ProviderTraits:
    def __init__(self, db):
        self.db = db

    def _send(self, req, resp, generation, traits):
        web.render(
            resp,
            {"traits": [t.name for t in traits], "resource_provider_generation": generation},
        )
        web.cache_headers(req, resp, web.newest(traits))

    def list(self, req, resp, uuid):
        web.require_version(req, mv.TRAITS)
        web.check_accept(req)
        req.context.placement.can(policies.RP_TRAIT_LIST)

        def read(conn):
            missing = f"No resource provider with uuid {uuid} found"
            provider = providers.get(conn, uuid, f"{missing}: {missing}")
            return provider.generation, store.for_provider(conn, provider.id)

        self._send(req, resp, *self.db.read(read))

    def replace(self, req, resp, uuid):
        web.require_version(req, mv.TRAITS)
        web.require_json(req)
        req.context.placement.can(policies.RP_TRAIT_UPDATE)
        data = web.read_json(req, schema.PROVIDER_TRAITS)

        def write(conn):
            provider = providers.get(conn, uuid)
            seen = data["resource_provider_generation"]
            if seen != provider.generation:
                raise providers.ConcurrentUpdate(
                    uuid,
                    "Resource provider's generation already changed. Please update the "
                    "generation and try again.",
                )
            ids = names.trait_ids(conn, data["traits"])
            missing = sorted(set(data["traits"]) - set(ids))
            if missing:
                raise errors.BadRequest(f"No such trait {', '.join(missing)}")
            # Upstream moves the generation only when the set of traits changes.
            changed = store.replace(conn, provider.id, set(ids.values()))
            generation = providers.bump_generation(conn, provider, seen) if changed else seen
            # Upstream answers with the traits it looked up by the body's names.
            return generation, store.for_provider(conn, provider.id, traits.lookup_order(conn))

        self._send(req, resp, *self.db.write(write))

    def delete(self, req, resp, uuid):
        web.require_version(req, mv.TRAITS)
        req.context.placement.can(policies.RP_TRAIT_DELETE)

        def write(conn):
            provider = providers.get(conn, uuid)
            if store.replace(conn, provider.id, set()):
                providers.bump_generation(conn, provider)

        self.db.write(write)
        web.no_content(resp)
