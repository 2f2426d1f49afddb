"""The response body of GET /allocation_candidates, per microversion. Pure.

One body in two forms: ``body``, a dict made of Candidates, and ``chunks``,
the same JSON as bytes made of assignments (walk.py: a provider per slot),
a few hundred candidates at a time. ``chunks`` is what the service sends:
an answer of tens of thousands of candidates is never held whole, neither
as dicts nor as one string. It writes each candidate from a template per
pattern of shared providers (which slots share one), and each template is
made by the code that makes ``body``'s dicts, from a stand-in candidate:
the two forms cannot drift apart.

Neither form reads every provider of the cloud: uuids are looked up for the
providers an answer names, and only summaries from 1.29 look for the other
providers of the answer's trees (see ``tree_members``).
"""

from __future__ import annotations

import itertools
import json
import operator
import re
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from typing import Any, Protocol

import orjson
from microversion_parse import Version

from placement_svc import microversion as mv
from placement_svc.candidates import merge
from placement_svc.candidates.merge import Candidate
from placement_svc.candidates.model import Found
from placement_svc.candidates.walk import Assignment

# provider -> class -> (capacity, used) of the classes not requested (1.27+)
Other = dict[int, dict[str, tuple[int, int]]]

# Candidates per chunk: a few hundred kilobytes on a nested cloud.
BATCH = 512


class Slot(Protocol):
    """What render reads of walk.py's slots."""

    @property
    def suffix(self) -> str: ...

    @property
    def amounts(self) -> tuple[tuple[str, int], ...]: ...


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
    if version < mv.NESTED_CANDIDATES:
        named = {pid for c in candidates for pid in c.allocations}
        every = {pid for c in whole for pid in c.allocations} if whole else None
        return _named(found, named, every)
    touched = {pid for c in candidates for pid in c.allocations}
    touched.update(pid for c in candidates for pids in c.mappings.values() for pid in pids)
    return tree_members(found, {found.providers[pid].root_id for pid in touched})


def providers_to_summarise(
    found: Found,
    slots: Sequence[Slot],
    chosen: Sequence[Assignment],
    version: Version,
    whole: Sequence[Assignment] | None = None,
) -> set[int]:
    """``summary_providers`` for assignments. A candidate allocates from the
    providers of its slots with amounts and maps every slot's provider."""
    if version < mv.NESTED_CANDIDATES:
        allocating = [index for index, slot in enumerate(slots) if slot.amounts]
        every = _providers_of(whole, allocating) if whole else None
        return _named(found, _providers_of(chosen, allocating), every)
    touched = _providers_of(chosen, range(len(slots)))
    return tree_members(found, {found.providers[pid].root_id for pid in touched})


def _providers_of(assignments: Iterable[Assignment], indexes: Sequence[int]) -> set[int]:
    """The providers of these slots (by index) over the assignments."""
    if not indexes:
        return set()
    if len(indexes) == 1:
        index = indexes[0]
        return {assigned[index] for assigned in assignments}
    pick: Callable[[Assignment], Iterable[int]] = _picker(tuple(indexes))
    return set(itertools.chain.from_iterable(map(pick, assignments)))


def _named(found: Found, named: set[int], every: set[int] | None) -> set[int]:
    """Before 1.29: the providers named, or when a limit cut the answer, the
    whole answer's providers (``every``) in the trees of those named."""
    if every is None:
        return named
    providers = found.providers
    roots = {providers[pid].root_id for pid in named}
    return {pid for pid in every if providers[pid].root_id in roots}


def tree_members(found: Found, roots: set[int]) -> set[int]:
    """Every provider loaded whose root is one of ``roots``: from the
    search's index of the trees' members, or (a Found built by hand) with a
    look at every provider loaded."""
    if not roots:
        return set()
    if found.members is not None:
        members = found.members
        return {pid for root in roots for pid in members.get(root, ())}
    return {pid for pid, p in found.providers.items() if p.root_id in roots}


def body(
    found: Found,
    candidates: list[Candidate],
    providers: set[int],
    other: Other,
    requested: set[str],
    version: Version,
    ranks: Sequence[Any] | None = None,
) -> dict[str, Any]:
    """``providers``: those to summarise; ``other``: provider -> class ->
    (capacity, used) of the classes not requested (1.27+); ``ranks``: each
    candidate's rank.Rank when the request ranks them (1.48)."""
    uuid = _Uuids(found.providers, str)
    requests = [_request(c, uuid.__getitem__, version) for c in candidates]
    if version >= mv.RANKED_CANDIDATES:
        for index, written in enumerate(requests):
            written["rank"] = ranks[index].body() if ranks is not None else dict(UNRANKED)
    return {
        "allocation_requests": requests,
        "provider_summaries": _summaries(found, sorted(providers), other, requested, version),
    }


# The rank of every candidate of an answer that does not rank them (1.48+).
UNRANKED: dict[str, Any] = {"score": 0, "keys": []}
_UNRANKED_JSON = b',"rank":{"score":0,"keys":[]}}'


