"""/resource_providers and /resource_providers/{uuid}."""

from __future__ import annotations

import uuid as uuidlib

from placement_svc import microversion as mv
from placement_svc import queryparams, web
from placement_svc.db import providers as store
from placement_svc.policies import resource_providers as policies
from placement_svc.schemas import resource_provider as schema


def links(req, provider) -> list[dict]:
    base = web.url(req, f"/resource_providers/{provider.uuid}")
    rels = ["inventories", "usages"]
    version = web.version(req)
    if version >= mv.AGGREGATES:
        rels.append("aggregates")
    if version >= mv.TRAITS:
        rels.append("traits")
    if version >= mv.ALLOCATIONS_LINK:
        rels.append("allocations")
    return [{"rel": "self", "href": base}] + [{"rel": rel, "href": f"{base}/{rel}"} for rel in rels]


def represent(req, provider) -> dict:
    body = {
        "uuid": provider.uuid,
        "name": provider.name,
        "generation": provider.generation,
        "links": links(req, provider),
    }
    if web.version(req) >= mv.NESTED_PROVIDERS:
        body["parent_provider_uuid"] = provider.parent_uuid
        body["root_provider_uuid"] = provider.root_uuid
    return body


class ResourceProviders:
    def __init__(self, db):
        self.db = db

    def list(self, req, resp):
        web.check_accept(req)
        req.context.placement.can(policies.LIST)
        version = web.version(req)
        params = web.query(req, schema.list_query(version))
        found = self.db.read(lambda conn: self._filtered(conn, params, version))
        web.render(resp, {"resource_providers": [represent(req, p) for p in found]})
        web.cache_headers(req, resp, web.newest(found))

    def _filtered(self, conn, params, version):
        def last(key):
            return params[key][-1] if key in params else None

        return store.list_filtered(
            conn,
            name=last("name") or None,  # an empty name filters nothing, as upstream
            uuid=last("uuid"),
            in_tree=queryparams.in_tree(last("in_tree")) if "in_tree" in params else None,
            member_of=queryparams.member_of(params.get("member_of", []), version),
            required=queryparams.required(params.get("required", []), version),
            resources=queryparams.resources(last("resources")) if "resources" in params else {},
        )

    def create(self, req, resp):
        web.require_json(req)
        req.context.placement.can(policies.CREATE)
        version = web.version(req)
        nested = version >= mv.NESTED_PROVIDERS
        data = web.read_json(req, schema.CREATE_V1_14 if nested else schema.CREATE_V1_0)
        uuid = store.canonical_uuid(data["uuid"]) if data.get("uuid") else str(uuidlib.uuid4())
        # Upstream normalises the new provider's uuid but matches the parent
        # as written (a dashless parent is unknown there too).
        parent = data.get("parent_provider_uuid")
        provider = self.db.write(lambda conn: store.create(conn, data["name"], uuid, parent))
        resp.set_header("Location", web.location(req, f"/resource_providers/{provider.uuid}"))
        if version >= mv.PROVIDER_POST_RETURNS_BODY:
            web.render(resp, represent(req, provider))
            web.cache_headers(req, resp, provider.modified)
        else:
            web.no_content(resp, 201)

    def show(self, req, resp, uuid):
        web.check_accept(req)
        req.context.placement.can(policies.SHOW)
        provider = self.db.read(lambda conn: store.get(conn, uuid))
        web.render(resp, represent(req, provider))
        web.cache_headers(req, resp, provider.modified)

    def update(self, req, resp, uuid):
        web.require_json(req)
        req.context.placement.can(policies.UPDATE)
        version = web.version(req)
        nested = version >= mv.NESTED_PROVIDERS
        data = web.read_json(req)

        def update(conn):
            provider = store.get(conn, uuid)  # 404 before the body's 400, as upstream
            web.validate(data, schema.UPDATE_V1_14 if nested else schema.UPDATE_V1_0)
            return store.update(
                conn,
                provider,
                data["name"],
                data.get("parent_provider_uuid", store.KEEP_PARENT),
                allow_reparenting=version >= mv.REPARENTING,
            )

        provider = self.db.write(update)
        web.render(resp, represent(req, provider))
        web.cache_headers(req, resp, provider.modified)

    def delete(self, req, resp, uuid):
        req.context.placement.can(policies.DELETE)

        def delete(conn):
            provider = store.get(
                conn, uuid, f"No resource provider with uuid {uuid} found for delete"
            )
            store.delete(conn, provider)

        self.db.write(delete)
        web.no_content(resp)
