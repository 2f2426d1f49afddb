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
from placement_svc.uuidutil import is_uuid_like

GROUP_PARAMETERS = ("resources", "required", "member_of", "in_tree")
T = TypeVar("T")
# prefer= and prefer_member_of= weights (1.48): integers in this range.
MIN_WEIGHT, MAX_WEIGHT = 1, 1000
SORT_DIRECTIONS = ("spread", "pack")
# How many sort keys, preferred traits and preferred aggregates a request
# may name: each is worked out for every candidate weighed, so their
# number, like the walk's steps, is bounded.
MAX_SORT_KEYS = 8
MAX_PREFERENCES = 64
_DIGITS = re.compile("[0-9]{1,4}")  # ASCII only: str.isdigit takes "²", which int() refuses


@dataclass(frozen=True)
class Ranking:
    """How to rank candidates (1.48, placement-svc's own; candidates/rank.py
    applies it): ``sort`` (direction, class) keys in order, ``prefer``
    (trait, negated, weight), ``prefer_member_of`` (aggregate, weight), and
    at most ``per_root`` candidates per root."""

    sort: tuple[tuple[str, str], ...] = ()
    prefer: tuple[tuple[str, bool, int], ...] = ()
    prefer_member_of: tuple[tuple[str, int], ...] = ()
    per_root: int | None = None

    def trait_names(self) -> set[str]:
        return {trait for trait, _negated, _weight in self.prefer}

    def classes(self) -> list[str]:
        """The sort keys' classes, each once, in order."""
        return list(dict.fromkeys(rc for _direction, rc in self.sort))


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

    def asks(self) -> tuple:
        """What the group asks of a provider, its suffix aside (but whether
        it has one): groups that ask the same have the same options and the
        same funnel. Nova and cyborg ask for N like devices as N granular
        groups alike but for their suffixes."""
        return (
            self.same_provider,
            tuple(sorted(self.resources.items())),
            _filter_key(self.required.any_of, self.required.forbidden),
            _filter_key(self.member_of.any_of, self.member_of.forbidden),
            self.in_tree,
        )


def _filter_key(any_of: list[frozenset[str]], forbidden: set[str]) -> tuple:
    """A trait or aggregate filter as a hashable value, in no order of the query's."""
    return tuple(sorted(tuple(sorted(names)) for names in any_of)), tuple(sorted(forbidden))


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
    # sort=, prefer=, prefer_member_of=, per_root= (1.48); None: not asked
    ranking: Ranking | None = None

    @property
    def isolate(self) -> bool:
        return self.group_policy == "isolate"

    def trait_names(self) -> set[str]:
        names = set(self.root_required) | set(self.root_forbidden)
        if self.ranking is not None:
            names |= self.ranking.trait_names()
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
    _parse_request_wide(params, request, version)
    _parse_groups(params, request, version)
    if version >= mv.SAME_SUBTREE:
        _check_resourceless(request)
    else:
        _check_orphans(request)
    if version >= mv.FORBIDDEN_TRAITS:
        _check_conflicts(request)
    granular = [g.suffix for g in request.groups.values() if g.same_provider]
    _check_isolated(request, granular)
    if request.group_policy is None and len(granular) > 1 and version < mv.OPTIONAL_GROUP_POLICY:
        raise _bad(
            'The "group_policy" parameter is required when specifying more than one '
            '"resources{N}" parameter.'
        )
    if request.isolate:
        request.isolated = frozenset(granular)
    return request


def _parse_groups(params: dict[str, list[str]], request: Request, version: Version) -> None:
    """Every ``resources``/``required``/``member_of``/``in_tree`` key, into its group."""
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


def _last_of(values: list[str], parse: Callable[[str, str], T], suffix: str) -> T:
    """A repeated single-valued parameter: the last one counts, as upstream,
    but every one must parse (upstream reads each in turn)."""
    parsed = [parse(value, suffix) for value in values]
    return parsed[-1]


_LIMIT_PATTERN = str(schema.LIMIT["pattern"])
_LIMIT = re.compile(_LIMIT_PATTERN)


