"""The SQL of GET /allocation_candidates/explain: the whole cloud, as the
explanation needs it. SQL only.

The search (search.py) reads only what can serve a request: providers with
room, the trees that hold the requested classes. An explanation must also
say why the others do not, in numbers, so this reads every provider with
its name and traits, every inventory of the requested classes whole (total,
reserved, ratio, units) with its used amount, the trees each sharing
provider shares with and, when the request filters on them, every
provider's aggregates. A fixed number of statements, whatever the size of
the cloud.
"""

from __future__ import annotations

import sqlalchemy as sa
from sqlalchemy.engine import Connection

from placement_svc.candidates import search, world
from placement_svc.candidates.model import Provider, Stock, Survey
from placement_svc.candidates.request import Request
from placement_svc.db import names, tables

RP = tables.resource_providers
INV = tables.inventories
ALLOC = tables.allocations
RC = tables.resource_classes
TRAIT = tables.traits
RPT = tables.resource_provider_traits


def load(conn: Connection, request: Request) -> Survey:
    """Everything the explanation of ``request`` reads (the request's trait
    and class names are known: the search has checked them)."""
    survey = Survey()
    trait_names: dict[int, list[str]] = {}
    rows = conn.execute(
        sa.select(
            RP.c.id,
            RP.c.uuid,
            RP.c.name,
            RP.c.parent_provider_id,
            RP.c.root_provider_id,
            TRAIT.c.name,
        ).select_from(
            RP.outerjoin(RPT, RPT.c.resource_provider_id == RP.c.id).outerjoin(
                TRAIT, TRAIT.c.id == RPT.c.trait_id
            )
        )
    ).all()
    for pid, uuid, name, parent_id, root_id, trait in rows:
        if pid not in survey.providers:
            survey.providers[pid] = Provider(pid, uuid, parent_id, root_id)
            survey.names[pid] = name
        if trait is not None:
            trait_names.setdefault(pid, []).append(trait)
    survey.traits = world.interned(trait_names, survey.providers)
    survey.stock = _stock(conn, request.resource_classes())
    # The sharing providers the search sees: those of a tree that holds an
    # inventory of a requested class (it reads sharing off those trees).
    stocked = {survey.providers[pid].root_id for pid, _rc in survey.stock}
    survey.sharing = {
        pid
        for pid, held in survey.traits.items()
        if search.SHARING_TRAIT in held and survey.providers[pid].root_id in stocked
    }
    if survey.sharing:
        survey.shares_with = search.shared_roots(conn, survey.sharing, survey.providers)
    if request.root_member_of or any(g.member_of for g in request.groups.values()):
        survey.aggregates = search.aggregates_of(conn, survey.providers, sa.true())
    return survey


def _stock(conn: Connection, classes: set[str]) -> dict[tuple[int, str], Stock]:
    """(provider, class) -> its inventory and used amount, for every
    inventory of the requested classes."""
    rc_ids = names.resource_class_ids(conn, classes)
    if not rc_ids:
        return {}
    name_of = {rc_id: rc for rc, rc_id in rc_ids.items()}
    used, rows = search.inventories(conn, sorted(name_of))
    return {
        (pid, name_of[rc_id]): Stock(
            total, reserved, float(ratio), min_unit, max_unit, step_size, used[rc_id].get(pid, 0)
        )
        for pid, rc_id, total, reserved, ratio, min_unit, max_unit, step_size in rows
    }
