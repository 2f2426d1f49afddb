"""The SQL of GET /allocation_candidates: what a request's groups could use.

A bounded number of statements per request, whatever the number of
providers: the ids of the requested traits and classes, the world
generation (and, when it has moved, the shape of the cloud again: see
world.py), and the used amounts of the requested classes. rooms.py
(pure) makes of those the request's Found: the room of the requested
classes and the providers of the trees involved, and which providers may
serve which group (eligibility.py); combining groups into candidates is
walk.py and merge.py. Besides, the used amounts of other classes, for
provider summaries (summaries.py).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from typing import Any

import sqlalchemy as sa
from sqlalchemy.engine import Connection
from sqlalchemy.ext.compiler import compiles
from sqlalchemy.sql.functions import FunctionElement

from placement_svc.candidates import rooms, world
from placement_svc.candidates.model import Found, UnknownNames
from placement_svc.candidates.request import Request
from placement_svc.db import holds, names, tables

ALLOC = tables.allocations
# A ranked search reads the usage of at most this many providers by id (an
# IN list); of more, of every provider.
USED_OF_AT_MOST = 4000


def search(
    conn: Connection,
    request: Request,
    worlds: world.Worlds | None = None,
    first: int | None = None,
    answer_only: bool = False,
    ranked_first: int | None = None,
    again: Found | None = None,
) -> Found:
    """What the request's groups could use, from the shape of the cloud this
    process keeps for the database (``worlds``; by default the one kept for
    the connection's engine) and usages read now.

    With ``first``, only the first ``first`` anchors (in id order) and the
    sharing providers' trees are searched, when there are more: the Found
    then says it is not ``complete``, and its anchors are a prefix of the
    whole search's. The depth-first walk (no random order) takes tree after
    tree in that order, so the candidates of those trees are the first ones
    of the whole answer.

    ``answer_only``: the Found is for the answer only (see rooms.found).

    ``ranked_first`` (a ranked request, 1.48): only the ``ranked_first``
    anchors whose trees could hold the best candidates (rank.Bounds, on
    the usage of the whole cloud) are searched, when there are more and
    no sharing provider serves the request's classes; the Found's
    ``next_bound`` is then the bound of the best tree left out. ``again``:
    the Found of that search, when this one is a wider one.
    """
    shape = (worlds or world.of(conn.engine)).current(conn)
    trait_ids = _ids(shape.all_traits, request.trait_names(), conn, names.trait_ids)
    unknown = sorted(request.trait_names() - set(trait_ids))
    if unknown:
        raise UnknownNames(traits=unknown, classes=[])
    rc_ids = _ids(shape.class_ids, request.resource_classes(), conn, names.resource_class_ids)
    unknown = sorted(request.resource_classes() - set(rc_ids))
    if unknown:
        raise UnknownNames(traits=[], classes=unknown)
    sorted_by = request.ranking.classes() if request.ranking is not None else []
    sort_ids = _ids(shape.class_ids, sorted_by, conn, names.resource_class_ids)
    unknown = [rc for rc in sorted_by if rc not in sort_ids]
    if unknown:
        raise UnknownNames(traits=[], classes=unknown, parameter="sort")
    wanted, beyond = rooms.weighed(request, rc_ids)
    if answer_only:  # an answer known empty from the shape alone reads no usage
        known = rooms.unservable(shape, request, wanted, beyond)
        if known is not None:
            return known
    if request.ranking is not None and (ranked_first is not None or again is not None):
        return _ranked_window(
            conn, shape, request, wanted, beyond, sort_ids, ranked_first, answer_only, again
        )
    cut = None if first is None else rooms.window(shape, request, wanted, first)
    in_range = None if cut is None else rooms.id_range(shape, cut[0])
    # The sort keys' classes in the same read: a class sorted by need not be asked for.
    used = used_amounts(conn, sorted({*wanted, *beyond, *sort_ids.values()}), in_range)
    found = rooms.found(shape, request, wanted, used, cut, beyond, answer_only)
    if sort_ids:
        found.fills = rooms.fills(shape.providers, shape.stock, sort_ids, used)
    return found


def _ranked_window(
    conn: Connection,
    shape: world.World,
    request: Request,
    wanted: dict[int, tuple[str, int]],
    beyond: dict[int, tuple[str, int]],
    sort_ids: dict[str, int],
    first: int | None,
    answer_only: bool,
    again: Found | None,
) -> Found:
    """search's ``ranked_first``: the usage of the sort classes of the whole
    cloud read (the trees' bounds need it), the room of the ``first`` best
    trees alone worked out (None: every tree's). ``again``: the Found of a
    narrower search of the same request, in the same transaction, whose
    usage and bounds serve again."""
    assert request.ranking is not None
    classes = sorted({*wanted, *beyond})
    if shape.trees(frozenset(wanted)).sharing:  # ranked whole (rank.py)
        used = used_amounts(conn, sorted({*classes, *sort_ids.values()}))
        found = rooms.found(shape, request, wanted, used, None, beyond, answer_only)
        found.fills = rooms.fills(shape.providers, shape.stock, sort_ids, used)
        return found
    members = shape.members
    if again is not None and again.world is shape and again.ranking_read is not None:
        fills = again.fills  # a wider search of the same request
        placed, sorted_used = again.ranking_read
    else:
        # The sort classes' usage of every tree, for the bounds; the requested
        # classes' usage of the trees searched, once they are chosen (the
        # same read when every requested class is sorted by).
        sort_classes = sorted(sort_ids.values())
        sorted_used = used_amounts(conn, sort_classes, dense=rooms.dense(shape, sort_classes))
        fills = rooms.kept_fills(shape, sort_ids, sorted_used)
        placed = rooms.bounded(shape, request, wanted, fills)
    cut, next_bound = rooms.ranked_window(placed, first)
    searched = [] if cut is None else [pid for root in cut[0] for pid in members.get(root, ())]
    if set(classes) <= set(sort_ids.values()):
        used = sorted_used
    elif cut is None or len(searched) > USED_OF_AT_MOST:
        used = used_amounts(conn, classes)
    else:
        used = used_of(conn, classes, searched)
    found = rooms.found(shape, request, wanted, used, cut, beyond, answer_only)
    found.fills = fills
    if cut is not None:
        found.next_bound = next_bound
        found.ranking_read = (placed, sorted_used)
    return found


def _ids(
    known: dict[str, int],
    wanted: Iterable[str],
    conn: Connection,
    look_up: Callable[[Connection, Iterable[str]], dict[str, int]],
) -> dict[str, int]:
    """name -> id of the names that exist: from the shape of the cloud,
    which holds every trait and class (writes to either move the world
    generation); a name it does not hold is looked up in the database
    anyway, which compares names its own way (MariaDB ignores trailing
    spaces) as the request's filters will."""
    found, missing = {}, []
    for name in wanted:
        if name in known:
            found[name] = known[name]
        else:
            missing.append(name)
    if missing:
        found.update(look_up(conn, missing))
    return found


def used_amounts(
    conn: Connection,
    rc_ids: list[int],
    id_range: tuple[int, int] | None = None,
    dense: bool = False,
) -> dict[int, dict[int, int]]:
    """class id -> provider -> the amount allocated, for these classes (and
    the providers with an id in ``id_range``, both ends included): one
    grouped read, in the request's transaction. ``dense``: most providers
    have allocations of these classes (see _USED_DENSE)."""
    used: dict[int, dict[int, int]] = {rc_id: {} for rc_id in rc_ids}
    if not rc_ids:
        return used
    if id_range is None:
        rows = conn.execute(_USED_DENSE if dense else _USED, {"classes": rc_ids}).all()
    else:
        lowest, highest = id_range
        rows = conn.execute(
            _USED_IN_RANGE, {"classes": rc_ids, "lowest": lowest, "highest": highest}
        ).all()
    if len(rc_ids) == 1:  # a dict made in one go (a ranked search's sort class of every tree)
        used[rc_ids[0]] = {pid: int(amount) for pid, _rc_id, amount in rows}
    else:
        for pid, rc_id, amount in rows:
            used[rc_id][pid] = int(amount)
    return _less_lapsed(used, rows)


def used_of(conn: Connection, rc_ids: list[int], providers: list[int]) -> dict[int, dict[int, int]]:
    """``used_amounts`` of these providers alone (the trees a ranked search
    chose, scattered over the cloud's ids): one grouped read."""
    used: dict[int, dict[int, int]] = {rc_id: {} for rc_id in rc_ids}
    if not rc_ids or not providers:
        return used
    rows = conn.execute(_USED_OF, {"classes": rc_ids, "providers": providers}).all()
    for pid, rc_id, amount in rows:
        used[rc_id][pid] = int(amount)
    return _less_lapsed(used, rows)


def _less_lapsed(used: dict[int, dict[int, int]], rows: Sequence[Any]) -> dict[int, dict[int, int]]:
    """``used`` as the rows sum it. A read of usage is the grouped sum of
    every allocation, then (UNION ALL) the negated sums of those of holds
    that have expired (1.51): none, nearly always, so each (provider, class)
    comes once and ``used`` holds it as read. When some come twice, they are
    summed instead (an expired hold's allocations count for nothing)."""
    if sum(len(by_provider) for by_provider in used.values()) == len(rows):
        return used
    for by_provider in used.values():
        by_provider.clear()
    for pid, rc_id, amount in rows:
        by_provider = used[rc_id]
        left = by_provider.get(pid, 0) + int(amount)
        if left:
            by_provider[pid] = left
        else:
            by_provider.pop(pid, None)
    return used


class _ScanIndexed(FunctionElement[int]):
    """A column SQLite's planner is not to search an index by (its unary
    ``+``), so that a grouped read of most of a table scans the covering
    index in the GROUP BY's order instead of searching one index and
    sorting in a temporary tree: 2.0 ms against 2.7 ms for the VCPU
    allocations of 10,000 hosts. Other databases read the column as is."""

    type = sa.Integer()
    inherit_cache = True
    name = "scan_indexed"


@compiles(_ScanIndexed)
def _scan_indexed(element: _ScanIndexed, compiler: Any, **kw: Any) -> str:
    return str(compiler.process(element.clauses, **kw))


@compiles(_ScanIndexed, "sqlite")
def _scan_indexed_sqlite(element: _ScanIndexed, compiler: Any, **kw: Any) -> str:
    return "+" + str(compiler.process(element.clauses, **kw))


def _used_statement(in_range: bool, dense: bool = False, of: bool = False) -> Any:
    """used_amounts' (or, ``of``, used_of's) read, built once (every
    candidates request runs it): the grouped sums of every allocation of the
    classes, then those of holds that have expired (1.51), negated, read by
    the consumers' index (see _less_lapsed): the first stays a scan of the
    covering index."""
    rc_id: Any = _ScanIndexed(ALLOC.c.resource_class_id) if dense else ALLOC.c.resource_class_id
    classes: Any = sa.bindparam("classes", expanding=True)
    where = []
    if in_range:
        where.append(
            ALLOC.c.resource_provider_id.between(sa.bindparam("lowest"), sa.bindparam("highest"))
        )
    if of:
        where.append(ALLOC.c.resource_provider_id.in_(sa.bindparam("providers", expanding=True)))
    keys = (ALLOC.c.resource_provider_id, ALLOC.c.resource_class_id)
    every = (
        sa.select(*keys, sa.func.sum(ALLOC.c.used))
        .where(rc_id.in_(classes), *where)
        .group_by(*keys)
    )
    lapsed = (
        sa.select(*keys, -sa.func.sum(ALLOC.c.used))
        .where(
            ALLOC.c.consumer_id.in_(holds.expired_consumers()),
            ALLOC.c.resource_class_id.in_(classes),
            *where,
        )
        .group_by(*keys)
    )
    return sa.union_all(every, lapsed)


_USED = _used_statement(in_range=False)
_USED_IN_RANGE = _used_statement(in_range=True)
_USED_DENSE = _used_statement(in_range=False, dense=True)
_USED_OF = _used_statement(in_range=False, of=True)
