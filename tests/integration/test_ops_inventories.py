"""Inventory units of work: upstream's check order (provider, body, generation,
capacity, class) and the facts each refusal carries."""

from __future__ import annotations

from functools import partial

import jsonschema
import pytest
from microversion_parse import Version

from placement_svc import microversion as mv
from placement_svc.db.exceptions import (
    InventoryInUse,
    ProviderNotFound,
    UnknownResourceClass,
)
from placement_svc.ops import inventories as ops
from placement_svc.ops.exceptions import (
    InvalidInventory,
    InventoryExists,
    InventoryNotFound,
    ProviderGenerationMismatch,
)
from tests.integration.conftest import add_allocation, add_provider, new_uuid

LATEST = mv.MAX_VERSION
BEFORE_ZERO_CAPACITY = Version(1, 25)


def _replace(db, rp_uuid, inventories, generation=0, version=LATEST):
    body = {"resource_provider_generation": generation, "inventories": inventories}
    return db.write(partial(ops.replace_all, uuid=rp_uuid, data=body, version=version))


def test_replace_all_then_show(db):
    rp_uuid = add_provider(db)
    generation, found = _replace(db, rp_uuid, {"VCPU": {"total": 8}, "DISK_GB": {"total": 100}})
    assert generation == 1
    assert [inv.resource_class for inv in found] == ["DISK_GB", "VCPU"]
    generation, vcpu = db.read(partial(ops.show, uuid=rp_uuid, resource_class="VCPU"))
    assert (generation, vcpu.total, vcpu.max_unit) == (1, 8, 2147483647)
    with pytest.raises(InventoryNotFound):
        db.read(partial(ops.show, uuid=rp_uuid, resource_class="MEMORY_MB"))


def test_the_provider_comes_before_the_body_and_the_body_before_the_generation(db):
    with pytest.raises(ProviderNotFound):
        db.write(partial(ops.replace_all, uuid=new_uuid(), data={}, version=LATEST))
    rp_uuid = add_provider(db)
    with pytest.raises(jsonschema.ValidationError):
        db.write(partial(ops.replace_all, uuid=rp_uuid, data={}, version=LATEST))
    with pytest.raises(ProviderGenerationMismatch) as stale:
        _replace(db, rp_uuid, {"CUSTOM_NONE": {"total": 1}}, generation=4)
    assert (stale.value.actual, stale.value.given) == (0, 4)


def test_capacity_is_checked_before_the_class_and_may_be_zero_from_1_26(db):
    rp_uuid = add_provider(db)
    full = {"CUSTOM_NONE": {"total": 4, "reserved": 4}}
    with pytest.raises(InvalidInventory) as invalid:
        _replace(db, rp_uuid, full, version=BEFORE_ZERO_CAPACITY)
    assert (invalid.value.resource_class, invalid.value.zero_allowed) == ("CUSTOM_NONE", False)
    with pytest.raises(UnknownResourceClass) as unknown:
        _replace(db, rp_uuid, full)
    assert unknown.value.names == ("CUSTOM_NONE",)
    assert _replace(db, rp_uuid, {"VCPU": {"total": 4, "reserved": 4}})[0] == 1


def test_create_refuses_a_class_the_provider_has(db):
    rp_uuid = add_provider(db, {"VCPU": 4})
    body = {"resource_class": "VCPU", "total": 8}
    with pytest.raises(InventoryExists) as exists:
        db.write(partial(ops.create, uuid=rp_uuid, data=body, version=LATEST))
    assert (exists.value.uuid, exists.value.resource_class) == (rp_uuid, "VCPU")
    body["resource_class"] = "DISK_GB"
    generation, inv = db.write(partial(ops.create, uuid=rp_uuid, data=body, version=LATEST))
    assert (generation, inv.resource_class, inv.total) == (1, "DISK_GB", 8)


def test_update_one_wants_a_known_class_then_inventory_of_it(db):
    rp_uuid = add_provider(db, {"VCPU": 4})
    body = {"resource_provider_generation": 0, "total": 16}

    def update(rc):
        return db.write(
            partial(ops.update_one, uuid=rp_uuid, resource_class=rc, data=body, version=LATEST)
        )

    with pytest.raises(UnknownResourceClass):
        update("CUSTOM_NONE")
    with pytest.raises(InventoryNotFound):
        update("DISK_GB")
    generation, inv = update("VCPU")
    assert (generation, inv.total) == (1, 16)


def test_delete_one_says_whether_the_class_exists(db):
    rp_uuid = add_provider(db, {"VCPU": 4})
    with pytest.raises(UnknownResourceClass):
        db.write(partial(ops.delete_one, uuid=rp_uuid, resource_class="CUSTOM_NONE"))
    with pytest.raises(InventoryNotFound):
        db.write(partial(ops.delete_one, uuid=rp_uuid, resource_class="DISK_GB"))
    db.write(partial(ops.delete_one, uuid=rp_uuid, resource_class="VCPU"))
    assert db.read(partial(ops.list_for, uuid=rp_uuid)) == (1, [])


def test_inventory_in_use_names_the_classes(db):
    rp_uuid = add_provider(db, {"VCPU": 4, "DISK_GB": 10})
    add_allocation(db, rp_uuid, {"VCPU": 1, "DISK_GB": 1})
    with pytest.raises(InventoryInUse) as in_use:
        db.write(partial(ops.delete_all, uuid=rp_uuid))
    # In class id order, as upstream lists them: VCPU (0) before DISK_GB (2).
    assert (in_use.value.uuid, in_use.value.resource_classes) == (rp_uuid, ("VCPU", "DISK_GB"))