def _parse_request_wide(params: dict[str, list[str]], request: Request, version: Version) -> None:
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
        request.root_required, request.root_forbidden = _root_required(params["root_required"])
    negation = version >= mv.SAME_SUBTREE_APART
    for value in params.get("same_subtree", []):
        _parse_same_subtree(value, request, negation)
    if "root_member_of" in params and version >= mv.ROOT_MEMBER_OF:
        # The same forms, repetition and words as member_of, about the root.
        request.root_member_of = queryparams.member_of(
            params["root_member_of"], version, name="root_member_of"
        )
    if "isolate" in params and version >= mv.GRANULAR_ISOLATE:
        request.isolated = _isolate(params["isolate"], "group_policy" in params)
    if version >= mv.RANKED_CANDIDATES:
        request.ranking = _ranking(params)


def _ranking(params: dict[str, list[str]]) -> Ranking | None:
    """sort=, prefer=, prefer_member_of= and per_root= (1.48); None when
    none of them is asked."""
    if not any(name in params for name in ("sort", "prefer", "prefer_member_of", "per_root")):
        return None
    sort = []
    for value in params.get("sort", []):
        for part in value.split(","):
            direction, colon, rc = part.strip().partition(":")
            if direction not in SORT_DIRECTIONS or not colon or not rc:
                raise _bad(
                    "Invalid query string parameters: Expected 'sort' parameter value of the "
                    f"form spread:CLASS or pack:CLASS. Got: {part}",
                    errors.QUERYPARAM_BAD_VALUE,
                )
            sort.append((direction, rc))
    prefer = []
    for trait, weight in _weighted(params.get("prefer", []), "prefer", "TRAIT"):
        negated = trait.startswith("!")
        prefer.append((trait[1:] if negated else trait, negated, weight))
    if not all(trait for trait, _negated, _weight in prefer):
        raise _bad(
            "Invalid query string parameters: Expected 'prefer' parameter value of the form "
            "TRAIT:WEIGHT or !TRAIT:WEIGHT. Got an empty trait.",
            errors.QUERYPARAM_BAD_VALUE,
        )
    twice = sorted({t for t, _n, _w in prefer if sum(1 for o, _, _ in prefer if o == t) > 1})
    if twice:
        raise _bad(
            f"Traits named more than once in 'prefer': {', '.join(twice)}.",
            errors.QUERYPARAM_BAD_VALUE,
        )
    members = _weighted(params.get("prefer_member_of", []), "prefer_member_of", "AGGREGATE_UUID")
    for aggregate, _weight in members:
        if not is_uuid_like(aggregate):
            raise _bad(
                "Invalid query string parameters: Expected 'prefer_member_of' parameter to "
                f"contain valid UUID(s). Got: {aggregate}",
                errors.QUERYPARAM_BAD_VALUE,
            )
    for name, given, most in (
        ("sort", sort, MAX_SORT_KEYS),
        ("prefer", prefer, MAX_PREFERENCES),
        ("prefer_member_of", members, MAX_PREFERENCES),
    ):
        if len(given) > most:
            raise _bad(
                f"Invalid query string parameters: at most {most} values of '{name}' may be "
                f"given; got {len(given)}.",
                errors.QUERYPARAM_BAD_VALUE,
            )
    per_root = None
    if "per_root" in params:  # the schema checked the last value is a count
        per_root = min(int(params["per_root"][-1]), sys.maxsize)
    return Ranking(tuple(sort), tuple(prefer), tuple(members), per_root)


def _weighted(values: list[str], name: str, what: str) -> list[tuple[str, int]]:
    """NAME:WEIGHT pairs of a comma-separated, repeatable parameter."""
    pairs = []
    for value in values:
        for part in value.split(","):
            subject, colon, weight = part.strip().rpartition(":")
            if (
                not colon
                or not subject
                or not _DIGITS.fullmatch(weight)
                or not MIN_WEIGHT <= int(weight) <= MAX_WEIGHT
            ):
                raise _bad(
                    f"Invalid query string parameters: Expected '{name}' parameter value of "
                    f"the form {what}:WEIGHT with WEIGHT an integer from {MIN_WEIGHT} to "
                    f"{MAX_WEIGHT}. Got: {part}",
                    errors.QUERYPARAM_BAD_VALUE,
                )
            pairs.append((subject, int(weight)))
    return pairs


