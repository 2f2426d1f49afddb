"""GET /usages?project_id=&user_id=[&consumer_type=] (from 1.9; types from 1.38)."""

from __future__ import annotations

from functools import partial

from placement_svc.http import answering, reading
from placement_svc.ops import usages as ops


class TotalUsages:
    def __init__(self, db):
        self.db = db

    def show(self, req, resp):
        reading.check_version(req)
        reading.check_accept(req)
        # The project asked about is the target (checked before the query is).
        project_ids = reading.query(req).get("project_id") or [None]
        reading.authorize(req, {"project_id": project_ids[-1]})
        version = reading.version(req)
        params = reading.declared_query(req)
        last = {key: values[-1] for key, values in params.items()}
        work = partial(
            ops.totals,
            version=version,
            project_id=last["project_id"],
            user_id=last.get("user_id"),
            consumer_type=last.get("consumer_type"),
        )
        answering.render(resp, {"usages": self.db.read(work)})
        answering.cache_headers(req, resp)