def _request(candidate: Candidate, uuid: Callable[[int], Any], version: Version) -> dict[str, Any]:
    """One allocation request, with ``uuid(provider id)`` for each provider."""
    if version < mv.ALLOCATIONS_DICT:
        return {
            "allocations": [
                {"resource_provider": {"uuid": uuid(pid)}, "resources": dict(resources)}
                for pid, resources in candidate.allocations.items()
            ]
        }
    allocations = {uuid(pid): {"resources": r} for pid, r in candidate.allocations.items()}
    if version < mv.MAPPINGS:
        return {"allocations": allocations}
    return {
        "allocations": allocations,
        "mappings": {
            suffix: [uuid(pid) for pid in pids] for suffix, pids in candidate.mappings.items()
        },
    }


def chunks(
    found: Found,
    slots: list[Any],
    chosen: Sequence[Assignment],
    providers: set[int],
    other: Other,
    requested: set[str],
    version: Version,
    ranks: Sequence[Any] | None = None,
) -> Iterator[bytes]:
    """``body`` as JSON bytes, in pieces: the allocation requests BATCH at a
    time, then the provider summaries. Lazy: each piece is made when asked
    for, from ``chosen`` alone (and ``ranks``, one per candidate)."""
    write = _Requests(found, slots, version).write
    ranked = version >= mv.RANKED_CANDIDATES  # each allocation request ends with its rank
    opening = b'{"allocation_requests":['
    for start in range(0, len(chosen), BATCH):
        batch = chosen[start : start + BATCH]
        written: Iterable[bytes]
        if not ranked:
            written = map(write, batch)
        elif ranks is None:
            written = (write(assigned)[:-1] + _UNRANKED_JSON for assigned in batch)
        else:
            written = (
                write(assigned)[:-1] + b',"rank":' + dumps(rank.body()) + b"}"
                for assigned, rank in zip(batch, ranks[start : start + BATCH])
            )
        yield opening + b",".join(written)
        opening = b","
    summaries = _summaries(found, sorted(providers), other, requested, version)
    closing = b"]" if opening == b"," else opening + b"]"
    yield closing + b',"provider_summaries":' + dumps(summaries) + b"}"


def dumps(value: Any) -> bytes:
    """Compact JSON, as answering.dumps writes bodies: orjson, or the standard
    library for what orjson refuses (an integer beyond 64 bits)."""
    try:
        return orjson.dumps(value)
    except TypeError:  # orjson.JSONEncodeError is a TypeError
        return json.dumps(value).encode("utf-8")


class _Uuids(dict[int, Any]):
    """provider id -> its uuid, as ``form(uuid)``, looked up when first asked."""

    def __init__(self, providers: Mapping[int, Any], form: Callable[[str], Any]) -> None:
        super().__init__()
        self.providers, self.form = providers, form

    def __missing__(self, pid: int) -> Any:
        value = self[pid] = self.form(self.providers[pid].uuid)
        return value


def _uuids_json(found: Found) -> _Uuids:
    """provider id -> its uuid as JSON: kept in the shape of the cloud the
    answer comes from, when there is one, for every request of it."""
    shape = found.world
    if shape is None:
        return _Uuids(found.providers, dumps)
    return shape.remember("uuids as JSON", lambda: _Uuids(shape.providers, dumps))


# A stand-in uuid for the provider of slot N in a template; JSON writes it as
# it is, and no class name or group suffix can hold "<".
_STAND_IN = "<<{}>>"
_STAND_IN_JSON = re.compile(rb'"<<(\d+)>>"')


class _Requests:
    """Writes allocation requests as JSON from assignments, through a
    template per pattern: which slots share a provider, as the index of the
    first slot with the same provider (``assigned.index`` of each), so one
    for all distinct providers, say, and one for three classes on a root
    and a device of their own."""

    def __init__(self, found: Found, slots: list[Any], version: Version) -> None:
        self.slots, self.version = slots, version
        self.uuids = _uuids_json(found)
        self.templates: dict[Assignment, tuple[bytes, Callable[[Assignment], Any]]] = {}

    def write(self, assigned: Assignment) -> bytes:
        pattern = tuple(map(assigned.index, assigned))
        known = self.templates.get(pattern)
        if known is None:
            known = self.templates[pattern] = self._template(pattern)
        form, pick = known
        return form % tuple(map(self.uuids.__getitem__, pick(assigned)))

    def _template(self, pattern: Assignment) -> tuple[bytes, Callable[[Assignment], Any]]:
        """The JSON of a stand-in candidate whose providers are the slot
        indexes of ``pattern``, as a %-format with a %s per uuid, and what
        picks the providers for them out of an assignment."""
        stand_in = merge.candidate(self.slots, pattern)
        written = dumps(_request(stand_in, _STAND_IN.format, self.version))
        parts = _STAND_IN_JSON.split(written)
        literals = [part.replace(b"%", b"%%") for part in parts[0::2]]
        indexes = tuple(int(index) for index in parts[1::2])
        return b"%s".join(literals), _picker(indexes)


def _picker(indexes: tuple[int, ...]) -> Callable[[Assignment], tuple[int, ...]]:
    """What picks these indexes, in order, out of an assignment: a tuple."""
    if len(indexes) == 1:
        (index,) = indexes
        return lambda assigned: (assigned[index],)
    if not indexes:
        return lambda assigned: ()
    return operator.itemgetter(*indexes)


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
            held = room.get((pid, rc)) or full.get((pid, rc))
            if held is not None:
                resources[rc] = {"capacity": held.capacity, "used": held.used}
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
