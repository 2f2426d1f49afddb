"""GET /usages?project_id=&user_id=[&consumer_type=] (from 1.9; types from 1.38)."""

from __future__ import annotations

from functools import partial

from placement_svc import microversion as mv
from placement_svc.http import web
from placement_svc.ops import usages as ops
from placement_svc.policies import usages as policies
from placement_svc.schemas import usage as schema


class TotalUsages:
    def __init__(self, db):
        self.db = db

    def show(self, req, resp):
        web.require_version(req, mv.USAGES)
        web.check_accept(req)
        # The project asked about is the target (checked before the query is).
        project_ids = web.query(req).get("project_id") or [None]
        req.context.placement.can(policies.TOTAL_USAGES, {"project_id": project_ids[-1]})
        version = web.version(req)
        params = web.versioned_query(req, schema.for_version)
        last = {key: values[-1] for key, values in params.items()}
        work = partial(
            ops.totals,
            version=version,
            project_id=last["project_id"],
            user_id=last.get("user_id"),
            consumer_type=last.get("consumer_type"),
        )
        web.render(resp, {"usages": self.db.read(work)})
        web.cache_headers(req, resp)
