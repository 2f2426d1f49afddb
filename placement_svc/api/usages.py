"""GET /resource_providers/{uuid}/usages: used amounts per class with inventory."""

from __future__ import annotations

from functools import partial

from placement_svc import errors
from placement_svc.api.wording import no_provider
from placement_svc.db.exceptions import ProviderNotFound
from placement_svc.http import answering, reading
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
        reading.check_accept(req)
        reading.authorize(req)
        with answering.worded(_words):
            generation, usages = self.db.read(partial(ops.for_provider, uuid=uuid))
        answering.render(resp, {"resource_provider_generation": generation, "usages": usages})
        answering.cache_headers(req, resp)
