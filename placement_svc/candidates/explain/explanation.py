"""Why a GET /allocation_candidates query has the candidates it has (or
none), as plain data: the body of GET /allocation_candidates/explain. Pure.

Four parts, each from where it is true, all of the engine's own rules and
data (the search's Found, and the whole cloud it was made of: cloud.py):

- per group, the funnel of providers (funnel.py: the group's rules,
  eligibility.rules, one at a time);
- the request's rules of an anchor (eligibility.root_rules: root_required,
  root_member_of) on the trees every group can be served in, trees before
  and after each;
- the merge rules, trees before and after each: the engine's own walk
  (merge.trees_with_candidates) on the engine's own Found, asked again with
  one more rule at a time, so a tree a rule removes is one the answer lacks
  for that rule;
- the number of candidates, counted by walking the very stream the answer
  is cut from; and the near misses (nearmiss.py).
"""

from __future__ import annotations

import dataclasses
from typing import Any

from placement_svc.candidates import eligibility, merge, walk
from placement_svc.candidates.explain import funnel, nearmiss
from placement_svc.candidates.explain.cloud import Cloud
from placement_svc.candidates.model import Found
from placement_svc.candidates.request import Request

# Counting walks the candidates without keeping them; past this many it stops
# and says so (the answer itself would be this long or longer).
COUNT_CAP = 100_000
NEAR_MISSES = 5  # the default of near_misses=
MAX_NEAR_MISSES = 50


def explain(
    found: Found,
    cloud: Cloud,
    request: Request,
    max_candidates: int = -1,
    near: int = NEAR_MISSES,
) -> dict[str, Any]:
    """The explanation of ``request``: ``found`` is what the search loaded
    for it, ``cloud`` the whole cloud; ``max_candidates`` the configured
    max_allocation_candidates (-1: none)."""
    funnels = dict(funnel.group_funnels(cloud, request.groups))
    served: set[int] | None = None
    for each in funnels.values():
        served = each.trees if served is None else served & each.trees
    request_filters = _request_filters(cloud, request, sorted(served or ()))
    merge_rules, trees = _merge_rules(found, request)
    count, capped = _count(found, request, max_candidates)
    return {
        "cloud": {"providers": len(cloud.providers), "trees": len(cloud.roots())},
        "groups": {suffix: each.body(request.groups[suffix]) for suffix, each in funnels.items()},
        "trees_for_all_groups": len(served or ()),
        "request_filters": request_filters,
        "merge_rules": merge_rules,
        "trees_with_candidates": len(trees),
        "candidates": count,
        "candidates_capped": capped,
        "near_misses": nearmiss.near_misses(cloud, request, set(trees), near),
    }


def first_empty_step(body: dict[str, Any]) -> str:
    """What left an answer empty, in one phrase for the log: the first step
    of the explanation, in its order, that left nothing."""
    if not body["cloud"]["providers"]:
        return NO_PROVIDERS
    for suffix, group in body["groups"].items():
        said = _group_left_none(suffix, group)
        if said is not None:
            return said
    return (
        _trees_left_none(body["groups"], body["trees_for_all_groups"])
        or _steps_left_none(body["request_filters"] + body["merge_rules"])
        or NO_CANDIDATE
    )


def why_empty(found: Found, cloud: Cloud, request: Request) -> str:
    """``first_empty_step(explain(...))``, working out the explanation's
    steps only up to the one that left nothing: the reason an empty answer
    gives in the request log, without the rest of an explanation (what
    comes after the empty step, the count, the near misses)."""
    if not cloud.providers:
        return NO_PROVIDERS
    groups: dict[str, dict[str, Any]] = {}
    served: set[int] | None = None
    for suffix, each in funnel.group_funnels(cloud, request.groups, until_empty=True):
        groups[suffix] = each.body(request.groups[suffix])
        said = _group_left_none(suffix, groups[suffix])
        if said is not None:
            return said
        served = each.trees if served is None else served & each.trees
    said = _trees_left_none(groups, len(served or ()))
    if said is not None:
        return said
    said = _steps_left_none(_request_filters(cloud, request, sorted(served or ())))
    return said or _steps_left_none(_merge_rules(found, request)[0]) or NO_CANDIDATE


NO_PROVIDERS = "there are no resource providers"
NO_CANDIDATE = "no candidate"  # every step left something: the walk found none


def _group_left_none(suffix: str, group: dict[str, Any]) -> str | None:
    before = pre_room = group["considered"]
    for step in group["funnel"]:
        if step["filter"] == "resources" and not suffix:
            before = pre_room  # the unsuffixed group's classes count from the same ones
        if not step["after"]:
            shown = ",".join(step["value"])
            return (
                f"group '{suffix}' {step['filter']} {shown} left none of "
                f"{_counted(before, 'provider')}"
            )
        before = step["after"]
        if step["filter"] != "resources":
            pre_room = before
    if not group["trees"]:
        return f"group '{suffix}' has providers, but no tree holds all its classes"
    return None


