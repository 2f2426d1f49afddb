"""The response body of GET /allocation_candidates, per microversion. Pure."""

from __future__ import annotations

from typing import Any

from microversion_parse import Version

from placement_svc import microversion as mv
from placement_svc.candidates.merge import Candidate
from placement_svc.candidates.model import Found

# provider -> class -> (capacity, used) of the classes not requested (1.27+)
Other = dict[int, dict[str, tuple[int, int]]]


def summary_providers(
    found: Found,
    candidates: list[Candidate],
    version: Version,
    whole: list[Candidate] | None = None,
) -> set[int]:
    """The providers to summarise: from 1.29, every provider of the trees of
    the candidates; before, the providers the candidates name. When ``limit``
    cut the answer, ``whole`` is the answer it was cut from: before 1.29
    upstream then keeps every provider the whole answer names whose root is
    the root of a provider of a returned candidate (a provider of the same
    tree that only a dropped candidate used stays in the summaries)."""
    providers = found.providers
    if version < mv.NESTED_CANDIDATES:
        named = {pid for c in candidates for pid in c.allocations}
        if not whole:
            return named
        roots = {providers[pid].root_id for pid in named}
        every = {pid for c in whole for pid in c.allocations}
        return {pid for pid in every if providers[pid].root_id in roots}
    roots = {providers[pid].root_id for c in candidates for pid in c.allocations}
    roots |= {providers[pid].root_id for c in candidates for p in c.mappings.values() for pid in p}
    return {pid for pid, p in providers.items() if p.root_id in roots}


def body(
    found: Found,
    candidates: list[Candidate],
    providers: set[int],
    other: Other,
    requested: set[str],
    version: Version,
) -> dict[str, Any]:
    """``providers``: those to summarise; ``other``: provider -> class ->
    (capacity, used) of the classes not requested (1.27+)."""
    uuid = {pid: p.uuid for pid, p in found.providers.items()}
    requests: list[dict[str, Any]]
    if version < mv.ALLOCATIONS_DICT:
        requests = [
            {
                "allocations": [
                    {"resource_provider": {"uuid": uuid[pid]}, "resources": dict(resources)}
                    for pid, resources in c.allocations.items()
                ]
            }
            for c in candidates
        ]
    elif version < mv.MAPPINGS:
        requests = [
            {"allocations": {uuid[pid]: {"resources": r} for pid, r in c.allocations.items()}}
            for c in candidates
        ]
    else:
        requests = [
            {
                "allocations": {uuid[pid]: {"resources": r} for pid, r in c.allocations.items()},
                "mappings": {
                    suffix: [uuid[pid] for pid in pids] for suffix, pids in c.mappings.items()
                },
            }
            for c in candidates
        ]
    return {
        "allocation_requests": requests,
        "provider_summaries": _summaries(found, sorted(providers), other, requested, version),
    }


def _summaries(
    found: Found, providers: list[int], other: Other, requested: set[str], version: Version
) -> dict[str, Any]:
    classes = sorted(requested)
    room, full, by_id = found.room, found.full, found.providers
    with_traits = version >= mv.CANDIDATES_REQUIRED
    with_tree = version >= mv.NESTED_CANDIDATES
    # A provider's traits in trait id order (creation order), as upstream's
    # database lists them; equal sets are one object, so each is ordered once.
    trait_id = found.trait_ids.__getitem__
    ordered_traits: dict[frozenset[str], list[str]] = {}
    summaries = {}
    for pid in providers:
        resources = {}
        for rc in classes:
            held = room.get((pid, rc))
            if held is not None:
                resources[rc] = {"capacity": held.capacity, "used": held.used}
            else:
                counts = full.get((pid, rc))
                if counts is not None:
                    resources[rc] = {"capacity": counts[0], "used": counts[1]}
        more = other.get(pid)
        if more:
            for rc, (capacity, used) in more.items():
                resources[rc] = {"capacity": capacity, "used": used}
            resources = dict(sorted(resources.items()))
        summary: dict[str, Any] = {"resources": resources}
        if with_traits:
            traits = found.traits.get(pid, frozenset())
            names = ordered_traits.get(traits)
            if names is None:
                names = ordered_traits[traits] = sorted(traits, key=trait_id)
            summary["traits"] = names
        if with_tree:
            provider = by_id[pid]
            summary["parent_provider_uuid"] = (
                by_id[provider.parent_id].uuid if provider.parent_id else None
            )
            summary["root_provider_uuid"] = by_id[provider.root_id].uuid
        summaries[by_id[pid].uuid] = summary
    return summaries
