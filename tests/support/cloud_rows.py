"""A cloud written straight into placement's tables, without the API: for
the tests that run the candidates engine on a real connection
(tests/integration). Providers are named; their uuids come from their names.
"""

from __future__ import annotations

import uuid

import sqlalchemy as sa

from placement_svc.db import tables


def uuid_of(name: str) -> str:
    """The uuid of the provider (or consumer) called ``name``."""
    return str(uuid.uuid5(uuid.NAMESPACE_URL, name))


class Cloud:
    """Providers written straight into the tables on ``conn``. ``classes``
    gives each resource class's id; they are inserted too, unless
    ``create_classes`` is false (they are there already)."""

    def __init__(self, conn, classes: dict[str, int], create_classes: bool = True):
        self.conn = conn
        self.classes = classes
        self.ids: dict[str, int] = {}
        if create_classes:
            for name, rc_id in classes.items():
                self._insert(tables.resource_classes, id=rc_id, name=name)

    def _insert(self, table, **values) -> int:
        return self.conn.execute(table.insert().values(**values)).inserted_primary_key[0]

    def _named(self, table, column, value) -> int:
        found = self.conn.execute(sa.select(table.c.id).where(column == value)).scalar()
        return found if found is not None else self._insert(table, **{column.key: value})

    def provider(
        self, name, parent=None, inventory=None, used=None, traits=(), aggregates=(), ratio=1.0
    ) -> int:
        """Provider ``name``, under ``parent`` (a name) or a root: with
        ``inventory`` ({class: total}, at allocation ratio ``ratio``),
        ``used`` ({class: amount}, by consumer "consumer"), ``traits`` and
        ``aggregates`` (uuids), each trait and aggregate made when new.
        Returns its id."""
        rp = tables.resource_providers
        pid = self._insert(rp, uuid=uuid_of(name), name=name)
        parent_id = self.ids.get(parent)
        root_id = pid
        if parent_id is not None:
            root_id = self.conn.execute(
                sa.select(rp.c.root_provider_id).where(rp.c.id == parent_id)
            ).scalar()
        self.conn.execute(
            rp.update()
            .where(rp.c.id == pid)
            .values(root_provider_id=root_id, parent_provider_id=parent_id)
        )
        self.ids[name] = pid
        for rc, total in (inventory or {}).items():
            self._insert(
                tables.inventories,
                resource_provider_id=pid,
                resource_class_id=self.classes[rc],
                total=total,
                reserved=0,
                min_unit=1,
                max_unit=total,
                step_size=1,
                allocation_ratio=ratio,
            )
        for rc, amount in (used or {}).items():
            self._insert(
                tables.allocations,
                resource_provider_id=pid,
                consumer_id=uuid_of("consumer"),
                resource_class_id=self.classes[rc],
                used=amount,
            )
        for trait in traits:
            trait_id = self._named(tables.traits, tables.traits.c.name, trait)
            self._insert(
                tables.resource_provider_traits, resource_provider_id=pid, trait_id=trait_id
            )
        for aggregate in aggregates:
            agg = tables.placement_aggregates
            agg_id = self._named(agg, agg.c.uuid, aggregate)
            self._insert(
                tables.resource_provider_aggregates, resource_provider_id=pid, aggregate_id=agg_id
            )
        return pid
