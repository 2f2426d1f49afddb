"""What lets the walk (walk.py) give up early on a tree. Pure.

Every rule here is safe: none ever drops a candidate the rules would keep.

- **Trees without the traits.** The providers of the unsuffixed group must
  hold its any-of trait sets (``required=in:...``) together. They come from
  the anchor's tree and the sharing providers that share with it, so a tree
  whose providers, with those sharing providers, do not hold one trait of
  each set between them has no candidate: the walk does not enter it. On a
  flat cloud that is every host without the traits, found once per shape
  of the cloud (world.py keeps the answer), not once per request.

- **Room bound.** The slots still to fill need, per class, no more than the
  room left on the providers in their reach (each provider counted once, up
  to its max_unit), and no more isolated groups (``group_policy=isolate``,
  ``isolate=``) than there are providers left to them: each needs one that
  serves no other granular group. A host asked for nine devices of its
  eight is refused before the walk, not after 8! tries.
- **Pigeonholes.** Per class, the slots that ask for it must each find a
  provider of their reach, and a provider holds no more of them than its
  free room divided by the smallest of their amounts it could take: a
  matching of slots to providers with those capacities (augmenting paths,
  ``placeable``) must place them all. Ten groups of VCPU:10 in a tree of
  nine devices of 10 to 18 VCPU each pass the room bound (126 VCPU free
  for 100), but no device holds two of them: refused before the walk,
  not after every way to place nine of them.
- **Mirror providers.** Two leaves of one parent with the same traits, the
  same room and the same slots in reach, neither used yet by the walk, lead
  to mirror-image branches: swapping them maps one branch's candidates onto
  the other's. So once one of them ends without a candidate, the other's
  branch is skipped. Wide hosts whose devices are alike are where this
  pays: a dead end is found once, not once per ordering of the devices.
  Every rule of the walk (room, traits, reach, isolation, same_subtree and
  its negated groups) reads the tree only through parent links, and swapping
  two sibling leaves maps the tree onto itself, so the argument holds for
  each of them.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Container, Iterable, Iterator, Mapping, Sequence
from typing import Protocol

from placement_svc.candidates.model import Found, Room


class Slot(Protocol):
    """What these rules read of walk.py's slots."""

    @property
    def amounts(self) -> tuple[tuple[str, int], ...]: ...

    @property
    def granular(self) -> bool: ...

    @property
    def isolated(self) -> bool: ...


def able_roots(
    found: Found, any_of: tuple[frozenset[str], ...], roots: Iterable[int]
) -> Container[int]:
    """Those of ``roots`` whose tree and sharing providers hold, between
    them, a trait of every set of ``any_of`` (see the module's docstring).
    With the shape of the cloud at hand (``found.world``), every tree of it
    is judged once and the answer kept in it."""
    shape = found.world
    if shape is None:
        return set(_able(_trees(found), found.traits, _reach(found), any_of, roots))
    key = ("able roots", any_of, frozenset(found.sharing))
    reach = {pid: shape.shares_with[pid] for pid in found.sharing}
    return shape.remember(
        key,
        lambda: frozenset(_able(shape.members, shape.traits, reach, any_of, shape.roots)),
    )


def _trees(found: Found) -> dict[int, list[int]]:
    if found.members is not None:
        return found.members
    members: dict[int, list[int]] = {}
    for provider in found.providers.values():
        members.setdefault(provider.root_id, []).append(provider.id)
    return members


def _reach(found: Found) -> dict[int, Iterable[int]]:
    return {pid: found.shares_with.get(pid, ()) for pid in found.sharing}


def _able(
    members: Mapping[int, list[int]],
    traits: Mapping[int, frozenset[str]],
    reach: Mapping[int, Iterable[int]],
    any_of: tuple[frozenset[str], ...],
    roots: Iterable[int],
) -> Iterator[int]:
    helpers: dict[int, list[int]] = {}  # root -> the sharing providers sharing with it
    for pid, shared_roots in reach.items():
        for root in shared_roots:
            helpers.setdefault(root, []).append(pid)
    none: frozenset[str] = frozenset()
    for root in roots:
        held = set().union(
            *(traits.get(pid, none) for pid in members.get(root, (root,))),
            *(traits.get(pid, none) for pid in helpers.get(root, ())),
        )
        if all(held & one_of for one_of in any_of):
            yield root


# A mirror signature: parent, traits, slots in reach (a bit set), room per class.
Signature = tuple[int | None, frozenset[str] | None, int, tuple[Room | None, ...]]
_UNSEEN: Signature | None = (None, None, 0, ())  # the cache's "not worked out yet"

# Per slot index: the amounts per class of that slot and every later one, and
# how many of them are isolated groups (each needs a provider of its own).
Demand = list[tuple[tuple[tuple[str, int], ...], int]]


