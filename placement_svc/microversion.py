"""Microversions: the one place where feature names meet version numbers.

Handlers compare the request's version with a named feature
(``if req_version >= mv.NESTED_PROVIDERS``), never with a bare tuple.
The comment on each name is the upstream history line it stands for; above
1.39 the versions are placement-svc's own (docs/microversions.rst).
"""

from __future__ import annotations

import microversion_parse
from microversion_parse import Version

SERVICE_TYPE = "placement"
HEADER = "OpenStack-API-Version"

MIN_VERSION = Version(1, 0)
# The newest version a request may get where a service is configured with
# [api] max_microversion: the middleware puts it in the WSGI environ.
ENV_MAX_VERSION = "placement.max_microversion"


def _v(minor: int) -> Version:
    return Version(1, minor)


BASE = _v(0)
AGGREGATES = _v(1)  # GET/PUT /resource_providers/{uuid}/aggregates
RESOURCE_CLASSES = _v(2)  # /resource_classes
MEMBER_OF = _v(3)  # member_of filter on GET /resource_providers
RESOURCES_FILTER = _v(4)  # resources filter on GET /resource_providers
DELETE_INVENTORIES = _v(5)  # DELETE /resource_providers/{uuid}/inventories
TRAITS = _v(6)  # /traits and /resource_providers/{uuid}/traits
RESOURCE_CLASS_PUT_CREATES = _v(7)  # PUT /resource_classes/{name} is bodiless create
ALLOCATION_PROJECT_USER = _v(8)  # project_id and user_id required on PUT /allocations
USAGES = _v(9)  # GET /usages
ALLOCATION_CANDIDATES = _v(10)  # GET /allocation_candidates
ALLOCATIONS_LINK = _v(11)  # 'allocations' link on providers
ALLOCATIONS_DICT = _v(12)  # dict-form allocations and allocation_requests
POST_ALLOCATIONS = _v(13)  # POST /allocations for many consumers
NESTED_PROVIDERS = _v(14)  # parent/root provider uuids; in_tree on providers
CACHE_HEADERS = _v(15)  # last-modified and cache-control headers
CANDIDATES_LIMIT = _v(16)  # limit on GET /allocation_candidates
CANDIDATES_REQUIRED = _v(17)  # required traits on candidates, traits in summaries
PROVIDERS_REQUIRED = _v(18)  # required traits on GET /resource_providers
AGGREGATE_GENERATION = _v(19)  # generation in provider aggregates bodies
PROVIDER_POST_RETURNS_BODY = _v(20)  # POST /resource_providers answers 200 + body
CANDIDATES_MEMBER_OF = _v(21)  # member_of on GET /allocation_candidates
FORBIDDEN_TRAITS = _v(22)  # !TRAIT in required
ERROR_CODES = _v(23)  # 'code' in error bodies
MULTI_MEMBER_OF = _v(24)  # repeated member_of on GET /resource_providers
GRANULAR = _v(25)  # numbered request groups
RESERVED_EQUALS_TOTAL = _v(26)  # inventory reserved may equal total
ALL_RESOURCES_IN_SUMMARIES = _v(27)  # every class of a provider in provider_summaries
CONSUMER_GENERATION = _v(28)  # consumer generations
NESTED_CANDIDATES = _v(29)  # nested providers in allocation candidates
RESHAPER = _v(30)  # POST /reshaper
CANDIDATES_IN_TREE = _v(31)  # in_tree on GET /allocation_candidates
FORBIDDEN_AGGREGATES = _v(32)  # !agg and !in: in member_of
STRING_SUFFIXES = _v(33)  # request group suffixes [A-Za-z0-9_-]{1,64}
MAPPINGS = _v(34)  # mappings in allocation requests
ROOT_REQUIRED = _v(35)  # root_required on GET /allocation_candidates
SAME_SUBTREE = _v(36)  # same_subtree and resourceless request groups
REPARENTING = _v(37)  # re-parenting and un-parenting providers
CONSUMER_TYPES = _v(38)  # consumer_type on allocations and usages
ANY_TRAITS = _v(39)  # required=in:A,B and repeated required
UPSTREAM_MAX_VERSION = ANY_TRAITS  # the newest version upstream Placement serves

