"""GET /resource_providers/{uuid}/usages: used amounts per class with inventory."""

from __future__ import annotations

from placement_svc import errors, web
from placement_svc.api.wording import no_provider
from placement_svc.db import inventories, names, providers
from placement_svc.db.exceptions import ProviderNotFound
from placement_svc.policies import usages as policies


class ProviderUsages:
    def __init__(self, db):
        self.db = db

    def show(self, req, resp, uuid):
        web.check_accept(req)
        req.context.placement.can(policies.PROVIDER_USAGES)

        def read(conn):
            try:
                provider = providers.get(conn, uuid)
            except ProviderNotFound:
                raise errors.NotFound(f"{no_provider(uuid)}: {no_provider(uuid)}") from None
            used = inventories.usage_by_class(conn, provider.id)
            classes = [inv.resource_class for inv in inventories.list_for(conn, provider.id)]
            ids = names.resource_class_ids(conn, classes)
            by_name = {name: used.get(ids[name], 0) for name in classes}
            return provider.generation, by_name

        generation, usages = self.db.read(read)
        web.render(resp, {"resource_provider_generation": generation, "usages": usages})
        web.cache_headers(req, resp)
