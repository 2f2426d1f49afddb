"""Query-string schemas for GET /allocation_candidates, one per version range.

Each is built whole by ``_build(version)`` from named parts (which parameters
exist at a version and which request-group suffixes are legal), once at
import for every feature that changes it: ``for_version`` picks from that table.
"""

from placement_svc import microversion as mv
from placement_svc.schemas.common import INTEGER, TEXT, Param, Schema, pick

_STRING = {"type": "string"}
LIMIT = {"type": ["integer", "string"], "pattern": "^[1-9][0-9]*$", "minimum": 1, "minLength": 1}
GROUP_POLICY = {"type": "string", "enum": ["none", "isolate"]}
# /allocation_candidates/explain only (1.44): how many near misses to list;
# the handler checks the upper bound, with words a pattern cannot give.
NEAR_MISSES = {"type": ["integer", "string"], "pattern": "^[0-9]+$", "minLength": 1}
# per_root= (1.48): a count of one or more, written as limit is.
PER_ROOT = LIMIT
# The ranking parameters of 1.48 (placement-svc's own); their values are
# checked by candidates/request.py, with words that name what is wrong.
RANKING = ("sort", "prefer", "prefer_member_of")

NUMBERED_SUFFIX = "[1-9][0-9]*"  # 1.25 - 1.32
STRING_SUFFIX = "[a-zA-Z0-9_-]{1,64}"  # 1.33+


def group_parameters(version) -> list[str]:
    """The per-group parameters (``resources`` ...) a version knows."""
    names = ["resources"]
    if version >= mv.CANDIDATES_REQUIRED:
        names.append("required")
    if version >= mv.CANDIDATES_MEMBER_OF:
        names.append("member_of")
    if version >= mv.CANDIDATES_IN_TREE:
        names.append("in_tree")
    return names


def suffix_pattern(version) -> str | None:
    if version >= mv.STRING_SUFFIXES:
        return STRING_SUFFIX
    if version >= mv.GRANULAR:
        return NUMBERED_SUFFIX
    return None


def _build(version, explain: bool = False) -> Schema:
    properties: dict = {}
    pattern_properties: dict = {}
    suffix = suffix_pattern(version)
    for name in group_parameters(version):
        if suffix is None:
            properties[name] = _STRING
        else:
            pattern_properties[f"^{name}({suffix})?$"] = _STRING
    if version >= mv.CANDIDATES_LIMIT:
        properties["limit"] = LIMIT
    if version >= mv.GRANULAR:
        properties["group_policy"] = GROUP_POLICY
    if version >= mv.ROOT_REQUIRED:
        properties["root_required"] = _STRING
    if version >= mv.SAME_SUBTREE:
        properties["same_subtree"] = _STRING
    # placement-svc's own: 1.41 (group_policy optional) and 1.43 (! in
    # same_subtree) change values, not keys, so they need no schema here.
    if version >= mv.ROOT_MEMBER_OF:
        properties["root_member_of"] = _STRING
    if version >= mv.GRANULAR_ISOLATE:
        properties["isolate"] = _STRING
    if version >= mv.RANKED_CANDIDATES:
        for name in RANKING:
            properties[name] = _STRING
        properties["per_root"] = PER_ROOT
    if explain:
        properties["near_misses"] = NEAR_MISSES
    # The keys in upstream's order: jsonschema reports the first failing rule
    # in that order, so a query that breaks two ("resources1" alone at 1.24)
    # gets upstream's words ("'resources' is a required property").
    schema: dict = {"type": "object", "properties": properties}
    if version < mv.GRANULAR:
        schema["required"] = ["resources"]
    schema["additionalProperties"] = False
    # Only a version with suffixed keys has patterns: with an empty
    # patternProperties jsonschema would word an unknown key as "does not match
    # any of the regexes" where upstream's schema says "... was unexpected".
    if pattern_properties:
        schema["patternProperties"] = pattern_properties
    return Schema(schema)


