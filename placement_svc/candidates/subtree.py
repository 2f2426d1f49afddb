"""same_subtree and its negated groups (1.43): which provider is the subtree
root of a set of groups' providers, and whether a negated group's provider
keeps out of that subtree. Pure: the walk (walk.py) asks these at the slot
that completes each rule, and asks ``may_still_root`` at the slots before,
so that a branch whose placed groups can no longer share a subtree ends at
once rather than at its last slot."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Protocol

from placement_svc.candidates.model import Provider
from placement_svc.candidates.request import Request


class Trees(Protocol):
    """What these rules read of a cloud (a Found, or an explanation's view
    of the whole cloud): each provider's parent."""

    @property
    def providers(self) -> Mapping[int, Provider]: ...


class Slot(Protocol):
    """What these rules read of a walk's slot: the group it serves."""

    @property
    def suffix(self) -> str: ...


def completion(request: Request, slots: Sequence[Slot]) -> dict[int, list[set[str]]]:
    """slot index -> same_subtree sets whose groups are all assigned at that index."""
    last_index = {slot.suffix: i for i, slot in enumerate(slots)}
    done: dict[int, list[set[str]]] = {}
    for suffixes in request.same_subtrees:
        done.setdefault(max(last_index[s] for s in suffixes), []).append(suffixes)
    return done


def partial(
    request: Request, slots: Sequence[Slot]
) -> dict[int, list[tuple[frozenset[str], tuple[int, ...]]]]:
    """slot index -> (a same_subtree set, the indices of its slots still to
    place) for each set that has two or more of its slots placed at that
    index and one or more to come: where ``may_still_root`` can end a
    branch before the set's last slot (``completion`` checks that one)."""
    placed_by: dict[int, list[tuple[frozenset[str], tuple[int, ...]]]] = {}
    for suffixes in request.same_subtrees:
        mine = [i for i, slot in enumerate(slots) if slot.suffix in suffixes]
        for k in range(1, len(mine) - 1):
            placed_by.setdefault(mine[k], []).append((frozenset(suffixes), tuple(mine[k + 1 :])))
    return placed_by


def may_still_root(found: Trees, members: set[int], later_options: Sequence[set[int]]) -> bool:
    """Part of a same_subtree set is placed on ``members``; can the rest
    still make the set hold? Its root must be an ancestor-or-self of every
    member: when no member is one, it can only be the provider of a group
    still to place (``later_options``: each such slot's options) on an
    ancestor-or-self of the members' lowest common ancestor. Members in
    different trees have no common ancestor at all."""
    common: set[int] | None = None
    order: list[int] = []
    for pid in members:
        line: list[int] = []
        current: int | None = pid
        while current is not None:
            line.append(current)
            current = found.providers[current].parent_id
        if common is None:
            common, order = set(line), line
        else:
            common &= set(line)
    if not common:
        return False
    lowest = next(pid for pid in order if pid in common)
    if lowest in members:
        return True
    current = lowest
    while current is not None:
        if any(current in options for options in later_options):
            return True
        current = found.providers[current].parent_id
    return False


def apart_completion(
    request: Request, slots: Sequence[Slot]
) -> dict[int, list[tuple[frozenset[str], str]]]:
    """slot index -> (positive suffixes, one negated suffix) whose groups are
    all assigned at that index: each negated group is checked as soon as it
    and the positive groups are placed, not when the last of them is."""
    last_index = {slot.suffix: i for i, slot in enumerate(slots)}
    done: dict[int, list[tuple[frozenset[str], str]]] = {}
    for positive, negated in request.apart:
        if not positive:  # no positive group, no subtree to keep out of
            continue
        settled = max(last_index[s] for s in positive)
        for suffix in negated:
            done.setdefault(max(settled, last_index[suffix]), []).append((positive, suffix))
    return done


def apart(
    found: Trees,
    slots: Sequence[Slot],
    assigned: list[int],
    positive: frozenset[str],
    negated: str,
) -> bool:
    """same_subtree=_P,!_N: the provider of ``negated`` is neither the
    positive groups' subtree root nor below it (an ancestor of the root, or
    another branch, is fine). Without a root the positive groups break
    same_subtree, so the candidate goes anyway."""
    members = {pid for s, pid in zip(slots, assigned) if s.suffix in positive}
    top = root(found, members)
    if top is None:
        return False
    outsider = next(pid for s, pid in zip(slots, assigned) if s.suffix == negated)
    providers = found.providers
    current: int | None = outsider
    while current is not None:
        if current == top:
            return False
        current = providers[current].parent_id
    return True


def root(found: Trees, members: set[int]) -> int | None:
    """The member that is an ancestor-or-self of every member, or None.

    It is unique when it exists (two providers each an ancestor-or-self of
    the other are one provider): the lowest common ancestor-or-self of the
    members, when that is one of them. same_subtree holds exactly when there
    is one; it is the root R of same_subtree=_P,!_N."""
    common: set[int] | None = None
    for pid in members:
        line = set()
        current: int | None = pid
        while current is not None:
            line.add(current)
            current = found.providers[current].parent_id
        common = line if common is None else common & line
    if common is None:
        return None
    top = common & members
    return next(iter(top)) if top else None
