"""Conditional reads (1.47, placement-svc's own): an ETag on every read a
compute host repeats on its timer, and 304 Not Modified to a matching
If-None-Match, so an unchanged provider tree costs a few empty answers.

The ETag is a hash of the answer's own bytes (a strong validator in RFC
9110's terms): it changes exactly when the answer would, whatever write
changed it (inventories, traits, aggregates, allocations, a reshape, a
rename or a move in the tree, a deletion), with no rule per resource to
keep in step with the data. The answer is still worked out; what a match
saves is the body on the wire and the client's work on it.

Before 1.47 nothing changes: no ETag, and If-None-Match is not looked at,
as upstream.
"""

from __future__ import annotations

import hashlib

import falcon

from placement_svc import microversion as mv


def etag(body: bytes) -> str:
    return '"' + hashlib.blake2b(body, digest_size=16).hexdigest() + '"'


def matches(if_none_match: str, tag: str) -> bool:
    """RFC 9110's weak comparison of If-None-Match with the current tag:
    ``*`` matches any; W/ prefixes are ignored."""
    if if_none_match.strip() == "*":
        return True
    for candidate in if_none_match.split(","):
        candidate = candidate.strip()
        if candidate.startswith("W/"):
            candidate = candidate[2:]
        if candidate == tag:
            return True
    return False


class ConditionalReads:
    """falcon middleware: after a successful GET at 1.47 or later of an
    operation routes.py declares a conditional read (``etag``: a provider,
    its sub-resources, the provider list and allocations), the ETag; a 304
    without a body when it matches. A PUT so declared (a whole tree, 1.49,
    whose answer is the GET's body) carries the ETag its GET would have, so
    the writer's next read can be conditional at once; a PUT is never a 304."""

    def process_response(
        self,
        req: falcon.Request,
        resp: falcon.Response,
        resource: object | None,
        req_succeeded: bool,
    ) -> None:
        if not req_succeeded or req.method not in ("GET", "PUT") or resp.status_code != 200:
            return
        operation = getattr(req.context, "operation", None)
        if not getattr(operation, "etag", False) or not isinstance(resp.data, bytes):
            return
        ctx = getattr(req.context, "placement", None)
        if ctx is None or ctx.version < mv.CONDITIONAL_READS:
            return
        tag = etag(resp.data)
        resp.set_header("ETag", tag)
        asked = req.get_header("If-None-Match") if req.method == "GET" else None
        if asked is not None and matches(asked, tag):
            resp.status = 304
            resp.data = None
            resp.content_type = None
