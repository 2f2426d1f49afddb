"""GET /allocation_candidates (1.10+): parse, search, merge, render."""

from __future__ import annotations

import random

from placement_svc import microversion as mv
from placement_svc import web
from placement_svc.candidates import merge, render, request, search
from placement_svc.policies import allocation_candidates as policies
from placement_svc.schemas import allocation_candidate as schema


class AllocationCandidates:
    def __init__(self, db, conf):
        self.db = db
        self.conf = conf.placement

    def list(self, req, resp):
        web.require_version(req, mv.ALLOCATION_CANDIDATES)
        web.check_accept(req)
        req.context.placement.can(policies.LIST)
        version = web.version(req)
        wanted = request.parse(web.query(req, schema.query_schema(version)), version)
        rng = random.Random() if self.conf.randomize_allocation_candidates else None

        def work(conn):
            found = search.search(conn, wanted)
            stream = merge.generate(
                wanted, found, self.conf.allocation_candidates_generation_strategy, rng
            )
            chosen, whole = merge.choose(
                stream,
                wanted.limit,
                self.conf.max_allocation_candidates,
                rng,
                keep_whole=version < mv.NESTED_CANDIDATES,
            )
            providers = render.summary_providers(found, chosen, version, whole)
            requested = wanted.resource_classes()
            other = (
                search.other_inventories(conn, found, providers, requested)
                if version >= mv.ALL_RESOURCES_IN_SUMMARIES
                else {}
            )
            return render.body(found, chosen, providers, other, requested, version)

        web.render(resp, self.db.read(work))
        web.cache_headers(req, resp)
