"""Trait units of work: custom traits are the client's, standard ones read-only."""

from __future__ import annotations

from functools import partial

import pytest
import sqlalchemy as sa

from placement_svc.db import tables
from placement_svc.db.exceptions import TraitInUse, TraitNotFound
from placement_svc.ops import traits as ops
from placement_svc.ops.exceptions import StandardTrait
from tests.integration.conftest import add_provider


def test_ensure_creates_a_custom_trait_once(db):
    trait, created = db.write(partial(ops.ensure, name="CUSTOM_FAST"))
    assert (trait.name, created) == ("CUSTOM_FAST", True)
    assert db.write(partial(ops.ensure, name="CUSTOM_FAST"))[1] is False


def test_delete_reports_a_missing_trait_before_a_standard_one(db):
    with pytest.raises(TraitNotFound) as caught:
        db.write(partial(ops.delete, name="CUSTOM_NONE"))
    assert caught.value.name == "CUSTOM_NONE"
    with pytest.raises(StandardTrait) as caught:
        db.write(partial(ops.delete, name="HW_CPU_X86_AVX"))
    assert caught.value.name == "HW_CPU_X86_AVX"


def test_delete_refuses_a_trait_a_provider_has(db):
    trait, _created = db.write(partial(ops.ensure, name="CUSTOM_FAST"))
    rp_uuid = add_provider(db)

    def link(conn):
        rp = tables.resource_providers
        rp_id = conn.execute(sa.select(rp.c.id).where(rp.c.uuid == rp_uuid)).scalar_one()
        conn.execute(
            sa.insert(tables.resource_provider_traits).values(
                resource_provider_id=rp_id, trait_id=trait.id
            )
        )

    db.write(link)
    with pytest.raises(TraitInUse) as caught:
        db.write(partial(ops.delete, name="CUSTOM_FAST"))
    assert caught.value.name == "CUSTOM_FAST"


def test_delete_removes_an_unused_custom_trait(db):
    db.write(partial(ops.ensure, name="CUSTOM_FAST"))
    db.write(partial(ops.delete, name="CUSTOM_FAST"))
    with pytest.raises(TraitNotFound):
        db.read(partial(ops.get, name="CUSTOM_FAST"))
