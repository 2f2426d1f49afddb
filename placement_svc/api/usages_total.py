"""GET /usages?project_id=&user_id=[&consumer_type=] (from 1.9; types from 1.38)."""

from __future__ import annotations

from functools import partial

from placement_svc.http import web
from placement_svc.ops import usages as ops


class TotalUsages:
    def __init__(self, db):
        self.db = db

    def show(self, req, resp):
        web.check_version(req)
        web.check_accept(req)
        # The project asked about is the target (checked before the query is).
        project_ids = web.query(req).get("project_id") or [None]
        web.authorize(req, {"project_id": project_ids[-1]})
        version = web.version(req)
        params = web.declared_query(req)
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
