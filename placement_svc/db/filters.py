"""SQL conditions on providers shared by GET /resource_providers and the
candidate search: capacity for an amount of a class, traits, aggregates.

Each returns a boolean SQL expression over ``provider_id`` (a column), so
callers can combine them into one statement, whatever the provider count.
"""

from __future__ import annotations

import functools
from collections.abc import Iterable
from typing import Any

import sqlalchemy as sa

from placement_svc.db import holds, tables

INV = tables.inventories
ALLOC = tables.allocations
RPT = tables.resource_provider_traits
RPA = tables.resource_provider_aggregates
AGG = tables.placement_aggregates
RC = tables.resource_classes
TRAIT = tables.traits

# A provider id column of some statement (the candidates search aliases them).
Column = sa.ColumnElement[Any]


def providers_with_capacity(classes: int, by_name: bool = False) -> sa.Select:
    """The providers that can take an amount more of each of ``classes``
    classes, units respected: the n-th class and its amount are the bound
    parameters ``rc_<n>`` and ``amount_<n>`` (``capacity_parameters``);
    with ``by_name``, ``rc_<n>`` is the class's name, looked up in the
    statement itself (a name no class has leaves no provider).

    One grouped read for all the classes: the inventories of any of them
    with room for its amount, counted per provider, which must have every
    one (a provider holds one inventory per class). A subquery per class,
    as this was, let PostgreSQL estimate one row each and run the second
    for every row of the first: 50 ms for a thousand providers where this
    takes 10. Built once per number of classes: building the statement
    cost more than SQLite running it."""
    return _capacity_select(classes, by_name)


def capacity_parameters(position: int, rc: int | str, amount: int) -> dict[str, int | str]:
    """The values of the ``position``-th class: its id, or its name (``by_name``)."""
    return {f"rc_{position}": rc, f"amount_{position}": amount}


# A query names each class once: more than a few are rare, and a client
# cannot make the cache grow past this.
@functools.lru_cache(maxsize=64)
def _capacity_select(classes: int, by_name: bool) -> sa.Select:
    rc_ids: list[Any] = [
        _id_named(RC, sa.bindparam(f"rc_{n}", type_=sa.String))
        if by_name
        else sa.bindparam(f"rc_{n}", type_=sa.Integer)
        for n in range(classes)
    ]
    amounts = [sa.bindparam(f"amount_{n}", type_=sa.Integer) for n in range(classes)]
    usage = (
        sa.select(
            ALLOC.c.resource_provider_id,
            ALLOC.c.resource_class_id,
            sa.func.sum(ALLOC.c.used).label("used"),
        )
        .where(ALLOC.c.resource_class_id.in_(rc_ids), holds.live())
        .group_by(ALLOC.c.resource_provider_id, ALLOC.c.resource_class_id)
        .subquery()
    )
    free = (INV.c.total - INV.c.reserved) * INV.c.allocation_ratio - sa.func.coalesce(
        usage.c.used, 0
    )
    fits = [
        sa.and_(
            INV.c.resource_class_id == rc_id,
            free >= amount,
            INV.c.min_unit <= amount,
            INV.c.max_unit >= amount,
            amount % INV.c.step_size == 0,
        )
        for rc_id, amount in zip(rc_ids, amounts)
    ]
    return (
        sa.select(INV.c.resource_provider_id)
        .select_from(
            INV.outerjoin(
                usage,
                sa.and_(
                    usage.c.resource_provider_id == INV.c.resource_provider_id,
                    usage.c.resource_class_id == INV.c.resource_class_id,
                ),
            )
        )
        .where(sa.or_(*fits))
        .group_by(INV.c.resource_provider_id)
        .having(sa.func.count() == classes)
    )


def _id_named(table: sa.Table, name: Any) -> Any:
    """The id of the class or trait named ``name``, as a value of the
    statement (NULL for a name none has, which equals nothing)."""
    return sa.select(table.c.id).where(table.c.name == name).scalar_subquery()


def has_any_trait(provider_id: Column, trait_ids: Any) -> sa.ColumnElement[bool]:
    """A trait of ``trait_ids`` (ids, or an expanding bound parameter) is on
    the provider: IN the providers that have one, read once, as
    ``in_any_aggregate`` (a correlated EXISTS made SQLite look the traits
    of each of 4,000 providers up). A trait's provider is never NULL, so
    NOT of it is sound too."""
    return provider_id.in_(
        sa.select(RPT.c.resource_provider_id).where(RPT.c.trait_id.in_(trait_ids))
    )


