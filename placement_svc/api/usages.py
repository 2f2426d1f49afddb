"""GET /resource_providers/{uuid}/usages: used amounts per class with inventory."""

from __future__ import annotations

from placement_svc import web
from placement_svc.db import inventories, names, providers
from placement_svc.policies import usages as policies


class ProviderUsages:
    def __init__(self, db):
        self.db = db

    def show(self, req, resp, uuid):
        web.check_accept(req)
        req.context.placement.can(policies.PROVIDER_USAGES)

        def read(conn):
            missing = f"No resource provider with uuid {uuid} found"
            provider = providers.get(conn, uuid, f"{missing}: {missing}")
            used = inventories.usage_by_class(conn, provider.id)
            classes = [inv.resource_class for inv in inventories.list_for(conn, provider.id)]
            ids = names.resource_class_ids(conn, classes)
            by_name = {name: used.get(ids[name], 0) for name in classes}
            return provider.generation, by_name

        generation, usages = self.db.read(read)
        web.render(resp, {"resource_provider_generation": generation, "usages": usages})
        web.cache_headers(req, resp)
