"""The plain-text form of an explanation and of a capacity count, for curl
and the command line: the funnels as aligned tables, near misses as
sentences. Pure: reads the JSON bodies, so both forms say the same."""

from __future__ import annotations

from typing import Any


def explain(body: dict[str, Any]) -> str:
    cloud, capped = body["cloud"], body["candidates_capped"]
    count = str(body["candidates"])
    if capped:
        count = f"at least {count} (counting stopped at {capped['at']}, {capped['by']})"
    lines = [
        f"Candidates: {count}, in {_trees(body['trees_with_candidates'])} "
        f"(the cloud: {cloud['providers']} providers in {_trees(cloud['trees'])})."
    ]
    for suffix, group in body["groups"].items():
        asked = ",".join(f"{rc}:{n}" for rc, n in group["resources"].items()) or "no resources"
        rows = [("providers considered", group["considered"], "")]
        for step in group["funnel"]:
            lacking = ", ".join(f"{why} {n}" for why, n in step.get("lacking", {}).items() if n)
            rows.append(
                (_said(step, "filter"), step["after"], f"lacking {lacking}" if lacking else "")
            )
        # The unsuffixed group may spread: a provider serving one of its classes counts.
        serve = "can serve a class of the group" if not suffix else "can serve the group"
        rows.append((serve, group["providers"], f"in {_trees(group['trees'])}"))
        lines += ["", f"Group '{suffix}' ({asked}): providers", *_table(rows)]
    rows = [("every group can be served", body["trees_for_all_groups"], "")]
    for step in body["request_filters"]:
        rows.append((_said(step, "filter"), step["after"], f"of {step['before']}"))
    for step in body["merge_rules"]:
        rows.append((_said(step, "rule"), step["after"], f"of {step['before']}"))
    rows.append(("with candidates", body["trees_with_candidates"], ""))
    lines += ["", "Trees", *_table(rows)]
    if body["near_misses"]:
        lines += ["", "Near misses (fewest shortfalls first)"]
        for miss in body["near_misses"]:
            root, fails = miss["root"], miss["fails"]
            lines.append(f"  {root['name']} ({root['uuid']}): {len(fails)} to fix")
            lines += [f"    - {fail['text']}" for fail in fails]
    return "\n".join(lines) + "\n"


def capacity(body: dict[str, Any]) -> str:
    bound = "" if body["total_exact"] else " (a lower bound)"
    lines = [
        f"Copies that fit: {body['total']}{bound}, in {_trees(body['trees_with_room'])}.",
    ]
    if body["trees"]:
        rows = [
            (
                f"{tree['copies']}" if tree["exact"] else f">={tree['copies']}",
                f"{tree['root']['name']} ({tree['root']['uuid']})",
            )
            for tree in body["trees"]
        ]
        width = max(len("copies"), *(len(copies) for copies, _ in rows))
        lines.append(f"  {'copies':>{width}}  tree")
        lines += [f"  {copies:>{width}}  {tree}" for copies, tree in rows]
        if not all(tree["exact"] for tree in body["trees"]):
            lines.append("  (>=: a lower bound, the tree has more than one provider in reach)")
    return "\n".join(lines) + "\n"


# The merge rules' names in the JSON, in words.
_RULES = {
    "shared_room": "room shared by groups:",
    "one_provider_per_tree": "one provider per tree (before 1.29)",
    "tree_traits": "required traits over the tree:",
}


def _trees(count: int) -> str:
    return f"{count} tree" if count == 1 else f"{count} trees"


def _said(step: dict[str, Any], kind: str) -> str:
    value = ",".join(step["value"])
    name = _RULES.get(step[kind], step[kind])
    return f"{name} {value}" if value else name


def _table(rows: list[tuple[str, int, str]]) -> list[str]:
    label = max(len(row[0]) for row in rows)
    number = max(len(str(row[1])) for row in rows)
    return [
        f"  {name:<{label}}  {count:>{number}}{'  ' + note if note else ''}"
        for name, count, note in rows
    ]