def placeable(
    slots: Sequence[Slot], options: Sequence[Sequence[int]], room: Mapping[tuple[int, str], Room]
) -> bool:
    """False when, for some class, the slots asking for it cannot all be
    given a provider (see the module's docstring); True otherwise, which
    proves nothing. Each class's matching grows by one augmenting path a
    slot, found breadth first: no recursion, whatever the number of slots."""
    by_class: dict[str, list[int]] = {}
    for index, slot in enumerate(slots):
        for rc, _amount in slot.amounts:
            by_class.setdefault(rc, []).append(index)
    for rc, asking in by_class.items():
        if len(asking) < 2:
            continue  # one slot: the room bound's business
        smallest: dict[int, int] = {}
        for index in asking:
            amount = dict(slots[index].amounts)[rc]
            for pid in options[index]:
                if amount < smallest.get(pid, amount + 1):
                    smallest[pid] = amount
        capacity = {
            pid: int(max(room[(pid, rc)].free, 0) // least) for pid, least in smallest.items()
        }
        if not _matched(asking, options, capacity):
            return False
    return True


def _matched(
    asking: Sequence[int], options: Sequence[Sequence[int]], capacity: Mapping[int, int]
) -> bool:
    """Whether every slot of ``asking`` gets a provider of its options, no
    provider more slots than its capacity (a b-matching)."""
    on: dict[int, int] = {}  # slot -> provider it is placed on
    placed: dict[int, list[int]] = {}  # provider -> slots on it
    for start in asking:
        reached_from: dict[int, int] = {}  # provider -> the slot that reached it
        queue, seen, free = deque([start]), {start}, None
        while queue and free is None:
            index = queue.popleft()
            for pid in options[index]:
                if pid in reached_from or not capacity.get(pid):
                    continue
                reached_from[pid] = index
                if len(placed.get(pid, ())) < capacity[pid]:
                    free = pid
                    break
                for other in placed[pid]:
                    if other not in seen:
                        seen.add(other)
                        queue.append(other)
        if free is None:
            return False
        pid = free
        while True:  # move each slot of the path to the provider it reached
            index = reached_from[pid]
            before = on.get(index)
            on[index] = pid
            placed.setdefault(pid, []).append(index)
            if before is None:
                break
            placed[before].remove(index)
            pid = before
    return True


def demand_after(slots: Sequence[Slot]) -> Demand:
    """What the slots from each index on still need (one entry more than
    ``slots``, the last one empty)."""
    totals: dict[str, int] = {}
    isolated = 0
    demand: Demand = [((), 0)]
    for slot in reversed(slots):
        for rc, amount in slot.amounts:
            totals[rc] = totals.get(rc, 0) + amount
        isolated += slot.granular and slot.isolated
        demand.append((tuple(totals.items()), isolated))
    demand.reverse()
    return demand


class RoomBound:
    """The room bound for one tree's walk; the walk reports each placement.

    An isolated group's provider serves no other granular group, so the
    isolated groups still to place need that many providers in their reach
    that serve no granular group yet: ``free_left`` counts those."""

    def __init__(
        self, slots: Sequence[Slot], options: list[list[int]], found: Found, shared: bool = True
    ) -> None:
        """``shared`` False: the groups do not share their providers' room
        (an explanation's step without that rule), so the bound is off."""
        self.shared = shared
        room = found.room
        self.capacity: dict[str, float] = {}
        counted: set[tuple[int, str]] = set()
        # Like groups share one list of options (eligibility.apply): each
        # list's providers are counted once per class, not once per group.
        lists: set[tuple[int, str]] = set()
        isolated_reach: set[int] = set()
        for slot, mine in zip(slots, options):
            if slot.granular and slot.isolated:
                isolated_reach.update(mine)
            for rc, _amount in slot.amounts:
                if (id(mine), rc) in lists:
                    continue
                lists.add((id(mine), rc))
                for pid in mine:
                    if (pid, rc) not in counted:
                        counted.add((pid, rc))
                        have = room[(pid, rc)]
                        self.capacity[rc] = self.capacity.get(rc, 0) + min(have.free, have.max_unit)
        self.isolated_reach = isolated_reach
        self.free_left = len(isolated_reach)
        self.placed: dict[str, int] = {}

    def allows(self, demand: tuple[tuple[tuple[str, int], ...], int]) -> bool:
        if not self.shared:
            return True
        amounts, isolated = demand
        for rc, amount in amounts:
            if amount > self.capacity[rc] - self.placed.get(rc, 0):
                return False
        return isolated <= self.free_left

    def place(self, slot: Slot, pid: int, first_granular_use: bool, sign: int) -> None:
        """``sign`` 1 when the walk places ``slot`` on ``pid``, -1 when it takes
        it back; ``first_granular_use``: ``pid`` serves no other granular slot."""
        for rc, amount in slot.amounts:
            self.placed[rc] = self.placed.get(rc, 0) + sign * amount
        if first_granular_use and pid in self.isolated_reach:
            self.free_left -= sign


class Mirrors:
    """Which providers of one tree's walk are mirror images of each other."""

    def __init__(
        self, found: Found, options: list[list[int]], parents: set[int], classes: Sequence[str]
    ) -> None:
        self.found, self.options, self.parents = found, options, parents
        self.classes = classes
        self.reach: dict[int, int] | None = None  # provider -> bit set of slots in reach
        self.signatures: dict[int, Signature | None] = {}

    def signature(self, pid: int) -> Signature | None:
        """Equal for mirror providers; None for one that has no mirror (it has
        children, or it is a sharing provider)."""
        known = self.signatures.get(pid, _UNSEEN)
        if known is not _UNSEEN:
            return known
        found = self.found
        signature: Signature | None
        if pid in self.parents or pid in found.sharing:
            signature = None
        else:
            if self.reach is None:
                self.reach = {}
                for index, mine in enumerate(self.options):
                    for option in mine:
                        self.reach[option] = self.reach.get(option, 0) | (1 << index)
            room = found.room
            signature = (
                found.providers[pid].parent_id,
                found.traits.get(pid),
                self.reach.get(pid, 0),
                tuple(room.get((pid, rc)) for rc in self.classes),
            )
        self.signatures[pid] = signature
        return signature