# placement-svc's own, from the spec documents upstream never built
# (docs/microversions.rst has the history):
ROOT_MEMBER_OF = _v(40)  # root_member_of on GET /allocation_candidates
OPTIONAL_GROUP_POLICY = _v(41)  # group_policy may be left out: none
GRANULAR_ISOLATE = _v(42)  # isolate=<suffixes>: anti-affinity of chosen groups
SAME_SUBTREE_APART = _v(43)  # same_subtree=_X,!_Y: _Y outside _X's subtree
CANDIDATES_EXPLAIN = _v(44)  # GET /allocation_candidates/explain and /capacity
PROVIDER_INCLUDE = _v(45)  # include= on GET /resource_providers and /resource_providers/{uuid}
BULK_ALLOCATIONS = _v(46)  # GET /allocations?consumer_uuid=in: / resource_provider_uuid=in:
CONDITIONAL_READS = _v(47)  # ETag and If-None-Match (304) on provider-scoped reads
RANKED_CANDIDATES = _v(48)  # sort=, prefer=, prefer_member_of=, per_root= and "rank"
TREE_WRITES = _v(49)  # GET and PUT /resource_provider_trees/{root_uuid}: a whole tree at once
ALLOCATION_DELTAS = _v(50)  # PATCH /allocations/{consumer_uuid}: add and remove amounts
HOLDS = _v(
    51
)  # "hold": {"ttl"} on allocation writes, .../confirm, held=true: allocations that expire

MAX_VERSION = HOLDS  # the newest this service can serve
VERSIONS = [f"1.{minor}" for minor in range(MIN_VERSION.minor, MAX_VERSION.minor + 1)]


def served_up_to(setting: str | None) -> Version:
    """The newest version to serve, from [api] max_microversion ("1.39" for
    strict upstream parity); None or empty: the newest there is."""
    if not setting:
        return MAX_VERSION
    return microversion_parse.parse_version_string(setting)


def max_version(environ) -> Version:
    """The newest version served to this request (the configured cap)."""
    return environ.get(ENV_MAX_VERSION, MAX_VERSION)


class MicroversionError(Exception):
    """The header could not be used; ``status`` says whether 400 or 406."""

    def __init__(self, status: int, message: str):
        super().__init__(message)
        self.status = status
        self.message = message


def from_headers(headers, newest: Version = MAX_VERSION) -> Version:
    """Return the requested version (the minimum when none is asked for).

    ``headers`` is a mapping or a WSGI environ; ``newest`` the newest version
    served (``latest`` means it). A malformed version raises
    MicroversionError(400); a well-formed one outside 1.0-``newest`` raises
    MicroversionError(406).
    """
    served = VERSIONS[: newest.minor - MIN_VERSION.minor + 1]
    try:
        return microversion_parse.extract_version(headers, SERVICE_TYPE, served)
    except ValueError as exc:  # well formed, not served here
        raise MicroversionError(406, f"Invalid microversion: {exc}") from None
    except TypeError as exc:  # not a version at all
        # microversion_parse's words end with Python's own complaint ("invalid
        # literal for int() ..."); keep its first clause, say what is expected.
        problem = str(exc).split("; ", 1)[0]
        raise MicroversionError(
            400,
            f"Invalid microversion: {problem}; expected '{SERVICE_TYPE} X.Y' with a "
            f"version from {MIN_VERSION} to {newest}, or '{SERVICE_TYPE} latest'",
        ) from None


def header_value(version: Version) -> str:
    return f"{SERVICE_TYPE} {version.major}.{version.minor}"
