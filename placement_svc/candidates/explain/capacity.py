"""How many copies of a whole request fit, tree by tree: the body of GET
/allocation_candidates/capacity. Pure; nothing is written.

Copies are claimed on the in-memory model (the Found's room): the walk's
first candidate in a tree is claimed as many times as it fits at once,
then the walk runs again on the room left, until it finds nothing.
Claiming that first candidate again and again is what claiming one copy at
a time would do: every candidate before it in the walk's order broke a
rule or lacked room, and a claim only takes room away, so it stays first
while it fits.

A tree of one provider with no sharing provider of a requested class in
reach has one way to serve each copy, so its count is exact; for any other tree it is a lower
bound (another order of claims may fit more). Each tree is counted on the
untouched model; the total claims tree after tree, oldest root first, on
one model, so a sharing provider's room is spent once, not once per tree
it serves.
"""

from __future__ import annotations

from typing import Any

from placement_svc.candidates import merge
from placement_svc.candidates.merge import Candidate
from placement_svc.candidates.model import Found, Room
from placement_svc.candidates.request import Request

MAX_ROUNDS = 10_000  # walks per tree: past this, the count is (still) a lower bound

Journal = dict[tuple[int, str], Room]  # the room before the claims, to put back


def capacity(found: Found, request: Request) -> dict[str, Any]:
    """Per anchor tree (root id), the copies that fit and whether that is
    exact, most copies first; trees where none fits are left out. The total
    over every tree, and whether it is exact."""
    first = merge.first_in_tree(request, found)
    size: dict[int, int] = {}
    for provider in found.providers.values():
        size[provider.root_id] = size.get(provider.root_id, 0) + 1
    # Trees a sharing provider holding a requested class may serve: the
    # search also counts as sharing those without one in a tree that has one.
    classes = request.resource_classes()
    holds = {
        pid for pid, rc in (*found.room, *found.full) if pid in found.sharing and rc in classes
    }
    reached = {root for pid in holds for root in found.shares_with.get(pid, ())}
    trees = []
    spent: dict[tuple[int, str], float] = {}  # sharing provider, class -> claimed by all trees
    for root in found.roots:
        journal: Journal = {}
        copies = _claim(found, first, root, journal)
        for key, before in journal.items():
            if key[0] in found.sharing:
                spent[key] = spent.get(key, 0) + before.free - found.room[key].free
        found.room.update(journal)
        if copies:
            exact = size.get(root) == 1 and root not in reached and root not in found.sharing
            trees.append({"root": root, "copies": copies, "exact": exact})
    trees.sort(key=lambda tree: (-tree["copies"], tree["root"]))
    total, total_exact = sum(t["copies"] for t in trees), all(t["exact"] for t in trees)
    # Where every tree's claims on the sharing providers fit in their room
    # together, one model for every tree would claim just what each tree
    # claimed on its own (the room a tree sees there is never short); else
    # claim once more, tree after tree, on one model.
    if any(amount > found.room[key].free for key, amount in spent.items()):
        journal = {}
        total = sum(_claim(found, first, root, journal) for root in found.roots)
        found.room.update(journal)
    return {"trees": trees, "total": total, "total_exact": total_exact}


def _claim(found: Found, first: Any, root: int, journal: Journal) -> int:
    """Claim copies in ``root``'s tree until none fits; how many did."""
    room = found.room
    copies = 0
    for _round in range(MAX_ROUNDS):
        candidate: Candidate | None = first(root)
        if candidate is None:
            break
        times = min(
            int(room[(pid, rc)].free // amount)
            for pid, amounts in candidate.allocations.items()
            for rc, amount in amounts.items()
        )
        times = max(times, 1)
        for pid, amounts in candidate.allocations.items():
            for rc, amount in amounts.items():
                key = (pid, rc)
                journal.setdefault(key, room[key])
                have = room[key]
                room[key] = have._replace(free=have.free - times * amount)
        copies += times
    return copies
