"""db/embedded.py builds inventory records from its rows by position: the
columns it selects after the provider id must be Inventory's fields, in
Inventory's order."""

from __future__ import annotations

import dataclasses

from placement_svc.db import embedded
from placement_svc.db.inventories import FIELDS, Inventory


def test_the_selected_columns_are_the_records_fields_in_order():
    assert [f.name for f in dataclasses.fields(Inventory)] == [
        "resource_class",
        *FIELDS,
        "created_at",
        "updated_at",
    ]


def test_few_providers_are_named_and_many_are_kept_from_every_row():
    column = embedded.INV.c.resource_provider_id
    where, keep = embedded._of(column, [3, 1, 2])
    assert keep is None and len(where) == 1
    many = range(embedded.LISTED_AT_MOST + 1)
    where, keep = embedded._of(column, many)
    assert where == [] and keep == set(many)
