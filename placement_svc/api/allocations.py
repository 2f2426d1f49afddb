"""/allocations, /resource_providers/{uuid}/allocations, /usages and /reshaper.

Being built (issue 4): each handler answers 501 until then.
"""

from __future__ import annotations

from placement_svc import errors


class _NotBuilt(errors.PlacementError):
    status = 501


def _pending(req):
    raise _NotBuilt(f"{req.method} {req.path} is not implemented yet.")


class Allocations:
    def __init__(self, db, conf):
        self.db = db
        self.conf = conf

    def show(self, req, resp, consumer_uuid):
        _pending(req)

    def replace(self, req, resp, consumer_uuid):
        _pending(req)

    def delete(self, req, resp, consumer_uuid):
        _pending(req)

    def post_many(self, req, resp):
        _pending(req)

    def for_provider(self, req, resp, uuid):
        _pending(req)

    def usages(self, req, resp):
        _pending(req)

    def reshape(self, req, resp):
        _pending(req)
