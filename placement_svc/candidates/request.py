"""Query string -> Request of RequestGroups. Pure: no database, no web framework.

Every rule upstream enforces on GET /allocation_candidates queries is checked
here and broken rules raise errors.BadRequest naming the parameter.
"""

from __future__ import annotations

import re
import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TypeVar

from microversion_parse import Version

from placement_svc import errors, queryparams
from placement_svc import microversion as mv
from placement_svc.queryparams import AggregateFilter, TraitFilter
from placement_svc.schemas import allocation_candidate as schema

GROUP_PARAMETERS = ("resources", "required", "member_of", "in_tree")
T = TypeVar("T")


@dataclass
class RequestGroup:
    """One request group: the unsuffixed one (suffix "") or a granular one."""

    suffix: str = ""
    resources: dict[str, int] = field(default_factory=dict)
    required: TraitFilter = field(default_factory=TraitFilter)
    member_of: AggregateFilter = field(default_factory=AggregateFilter)
    in_tree: str | None = None

    @property
    def same_provider(self) -> bool:
        """Granular groups are served by one provider; the unsuffixed one may spread."""
        return self.suffix != ""


@dataclass
class Request:
    groups: dict[str, RequestGroup]
    group_policy: str | None = None
    limit: int | None = None
    root_required: set[str] = field(default_factory=set)
    root_forbidden: set[str] = field(default_factory=set)
    same_subtrees: list[set[str]] = field(default_factory=list)
    nested: bool = True  # nested providers may combine in one candidate (1.29+)
    # placement-svc's own (1.40+), see docs/microversions.rst:
    # root_member_of: the aggregates the root of a candidate's tree is in
    root_member_of: AggregateFilter = field(default_factory=AggregateFilter)
    # suffixes whose providers serve no other suffixed group: isolate=_A,_B,
    # and every granular suffix under group_policy=isolate
    isolated: frozenset[str] = frozenset()
    # same_subtree with negated suffixes: (positive, negated) per value; a
    # negated group's provider is neither the positive groups' subtree root
    # nor below it
    apart: list[tuple[frozenset[str], frozenset[str]]] = field(default_factory=list)

    @property
    def isolate(self) -> bool:
        return self.group_policy == "isolate"

    def trait_names(self) -> set[str]:
        names = set(self.root_required) | set(self.root_forbidden)
        for group in self.groups.values():
            names |= group.required.names()
        return names

    def resource_classes(self) -> set[str]:
        return {rc for group in self.groups.values() for rc in group.resources}


def _bad(message: str, code: str = errors.DEFAULT) -> errors.BadRequest:
    return errors.BadRequest(message, code=code)


def _key_pattern(version: Version) -> re.Pattern[str]:
    suffix = schema.suffix_pattern(version)
    names = "|".join(GROUP_PARAMETERS)
    if suffix is None:
        return re.compile(f"^({names})()$")
    return re.compile(f"^({names})({suffix})?$")


def parse(params: dict[str, list[str]], version: Version) -> Request:
    """Build a Request from query parameters (each key's values, in order)."""
    request = Request(groups={}, nested=version >= mv.NESTED_CANDIDATES)
    _parse_request_wide(params, request)
    pattern = _key_pattern(version)
    for key, values in params.items():
        match = pattern.match(key)
        if not match:
            continue
        name, suffix = match.group(1), match.group(2) or ""
        group = request.groups.setdefault(suffix, RequestGroup(suffix=suffix))
        if name == "resources":
            group.resources = _last_of(values, queryparams.resources, suffix)
        elif name == "required":
            group.required = queryparams.required(values, version, suffix)
        elif name == "member_of":
            group.member_of = queryparams.member_of(values, version, suffix)
        else:
            group.in_tree = _last_of(values, queryparams.in_tree, suffix)
    if "" in request.groups:  # the unsuffixed group first, then in query order
        request.groups = {"": request.groups.pop(""), **request.groups}
    if version >= mv.SAME_SUBTREE:
        _check_resourceless(request)
    else:
        _check_orphans(request)
    if version >= mv.FORBIDDEN_TRAITS:
        _check_conflicts(request)
    granular = [g for g in request.groups.values() if g.same_provider]
    if request.group_policy is None and len(granular) > 1:
        raise _bad(
            'The "group_policy" parameter is required when specifying more than one '
            '"resources{N}" parameter.'
        )
    if request.isolate:
        request.isolated = frozenset(g.suffix for g in granular)
    return request


def _last_of(values: list[str], parse: Callable[[str, str], T], suffix: str) -> T:
    """A repeated single-valued parameter: the last one counts, as upstream,
    but every one must parse (upstream reads each in turn)."""
    parsed = [parse(value, suffix) for value in values]
    return parsed[-1]