# Every feature the parts above depend on, oldest first.
_CHANGES = (
    mv.ALLOCATION_CANDIDATES,
    mv.CANDIDATES_LIMIT,
    mv.CANDIDATES_REQUIRED,
    mv.CANDIDATES_MEMBER_OF,
    mv.GRANULAR,
    mv.CANDIDATES_IN_TREE,
    mv.STRING_SUFFIXES,
    mv.ROOT_REQUIRED,
    mv.SAME_SUBTREE,
    mv.ROOT_MEMBER_OF,
    mv.GRANULAR_ISOLATE,
    mv.RANKED_CANDIDATES,
)
_BY_VERSION = [(feature, _build(feature)) for feature in _CHANGES]


def for_version(version) -> Schema:
    return pick(_BY_VERSION, version)


# /allocation_candidates/explain: the same query and near_misses=. From
# the version it appears at; a later feature that changes the query adds a row.
_EXPLAIN_BY_VERSION = [
    (feature, _build(feature, explain=True))
    for feature in (mv.CANDIDATES_EXPLAIN, mv.RANKED_CANDIDATES)
]


def explain_schema(version) -> Schema:
    return pick(_EXPLAIN_BY_VERSION, version)


# The name api/allocation_candidates.py and the tests know it by.
query_schema = for_version


# What each parameter means (the OpenAPI document's words). The request
# group parameters (resources ... in_tree) take a suffix from 1.25.
QUERY_WORDS = {
    "resources": Param(
        TEXT, "What one request group needs: CLASS:AMOUNT,... (required before 1.25)."
    ),
    "required": Param(
        TEXT,
        "Traits the group's providers must have: TRAIT,..., !TRAIT for one they must "
        "not have, in:A,B for any of several; repeatable.",
    ),
    "member_of": Param(
        TEXT,
        "Aggregates the group's providers must be in: <uuid> or in:<uuid>,...; "
        "!<uuid> or !in:... for none of them; repeatable.",
    ),
    "in_tree": Param(
        {"type": "string", "format": "uuid"},
        "Only providers in the tree of the provider of this uuid.",
    ),
    "limit": Param(INTEGER, "At most this many allocation requests."),
    "group_policy": Param(
        GROUP_POLICY,
        "isolate: each suffixed group on a provider of its own; none: they may share. "
        "Required with two or more suffixed groups before 1.41.",
    ),
    "root_required": Param(
        TEXT, "Traits the root of every candidate's tree must (or, !TRAIT, must not) have."
    ),
    "same_subtree": Param(
        TEXT,
        "Suffixes (_X,_Y) whose providers must share one subtree; from 1.43, !_Y for a "
        "group outside the others' subtree. Repeatable.",
    ),
    "root_member_of": Param(
        TEXT,
        "Aggregates the root of every candidate's tree must be in, as member_of "
        "(placement-svc's own).",
    ),
    "isolate": Param(
        TEXT,
        "Suffixes (_X,_Y) whose groups must land on different providers (placement-svc's own).",
    ),
    "sort": Param(
        TEXT,
        "spread:CLASS or pack:CLASS, comma-separated and repeatable, applied in order: "
        "rank candidates by the fraction of CLASS their tree keeps free after them, "
        "highest (spread) or lowest (pack) first (placement-svc's own, 1.48).",
    ),
    "prefer": Param(
        TEXT,
        "TRAIT:W or !TRAIT:W (W from 1 to 1000), comma-separated and repeatable: a "
        "candidate scores W when a provider it allocates from has TRAIT (for !TRAIT, "
        "when none has it); higher scores first (placement-svc's own, 1.48).",
    ),
    "prefer_member_of": Param(
        TEXT,
        "AGGREGATE_UUID:W, comma-separated and repeatable: a candidate scores W when "
        "the root of its tree is in the aggregate (placement-svc's own, 1.48).",
    ),
    "per_root": Param(
        INTEGER,
        "At most this many candidates per root provider, the first in rank order "
        "(placement-svc's own, 1.48).",
    ),
    "near_misses": Param(
        {"type": "integer", "minimum": 0, "maximum": 50},
        "How many near misses to list (explain only; at most 50).",
    ),
}
