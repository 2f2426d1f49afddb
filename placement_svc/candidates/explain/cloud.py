"""The whole cloud as an explanation reads it: the search's own Found and
the shape of the cloud it was made of (world.World). Pure.

The search weighs the room of every inventory of every requested class
(``Found.room``, and ``Found.full`` where it is too little) in a shape of
the cloud that holds every provider, its traits and aggregates, the sharing
providers and the trees they share with. An explanation must count every
provider and say why one does not serve a group, not only that it does
not: that is this data, seen whole, with nothing read again. What only
near misses need, providers' names and each inventory's total, reserved and
allocation ratio, explain/names.py reads for them.
"""

from __future__ import annotations

from collections.abc import Mapping
from collections.abc import Set as AbstractSet
from dataclasses import dataclass, field
from typing import NamedTuple

from placement_svc.candidates.model import Found, Provider, Room


class Inventory(NamedTuple):
    """An inventory's numbers besides its room, as a near miss says them."""

    total: int
    reserved: int
    allocation_ratio: float


@dataclass
class Cloud:
    """Every provider of the cloud with its traits and aggregates; the room
    of every inventory of a requested class, as the search weighed it; the
    sharing providers of the trees that hold one and the trees each shares
    with. ``names`` and ``inventories``: for near misses only."""

    providers: Mapping[int, Provider]
    traits: Mapping[int, frozenset[str]]
    aggregates: Mapping[int, frozenset[str]]
    room: Mapping[tuple[int, str], Room]
    sharing: AbstractSet[int] = frozenset()
    shares_with: Mapping[int, AbstractSet[int]] = field(default_factory=dict)
    names: Mapping[int, str] = field(default_factory=dict)
    inventories: Mapping[tuple[int, str], Inventory] = field(default_factory=dict)

    def roots(self) -> list[int]:
        return sorted({p.root_id for p in self.providers.values()})

    def reach(self, pid: int) -> set[int]:
        """The trees a provider may serve: its own, and for a sharing
        provider every tree it shares with."""
        own = self.providers[pid].root_id
        if pid in self.sharing:
            return set(self.shares_with.get(pid, ())) | {own}
        return {own}


def of(found: Found) -> Cloud:
    """The cloud a search's Found was made of, whole: ``found`` must come
    from a search of every tree (``Found.complete``), on the shape of the
    cloud it keeps (``Found.world``)."""
    shape = found.world
    if shape is None or not found.complete:
        raise ValueError("an explanation reads a whole search, made of a shape of the cloud")
    # The sharing providers the search sees: those of a tree that holds an
    # inventory of a requested class.
    sharing = shape.trees(frozenset(found.classes.values())).sharing
    return Cloud(
        shape.providers,
        shape.traits,
        shape.aggregates,
        {**found.full, **found.room},
        sharing,
        {pid: shape.shares_with[pid] for pid in sharing},
    )