_LIMIT_PATTERN = str(schema.LIMIT["pattern"])
_LIMIT = re.compile(_LIMIT_PATTERN)


def _parse_request_wide(params: dict[str, list[str]], request: Request) -> None:
    if "limit" in params:
        # The schema checked the last value; upstream uses the first.
        first = params["limit"][0]
        if not _LIMIT.search(first):
            raise _bad(
                f"Invalid query string parameters: '{first}' does not match "
                f"'{_LIMIT_PATTERN}' (at 'limit')"
            )
        # No request can have more candidates than a list can hold.
        request.limit = min(int(first), sys.maxsize)
    if "group_policy" in params:
        request.group_policy = params["group_policy"][0]
    if "root_required" in params:
        values = params["root_required"]
        if len(values) > 1:
            raise _bad(
                "Query parameter 'root_required' may be specified only once.",
                errors.ILLEGAL_DUPLICATE_QUERYPARAM,
            )
        if values[0].startswith("in:"):
            raise _bad(
                "Invalid query string parameters: The format 'in:HW_CPU_X86_VMX,"
                "CUSTOM_MAGIC' is not supported in the 'root_required' query parameter. "
                f"Got: {values[0]}"
            )
        names = [n.strip() for n in values[0].split(",")]
        # Upstream strips every leading '!': '!!FOO' forbids FOO.
        forbidden = {n.lstrip("!") for n in names if n.startswith("!")}
        if not all(names) or not all(forbidden):
            raise _bad(
                "Invalid query string parameters: Expected 'root_required' parameter value "
                f"of the form: HW_CPU_X86_VMX,!CUSTOM_MAGIC. Got an empty trait in: {values[0]}"
            )
        required = {n for n in names if not n.startswith("!")}
        conflicts = sorted(required & forbidden)
        if conflicts:
            raise _bad(
                "Conflicting required and forbidden traits found in root_required: "
                + ", ".join(conflicts),
                errors.QUERYPARAM_BAD_VALUE,
            )
        request.root_required, request.root_forbidden = required, forbidden
    for value in params.get("same_subtree", []):
        suffixes = {s.strip() for s in value.split(",")}
        if "" in suffixes:
            raise _bad(
                "Empty string (unsuffixed group) can not be specified in `same_subtree` ",
                errors.QUERYPARAM_BAD_VALUE,
            )
        request.same_subtrees.append(suffixes)


def _check_resourceless(request: Request) -> None:
    """1.36+: resourceless groups are allowed when they appear in same_subtree."""
    resourceless = [s for s, g in request.groups.items() if not g.resources]
    if len(resourceless) == len(request.groups):
        raise _bad(
            "There must be at least one resources or resources[$S] parameter.",
            errors.QUERYPARAM_MISSING_VALUE,
        )
    in_subtrees = set().union(*request.same_subtrees)
    bad = [s for s in resourceless if s not in in_subtrees]
    if bad:
        raise _bad(
            "Resourceless suffixed group request should be specified in `same_subtree` "
            f"query param: bad group(s) - {bad}.",
            errors.QUERYPARAM_BAD_VALUE,
        )
    unknown = sorted(s for s in in_subtrees if s not in request.groups)
    if unknown:
        raise _bad(
            f"Real suffixes should be specified in `same_subtree`: {unknown} not found in "
            f"{list(request.groups)}.",
            errors.QUERYPARAM_BAD_VALUE,
        )


def _check_orphans(request: Request) -> None:
    """Before 1.36 every group needs resources."""
    # As upstream, only required (not forbidden) traits make an orphan here;
    # a group with forbidden traits alone falls to "must specify resources".
    orphans = [
        f"required{s}" for s, g in request.groups.items() if g.required.any_of and not g.resources
    ]
    if orphans:
        raise _bad(
            "All traits parameters must be associated with resources.  Found the following "
            f"orphaned traits keys: {', '.join(orphans)}"
        )
    orphans = [
        f"member_of{s}" for s, g in request.groups.items() if g.member_of and not g.resources
    ]
    if orphans:
        raise _bad(
            "All member_of parameters must be associated with resources. Found the following "
            f"orphaned member_of keys: {', '.join(orphans)}"
        )
    if not all(g.resources for g in request.groups.values()):
        raise _bad("All request groups must specify resources.")
    if not request.groups:
        raise _bad("At least one request group (`resources` or `resources{$S}`) is required.")


def _check_conflicts(request: Request) -> None:
    conflicts = []
    for suffix, group in request.groups.items():
        for any_of in group.required.any_of:
            if any_of <= group.required.forbidden:
                conflicts.append(f"required{suffix}: ({', '.join(sorted(any_of))})")
    if conflicts:
        raise _bad(
            "Conflicting required and forbidden traits found in the following traits keys: "
            + ", ".join(sorted(conflicts))
        )