def _trees_left_none(groups: dict[str, dict[str, Any]], trees_for_all: int) -> str | None:
    if trees_for_all:
        return None
    counts = ", ".join(f"'{s}' {g['trees']}" for s, g in groups.items())
    return f"no tree can serve every group (trees per group: {counts})"


def _steps_left_none(steps: list[dict[str, Any]]) -> str | None:
    for step in steps:
        if not step["after"]:
            name = " ".join([step.get("filter") or step["rule"], ",".join(step["value"])])
            return f"{name.strip()} left none of {_counted(step['before'], 'tree')}"
    return None


def _counted(count: int, thing: str) -> str:
    return f"{count} {thing}" if count == 1 else f"{count} {thing}s"


def _request_filters(cloud: Cloud, request: Request, trees: list[int]) -> list[dict[str, Any]]:
    """Trees before and after each of the request's rules of an anchor
    (eligibility.root_rules, in their order), from ``trees``."""
    steps = []
    rules = eligibility.root_rules(request, cloud.traits, cloud.aggregates)
    for rule, kept in eligibility.sift(rules, trees):
        steps.append(_step("filter", rule.name, rule.asked, trees, kept))
        trees = kept
    return steps


def _step(
    kind: str, name: str, value: list[str], before: list[int], after: list[int]
) -> dict[str, Any]:
    return {kind: name, "value": value, "before": len(before), "after": len(after)}


def _merge_rules(found: Found, request: Request) -> tuple[list[dict[str, Any]], list[int]]:
    """Trees before and after each merge rule the request has, the rules
    added one at a time in a fixed order: first each slot's room alone, as
    if no other group used its provider (every tree whose slots all have a
    provider); then room shared by the groups, before 1.29 one provider per
    tree, the unsuffixed group's required traits over its providers,
    isolation, same_subtree and its negated groups. The last step asks the
    request itself."""
    current = _relaxed(request)
    trees = merge.trees_with_candidates(current, found, found.roots, shared_room=False)
    counts: dict[str, int] = {}
    for slot in walk.slots(request):
        for rc, _amount in slot.amounts:
            counts[rc] = counts.get(rc, 0) + 1
    # (rule, what the request asked, the request with every rule so far)
    rules: list[tuple[str, list[str], Request]] = []
    shared = sorted(rc for rc, n in counts.items() if n > 1)
    if shared:
        rules.append(("shared_room", shared, current))
    if not request.nested:
        current = dataclasses.replace(current, nested=False)
        rules.append(("one_provider_per_tree", [], current))
    unsuffixed = request.groups.get("")
    if unsuffixed is not None and unsuffixed.required.any_of:
        current = dataclasses.replace(current, groups=request.groups)
        shown = [eligibility.listed(one) for one in unsuffixed.required.any_of]
        rules.append(("tree_traits", shown, current))
    granular = [s for s, g in request.groups.items() if g.same_provider]
    if request.isolated and len(granular) > 1:
        current = dataclasses.replace(current, isolated=request.isolated)
        name = "group_policy=isolate" if request.isolate else "isolate"
        rules.append((name, sorted(request.isolated), current))
    # A value of one suffix (the positive part of same_subtree=_A,!_B) always
    # holds: not a rule worth a step.
    together = [s for s in request.same_subtrees if len(s) > 1]
    if together:
        current = dataclasses.replace(current, same_subtrees=request.same_subtrees)
        shown = [",".join(sorted(s)) for s in together]
        rules.append(("same_subtree", shown, current))
    if request.apart:
        current = dataclasses.replace(current, apart=request.apart)
        shown = [
            ",".join(sorted(p) + [f"!{n}" for n in sorted(negated)]) for p, negated in request.apart
        ]
        rules.append(("same_subtree_apart", shown, current))
    steps = []
    for name, value, asked in rules:
        kept = merge.trees_with_candidates(asked, found, trees)
        steps.append(_step("rule", name, value, trees, kept))
        trees = kept
    return steps, trees


def _relaxed(request: Request) -> Request:
    """``request`` without the rules of several groups at once: isolation,
    same_subtree, one provider per tree (before 1.29) and the unsuffixed
    group's traits over its providers (its forbidden traits are each
    provider's own, and stay)."""
    groups = dict(request.groups)
    unsuffixed = groups.get("")
    if unsuffixed is not None and unsuffixed.required.any_of:
        required = dataclasses.replace(unsuffixed.required, any_of=[])
        groups[""] = dataclasses.replace(unsuffixed, required=required)
    return dataclasses.replace(
        request,
        groups=groups,
        isolated=frozenset(),
        group_policy=None,
        same_subtrees=[],
        apart=[],
        nested=True,
    )


def _count(found: Found, request: Request, max_candidates: int) -> tuple[int, dict | None]:
    """How many candidates the answer has without ``limit``: the stream the
    answer is cut from, walked to its end or to a cap (and which cap)."""
    cap, by = COUNT_CAP, "explain"
    if 0 <= max_candidates <= COUNT_CAP:
        cap, by = max_candidates, "max_allocation_candidates"
    count = merge.count(request, found, cap)
    if count > cap:
        return cap, {"at": cap, "by": by}
    return count, None
