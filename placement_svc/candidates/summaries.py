"""What only provider summaries need: from 1.27 a summary lists every class
its provider has inventory of, not only the requested ones.

The requested classes' capacity and usage come with the search (found.room
and found.full); the other classes' inventories are in the shape of the
cloud the search used (world.py), and their used amounts are read here, for
the providers the answer summarises only, in one statement, and only when
one of them has an inventory of another class.
"""

from __future__ import annotations

from bisect import bisect_left, bisect_right

from sqlalchemy.engine import Connection

from placement_svc.candidates import search, world


def other_inventories(
    conn: Connection, shape: world.World, provider_ids: set[int], requested: set[str]
) -> dict[int, dict[str, tuple[int, int]]]:
    """provider -> class -> (capacity, used) of the classes not requested, for
    provider summaries from 1.27 (the requested ones are in found already)."""
    if not provider_ids:
        return {}
    lowest, highest = min(provider_ids), max(provider_ids)
    requested_ids = {shape.class_ids.get(name) for name in requested}
    held: list[tuple[int, int, int]] = []  # (provider, class id, capacity)
    for rc_id, stock in shape.stock.items():
        if rc_id in requested_ids:
            continue
        ids = shape.stock_ids[rc_id]
        for at in range(bisect_left(ids, lowest), bisect_right(ids, highest)):
            if ids[at] in provider_ids:
                held.append((ids[at], rc_id, stock[at].whole))
    if not held:
        return {}
    used = search.used_amounts(
        conn,
        sorted({rc_id for _pid, rc_id, _whole in held}),
        (min(pid for pid, _rc, _whole in held), max(pid for pid, _rc, _whole in held)),
    )
    names = shape.class_names()
    result: dict[int, dict[str, tuple[int, int]]] = {}
    for pid, rc_id, whole in sorted(held):
        result.setdefault(pid, {})[names[rc_id]] = (whole, used[rc_id].get(pid, 0))
    return result
