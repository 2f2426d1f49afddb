"""Which fixes of a near miss break another rule of the same assignment.
Pure: reads a Cloud (cloud.py) and the changes nearmiss.py's fixes make.

A near miss lists every rule one assignment of a tree breaks, and fixing
each (a trait or aggregate to add to a provider, or to take away) is to
make that assignment a candidate. A fix may break a rule that holds now:
a trait to add that a group on that provider forbids, one to take away
that a group there needs (the only one of an any-of list it has), an
aggregate the same way (for the unsuffixed group a root's aggregates are
its providers'), or an aggregate a sharing provider of the assignment
reaches the tree through. No change of data then fixes both: that is a
conflict, and nearmiss.py says so.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

from placement_svc.candidates import eligibility
from placement_svc.candidates.explain.cloud import Cloud
from placement_svc.candidates.request import Request

Kind = str  # "trait" or "aggregate"
# (provider, kind) -> (names added, names taken away): every change of the fixes
Changes = dict[tuple[int, Kind], tuple[set[str], set[str]]]


class Slot(Protocol):
    """What this reads of walk.py's slots: the group it serves."""

    @property
    def suffix(self) -> str: ...

    @property
    def granular(self) -> bool: ...


def broken(
    cloud: Cloud,
    request: Request,
    slots: Sequence[Slot],
    assigned: list[int],
    root: int,
    tree: list[int],
    changes: Changes,
) -> list[tuple[int, Kind, str, bool]]:
    """(provider, kind, name, added) of each change that breaks a rule the
    assignment (``assigned``, a provider per slot, in the tree of ``root``
    whose providers are ``tree``) meets now."""
    forbids, needs = _asked(cloud, request, slots, assigned, root)
    taken_aggregates = {
        pid: taken for (pid, kind), (_a, taken) in changes.items() if kind == "aggregate"
    }
    found: list[tuple[int, Kind, str, bool]] = []
    for (pid, kind), (added, taken) in changes.items():
        held = cloud.traits[pid] if kind == "trait" else cloud.aggregates.get(pid, frozenset())
        after = (held - taken) | added
        bad = [(name, True) for name in sorted(added & forbids.get((pid, kind), set()))]
        for one in needs.get((pid, kind), ()):
            if held & one and not after & one:
                bad += [(name, False) for name in sorted(one & taken)]
        if (
            kind == "aggregate"
            and taken
            and cuts_sharing(cloud, assigned, root, tree, taken_aggregates)
        ):
            bad += [(name, False) for name in sorted(taken)]
        found += [(pid, kind, name, adds) for name, adds in dict.fromkeys(bad)]
    return found


def _asked(
    cloud: Cloud, request: Request, slots: Sequence[Slot], assigned: list[int], root: int
) -> tuple[dict[tuple[int, Kind], set[str]], dict[tuple[int, Kind], list[frozenset[str]]]]:
    """What the request forbids and needs (any-of lists) of each provider
    of the assignment, and of the root."""
    forbids: dict[tuple[int, Kind], set[str]] = {}
    needs: dict[tuple[int, Kind], list[frozenset[str]]] = {}
    for slot, pid in zip(slots, assigned):
        group = request.groups[slot.suffix]
        forbids.setdefault((pid, "trait"), set()).update(group.required.forbidden)
        needs.setdefault((pid, "trait"), []).extend(group.required.any_of)
        own = cloud.providers[pid].root_id
        if slot.granular:
            needed_on = forbidden_on = {pid}
        elif own != root and eligibility.narrowed(cloud, group, pid):
            # a sharing provider serving another tree: its own aggregates
            # meet member_of, and that tree's root must not be forbidden
            needed_on, forbidden_on = {pid}, {pid, root}
        else:
            needed_on = forbidden_on = {pid, own}
        for holder in forbidden_on:
            forbids.setdefault((holder, "aggregate"), set()).update(group.member_of.forbidden)
        for holder in needed_on:
            needs.setdefault((holder, "aggregate"), []).extend(group.member_of.any_of)
    forbids.setdefault((root, "trait"), set()).update(request.root_forbidden)
    needs.setdefault((root, "trait"), []).extend(frozenset([t]) for t in request.root_required)
    forbids.setdefault((root, "aggregate"), set()).update(request.root_member_of.forbidden)
    needs.setdefault((root, "aggregate"), []).extend(request.root_member_of.any_of)
    return forbids, needs


def cuts_sharing(
    cloud: Cloud, assigned: list[int], root: int, tree: list[int], taken: dict[int, set[str]]
) -> bool:
    """Whether taking providers out of aggregates (``taken``) would cut a
    sharing provider of the assignment off the tree: it shares with the
    tree through aggregates it and a provider of the tree are both in."""

    def held(q: int) -> frozenset[str]:
        return cloud.aggregates.get(q, frozenset()) - taken.get(q, set())

    for sharing in dict.fromkeys(assigned):
        if sharing not in cloud.sharing or cloud.providers[sharing].root_id == root:
            continue
        if not any(held(q) & held(sharing) for q in tree):
            return True
    return False
