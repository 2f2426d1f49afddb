"""GET /allocation_candidates (1.10+): parse, find (search, merge, render), answer."""

from __future__ import annotations

import random
from functools import partial

from placement_svc import microversion as mv
from placement_svc import web
from placement_svc.candidates import request
from placement_svc.candidates.find import Settings, find
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
        work = partial(
            find, wanted=wanted, version=version, settings=Settings.of(self.conf), rng=rng
        )
        web.render(resp, self.db.read(work))
        web.cache_headers(req, resp)