def _root_required(values: list[str]) -> tuple[set[str], set[str]]:
    """root_required's one value -> (required, forbidden) trait names."""
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
    return required, forbidden


def _parse_same_subtree(value: str, request: Request, negation: bool) -> None:
    """One same_subtree value: its suffixes share a subtree. From 1.43
    (``negation``) a ``!`` suffix is kept out of that subtree instead: the
    value then also goes to ``apart``. Before 1.43 a ``!`` is part of the
    suffix (and so names no group: today's 400)."""
    parts = [s.strip() for s in value.split(",")]
    negated = {p[1:] for p in parts if negation and p.startswith("!")}
    positive = {p for p in parts if not (negation and p.startswith("!"))}
    if "" in positive or "" in negated:
        raise _bad(
            "Empty string (unsuffixed group) can not be specified in `same_subtree` ",
            errors.QUERYPARAM_BAD_VALUE,
        )
    if negated:
        if not positive:
            raise _bad(
                "A `same_subtree` value needs at least one suffix that is not negated "
                f"with '!': the subtree the others are kept out of. Got: {value}",
                errors.QUERYPARAM_BAD_VALUE,
            )
        both = sorted(positive & negated)
        if both:
            raise _bad(
                f"Suffixes both in and negated in one `same_subtree` value: {both}. Got: {value}",
                errors.QUERYPARAM_BAD_VALUE,
            )
        request.apart.append((frozenset(positive), frozenset(negated)))
    request.same_subtrees.append(positive)


def _isolate(values: list[str], with_group_policy: bool) -> frozenset[str]:
    """isolate's suffixes (the union of every value); whether each names a
    granular group is checked once the groups are known."""
    if with_group_policy:
        raise _bad(
            'The "isolate" and "group_policy" parameters can not be used together: '
            '"isolate" names the groups to keep apart, "group_policy" all of them or none.',
            errors.QUERYPARAM_BAD_VALUE,
        )
    suffixes: set[str] = set()
    for value in values:
        parts = {s.strip() for s in value.split(",")}
        if "" in parts:
            raise _bad(
                "Empty string (unsuffixed group) can not be specified in `isolate` ",
                errors.QUERYPARAM_BAD_VALUE,
            )
        suffixes |= parts
    return frozenset(suffixes)


def _check_isolated(request: Request, granular: list[str]) -> None:
    """Every suffix isolate names is a granular group of the request."""
    unknown = sorted(request.isolated - set(granular))
    if unknown:
        raise _bad(
            f"Real suffixes should be specified in `isolate`: {unknown} not found in {granular}.",
            errors.QUERYPARAM_BAD_VALUE,
        )


def _check_resourceless(request: Request) -> None:
    """1.36+: resourceless groups are allowed when they appear in same_subtree."""
    resourceless = [s for s, g in request.groups.items() if not g.resources]
    if len(resourceless) == len(request.groups):
        raise _bad(
            "There must be at least one resources or resources[$S] parameter.",
            errors.QUERYPARAM_MISSING_VALUE,
        )
    in_subtrees = set().union(*request.same_subtrees)
    negated = set().union(*(apart for _, apart in request.apart))  # may be resourceless
    bad = [s for s in resourceless if s not in in_subtrees | negated]
    if bad:
        raise _bad(
            "Resourceless suffixed group request should be specified in `same_subtree` "
            f"query param: bad group(s) - {bad}.",
            errors.QUERYPARAM_BAD_VALUE,
        )
    unknown = sorted(s for s in in_subtrees if s not in request.groups)
    unknown += sorted(f"!{s}" for s in negated if s not in request.groups)
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
