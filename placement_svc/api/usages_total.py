"""GET /usages?project_id=&user_id=[&consumer_type=] (from 1.9; types from 1.38)."""

from __future__ import annotations

from placement_svc import microversion as mv
from placement_svc import web
from placement_svc.db import usages as store
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
        by_type = web.version(req) >= mv.CONSUMER_TYPES
        params = web.query(req, schema.QUERY_V1_38 if by_type else schema.QUERY_V1_9)

        def last(key):
            return params[key][-1] if key in params else None

        project_id, user_id = last("project_id"), last("user_id")
        if by_type:
            consumer_type = last("consumer_type")
            usages = self.db.read(
                lambda conn: store.by_type(conn, project_id, user_id, consumer_type)
            )
        else:
            usages = self.db.read(lambda conn: store.by_class(conn, project_id, user_id))
        web.render(resp, {"usages": usages})
        web.cache_headers(req, resp)