def traits_condition(
    provider_id: Column, groups: int, forbidden: bool, by_name: bool = False
) -> sa.ColumnElement[bool]:
    """Each of ``groups`` sets of trait ids has a member on the provider;
    with ``forbidden``, no forbidden trait is. The ids are bound by name
    (``traits_parameters``), so that one statement serves every request of
    its form: SQLAlchemy walks a statement whole to key it, once per
    statement object. With ``by_name`` each set is one trait's name, looked
    up in the statement itself, once (no forbidden ones, and not on
    PostgreSQL: see providers.list_filtered)."""

    def bound(name: str) -> Any:
        if by_name:
            return [_id_named(TRAIT, sa.bindparam(name, type_=sa.String))]
        return _expanding(name)

    conditions: list[sa.ColumnElement[bool]] = [
        has_any_trait(provider_id, bound(f"traits_{n}")) for n in range(groups)
    ]
    if forbidden:
        conditions.append(~has_any_trait(provider_id, _expanding("traits_forbidden")))
    return sa.and_(sa.true(), *conditions)


def traits_parameters(any_of: list[set[int]], forbidden: set[int]) -> dict[str, list[int]]:
    """The values of ``traits_condition(..., len(any_of), bool(forbidden))``."""
    bound = {f"traits_{n}": sorted(ids) for n, ids in enumerate(any_of)}
    if forbidden:
        bound["traits_forbidden"] = sorted(forbidden)
    return bound


def in_any_aggregate(provider_id: Column, aggregate_uuids: Any) -> sa.ColumnElement[bool]:
    """``provider_id`` is a member of one of these aggregates (uuids, or an
    expanding bound parameter): IN the members of them all, read once
    (SQLite ran a correlated EXISTS once per provider, two and a half times
    as long at 10,000 providers; PostgreSQL and MariaDB plan both alike). A
    membership's provider is never NULL, so NOT of it is sound too."""
    members = (
        sa.select(RPA.c.resource_provider_id)
        .join(AGG, AGG.c.id == RPA.c.aggregate_id)
        .where(AGG.c.uuid.in_(aggregate_uuids))
    )
    return provider_id.in_(members)


def aggregates_condition(
    provider_id: Column, groups: int, forbidden: bool
) -> sa.ColumnElement[bool]:
    """Each of ``groups`` sets of aggregate uuids has one the provider is a
    member of; with ``forbidden``, it is a member of none of those. Bound by
    name, as ``traits_condition`` (``aggregates_parameters``)."""
    conditions: list[sa.ColumnElement[bool]] = [
        in_any_aggregate(provider_id, _expanding(f"aggregates_{n}")) for n in range(groups)
    ]
    if forbidden:
        conditions.append(~in_any_aggregate(provider_id, _expanding("aggregates_forbidden")))
    return sa.and_(sa.true(), *conditions)


def aggregates_parameters(
    any_of: list[frozenset[str]], forbidden: set[str]
) -> dict[str, list[str]]:
    """The values of ``aggregates_condition(..., len(any_of), bool(forbidden))``."""
    bound = {f"aggregates_{n}": sorted(uuids) for n, uuids in enumerate(any_of)}
    if forbidden:
        bound["aggregates_forbidden"] = sorted(forbidden)
    return bound


def _expanding(name: str) -> sa.BindParameter:
    return sa.bindparam(name, expanding=True)


def ids_in(column: Column, ids: Iterable[int]) -> sa.ColumnElement[bool]:
    """``column IN (1, 2, ...)`` with the ids written into the SQL text.

    For long lists of ids the database itself gave us: a bound parameter per
    id costs SQLAlchemy more time than the query takes. Only integers are
    written (int() of each), so nothing from a client reaches the SQL text.
    A statement using it should run with ``NO_STATEMENT_CACHE``: its text
    changes with the ids and would only crowd useful statements out of the
    compiled-statement cache.
    """
    text = ",".join(str(int(i)) for i in sorted(ids))
    if not text:
        return sa.false()
    return column.op("IN")(sa.text(f"({text})"))


NO_STATEMENT_CACHE = {"compiled_cache": None}
