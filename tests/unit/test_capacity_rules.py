"""The capacity rules of an allocation write (ops/capacity.py), on plain data.

The same rules run on every backend through tests/integration/test_ops_allocations.py;
here each is tried alone, with the figures the data layer would have read.
"""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from placement_svc.db.exceptions import AmountViolatesInventory, CapacityExceeded, InventoryMissing
from placement_svc.db.providers import Provider
from placement_svc.ops.capacity import Claim, check

VCPU, DISK = 1, 2
RC_IDS = {"VCPU": VCPU, "DISK_GB": DISK}


def _provider(provider_id: int) -> Provider:
    uuid = f"rp-{provider_id}"
    return Provider(provider_id, uuid, uuid, 1, None, provider_id, None, uuid, None)


def _inventory(total, reserved=0, min_unit=1, max_unit=None, step_size=1, ratio=1.0):
    return SimpleNamespace(
        total=total,
        reserved=reserved,
        min_unit=min_unit,
        max_unit=total if max_unit is None else max_unit,
        step_size=step_size,
        allocation_ratio=ratio,
    )


RP = _provider(7)


def test_a_claim_that_fits_passes_and_one_beyond_capacity_is_refused():
    inventories = {(7, VCPU): _inventory(8, reserved=2, ratio=2.0)}  # room for 12
    check([Claim("c", RP, "VCPU", 4)], RC_IDS, inventories, {(7, VCPU): 8}, {})
    with pytest.raises(CapacityExceeded) as full:
        check([Claim("c", RP, "VCPU", 5)], RC_IDS, inventories, {(7, VCPU): 8}, {})
    assert (full.value.uuid, full.value.resource_class) == ("rp-7", "VCPU")


def test_several_claims_of_one_class_count_together():
    inventories = {(7, VCPU): _inventory(4)}
    claims = [Claim("a", RP, "VCPU", 2), Claim("b", RP, "VCPU", 3)]
    with pytest.raises(CapacityExceeded):
        check(claims, RC_IDS, inventories, {}, {})


@pytest.mark.parametrize("amount", [1, 6, 3])
def test_min_unit_max_unit_and_step_size_are_each_a_violation(amount):
    inventories = {(7, VCPU): _inventory(16, min_unit=2, max_unit=4, step_size=2)}
    with pytest.raises(AmountViolatesInventory):
        check([Claim("c", RP, "VCPU", amount)], RC_IDS, inventories, {}, {})
    check([Claim("c", RP, "VCPU", 4)], RC_IDS, inventories, {}, {})


def test_a_provider_over_capacity_already_takes_a_write_that_leaves_it_no_worse():
    """The inventory shrank under its consumers: one of them may still rewrite
    its allocation at the same or a smaller amount, not a larger one."""
    inventories = {(7, VCPU): _inventory(4)}
    used_without_ours = {(7, VCPU): 4}
    ours_before = {(7, VCPU): 2}  # usage was 6 on room for 4
    check([Claim("c", RP, "VCPU", 2)], RC_IDS, inventories, used_without_ours, ours_before)
    check([Claim("c", RP, "VCPU", 1)], RC_IDS, inventories, used_without_ours, ours_before)
    with pytest.raises(CapacityExceeded):
        check([Claim("c", RP, "VCPU", 3)], RC_IDS, inventories, used_without_ours, ours_before)


def test_a_provider_without_inventory_names_every_class_of_the_write():
    other = _provider(8)
    inventories = {(7, VCPU): _inventory(8), (7, DISK): _inventory(100)}
    claims = [Claim("c", RP, "VCPU", 1), Claim("c", other, "DISK_GB", 10)]
    with pytest.raises(InventoryMissing) as missing:
        check(claims, RC_IDS, inventories, {}, {})
    assert missing.value.provider_uuids == ("rp-8",)
    assert set(missing.value.resource_classes) == {"VCPU", "DISK_GB"}


def test_a_class_the_provider_lacks_is_missing_and_a_removal_needs_no_inventory():
    inventories = {(7, VCPU): _inventory(8)}
    with pytest.raises(InventoryMissing) as missing:
        check([Claim("c", RP, "DISK_GB", 1)], RC_IDS, inventories, {}, {})
    assert (missing.value.resource_classes, missing.value.provider_uuids) == (
        ("DISK_GB",),
        ("rp-7",),
    )
    check([Claim("c", RP, "DISK_GB", 0)], RC_IDS, inventories, {}, {(7, DISK): 5})
