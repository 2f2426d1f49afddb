"""GET /resource_providers/{uuid}/usages: used amounts per class with inventory."""

from __future__ import annotations

from functools import partial

from placement_svc import errors
from placement_svc.api.wording import no_provider
from placement_svc.db.exceptions import ProviderNotFound
from placement_svc.http import web
from placement_svc.ops import usages as ops


def _words(fact: Exception) -> errors.PlacementError | None:
    match fact:
        case ProviderNotFound(uuid):
            return errors.NotFound(f"{no_provider(uuid)}: {no_provider(uuid)}")
    return None


class ProviderUsages:
    def __init__(self, db):
        self.db = db

    def show(self, req, resp, uuid):
        web.check_accept(req)
        web.authorize(req)
        with web.answering(_words):
            generation, usages = self.db.read(partial(ops.for_provider, uuid=uuid))
        web.render(resp, {"resource_provider_generation": generation, "usages": usages})
        web.cache_headers(req, resp)
