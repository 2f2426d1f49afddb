"""The response body of GET /allocation_candidates, per microversion. Pure."""

from __future__ import annotations

from placement_svc import microversion as mv
from placement_svc.candidates.merge import Candidate
from placement_svc.candidates.model import Found


def summary_providers(found: Found, candidates: list[Candidate], version) -> set[int]:
    """Providers in the candidates; from 1.29 every provider of their trees."""
    involved = {pid for c in candidates for pid in c.allocations}
    involved |= {pid for c in candidates for pids in c.mappings.values() for pid in pids}
    if version < mv.NESTED_CANDIDATES:
        return {pid for c in candidates for pid in c.allocations}
    roots = {found.providers[pid].root_id for pid in involved}
    return {pid for pid, p in found.providers.items() if p.root_id in roots}


def body(found: Found, candidates: list[Candidate], inventories, requested: set[str], version):
    uuid = {pid: p.uuid for pid, p in found.providers.items()}
    return {
        "allocation_requests": [_request(c, uuid, version) for c in candidates],
        "provider_summaries": {
            uuid[pid]: _summary(found, pid, inventories.get(pid, {}), requested, version)
            for pid in sorted(inventories.keys() | summary_providers(found, candidates, version))
        },
    }


def _request(candidate: Candidate, uuid, version) -> dict:
    if version < mv.ALLOCATIONS_DICT:
        return {
            "allocations": [
                {"resource_provider": {"uuid": uuid[pid]}, "resources": dict(resources)}
                for pid, resources in candidate.allocations.items()
            ]
        }
    result = {
        "allocations": {
            uuid[pid]: {"resources": dict(resources)}
            for pid, resources in candidate.allocations.items()
        }
    }
    if version >= mv.MAPPINGS:
        result["mappings"] = {
            suffix: [uuid[pid] for pid in pids] for suffix, pids in candidate.mappings.items()
        }
    return result


def _summary(found: Found, pid: int, inventory, requested: set[str], version) -> dict:
    if version < mv.ALL_RESOURCES_IN_SUMMARIES:
        inventory = {rc: v for rc, v in inventory.items() if rc in requested}
    summary: dict = {
        "resources": {
            rc: {"capacity": capacity, "used": used}
            for rc, (capacity, used) in sorted(inventory.items())
        }
    }
    if version >= mv.CANDIDATES_REQUIRED:
        summary["traits"] = sorted(found.traits.get(pid, ()))
    if version >= mv.NESTED_CANDIDATES:
        provider = found.providers[pid]
        summary["parent_provider_uuid"] = (
            found.providers[provider.parent_id].uuid if provider.parent_id else None
        )
        summary["root_provider_uuid"] = found.providers[provider.root_id].uuid
    return summary
