"""The SQL of GET /allocation_candidates: what a request's groups could use.

A bounded number of statements per request, whatever the number of
providers: the ids of the requested traits and classes, the world
generation (and, when it has moved, the shape of the cloud again: see
world.py), and the used amounts of the requested classes. rooms.py
(pure) makes of those the request's Found: the room of the requested
classes and the providers of the trees involved, and which providers may
serve which group (eligibility.py); combining groups into candidates is
walk.py and merge.py. Besides, the used amounts of other classes, for
provider summaries (summaries.py), and the names of a few providers.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from typing import Any

import sqlalchemy as sa
from sqlalchemy.engine import Connection
from sqlalchemy.sql.elements import ColumnElement

from placement_svc.candidates import rooms, world
from placement_svc.candidates.model import Found, Provider, UnknownNames
from placement_svc.candidates.request import Request
from placement_svc.db import names, tables

SHARING_TRAIT = world.SHARING_TRAIT
RP = tables.resource_providers
INV = tables.inventories
ALLOC = tables.allocations
TRAIT = tables.traits
RPT = tables.resource_provider_traits
RPA = tables.resource_provider_aggregates
AGG = tables.placement_aggregates


def search(
    conn: Connection,
    request: Request,
    worlds: world.Worlds | None = None,
    first: int | None = None,
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
    # Room for every requested class, on providers that can take the least amount.
    smallest: dict[str, int] = {}
    for group in request.groups.values():
        for rc, amount in group.resources.items():
            smallest[rc] = min(amount, smallest.get(rc, amount))
    wanted = {
        rc_ids[rc]: (rc, amount)
        for rc, amount in smallest.items()
        if amount <= tables.MAX_INT  # no inventory can hold more (max_unit is an INT)
    }
    cut = None if first is None else rooms.window(shape, request, wanted, first)
    used = used_amounts(
        conn, sorted(wanted), None if cut is None else rooms.id_range(shape, cut[0])
    )
    return rooms.found(shape, request, wanted, used, cut)


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
    conn: Connection, rc_ids: list[int], id_range: tuple[int, int] | None = None
) -> dict[int, dict[int, int]]:
    """class id -> provider -> the amount allocated, for these classes (and
    the providers with an id in ``id_range``, both ends included): one
    grouped read, in the request's transaction."""
    used: dict[int, dict[int, int]] = {rc_id: {} for rc_id in rc_ids}
    if not rc_ids:
        return used
    if id_range is None:
        rows = conn.execute(_USED, {"classes": rc_ids})
    else:
        lowest, highest = id_range
        rows = conn.execute(
            _USED_IN_RANGE, {"classes": rc_ids, "lowest": lowest, "highest": highest}
        )
    for pid, rc_id, amount in rows.all():
        used[rc_id][pid] = int(amount)
    return used


def _used_statement(in_range: bool) -> sa.Select[Any]:
    """used_amounts' read, built once (every candidates request runs it)."""
    stmt = sa.select(
        ALLOC.c.resource_provider_id,
        ALLOC.c.resource_class_id,
        sa.func.sum(ALLOC.c.used),
    ).where(ALLOC.c.resource_class_id.in_(sa.bindparam("classes", expanding=True)))
    if in_range:
        stmt = stmt.where(
            ALLOC.c.resource_provider_id.between(sa.bindparam("lowest"), sa.bindparam("highest"))
        )
    return stmt.group_by(ALLOC.c.resource_provider_id, ALLOC.c.resource_class_id)


_USED = _used_statement(in_range=False)
_USED_IN_RANGE = _used_statement(in_range=True)


def inventories(
    conn: Connection, rc_ids: list[int]
) -> tuple[dict[int, dict[int, int]], Sequence[Any]]:
    """Every inventory of these classes, and their used amounts (class ->
    provider -> used): two plain reads. The rows are (provider, class,
    total, reserved, allocation_ratio, min_unit, max_unit, step_size)."""
    used = used_amounts(conn, rc_ids)
    rows = conn.execute(
        sa.select(*world.INVENTORY_COLUMNS).where(INV.c.resource_class_id.in_(rc_ids))
    ).all()
    return used, rows


def shared_roots(
    conn: Connection, sharing: set[int], providers: dict[int, Provider]
) -> dict[int, set[int]]:
    """sharing provider -> the roots of the trees it shares with: those of
    every provider in one of its aggregates, and its own."""
    mine = RPA.alias("mine")
    theirs = RPA.alias("theirs")
    rows = conn.execute(
        sa.select(mine.c.resource_provider_id, RP.c.root_provider_id)
        .select_from(
            mine.join(theirs, theirs.c.aggregate_id == mine.c.aggregate_id).join(
                RP, RP.c.id == theirs.c.resource_provider_id
            )
        )
        .where(mine.c.resource_provider_id.in_(sorted(sharing)))
        .distinct()
    ).all()
    shares_with: dict[int, set[int]] = {pid: {providers[pid].root_id} for pid in sharing}
    for sharing_id, root_id in rows:
        shares_with[sharing_id].add(root_id)
    return shares_with


def aggregates_of(
    conn: Connection, providers: dict[int, Provider], in_trees: ColumnElement[bool]
) -> dict[int, frozenset[str]]:
    if not providers:
        return {}
    names_of: dict[int, list[str]] = {}
    for pid, uuid in conn.execute(
        sa.select(RPA.c.resource_provider_id, AGG.c.uuid)
        .select_from(
            RPA.join(AGG, AGG.c.id == RPA.c.aggregate_id).join(
                RP, RP.c.id == RPA.c.resource_provider_id
            )
        )
        .where(in_trees)
    ).all():
        names_of.setdefault(pid, []).append(uuid)
    return world.interned(names_of, providers)


def provider_names(conn: Connection, ids: Iterable[int]) -> dict[int, str]:
    """provider id -> name, for the few an answer names (a Found has no names)."""
    wanted = sorted(set(ids))
    if not wanted:
        return {}
    return dict(conn.execute(sa.select(RP.c.id, RP.c.name).where(RP.c.id.in_(wanted))).all())
