"""Allocation units of work: consumers and their generations, providers named,
capacity, and upstream's retry rule on provider conflicts (run by the
Database's one retry policy, db/retries.py)."""

from __future__ import annotations

from functools import partial

import pytest

from placement_svc.db.allocations import Wanted
from placement_svc.db.engine import Database
from placement_svc.db.exceptions import (
    AllocationProviderNotFound,
    AmountViolatesInventory,
    CapacityExceeded,
    ConsumerGenerationConflict,
    InventoryMissing,
    ProviderChanged,
    ProviderNotFound,
    UnknownResourceClass,
)
from placement_svc.ops import allocations as ops
from placement_svc.ops.exceptions import NoAllocations
from tests.integration.conftest import add_provider, new_uuid
from tests.support.races import ChangedAfterRead

INCOMPLETE = ("incomplete-project", "incomplete-user")


def _wanted(consumer_uuid, resources, generation=None, **owner):
    owner.setdefault("project_id", "project")
    owner.setdefault("user_id", "user")
    return Wanted(consumer_uuid, resources, generation=generation, **owner)


def _write(db, *wanted, check_generation=True):
    db.write(
        partial(
            ops.write,
            wanted=list(wanted),
            check_generation=check_generation,
            incomplete=INCOMPLETE,
        )
    )


def test_write_then_read_by_consumer_and_by_provider(db):
    rp_uuid = add_provider(db, {"VCPU": 8})
    consumer_uuid = new_uuid()
    _write(db, _wanted(consumer_uuid, {rp_uuid: {"VCPU": 2}}))
    consumer, found = db.read(partial(ops.for_consumer, consumer_uuid=consumer_uuid))
    assert (consumer.project_id, consumer.generation) == ("project", 1)
    assert [(a.provider_uuid, a.resource_class, a.used) for a in found] == [(rp_uuid, "VCPU", 2)]
    provider, by_provider = db.read(partial(ops.for_provider, uuid=rp_uuid))
    assert provider.generation == 1
    assert [a.consumer_uuid for a in by_provider] == [consumer_uuid]
    with pytest.raises(ProviderNotFound):
        db.read(partial(ops.for_provider, uuid=new_uuid()))


def test_consumer_generations_are_checked_when_asked(db):
    rp_uuid = add_provider(db, {"VCPU": 8})
    consumer_uuid = new_uuid()
    with pytest.raises(ConsumerGenerationConflict) as new:
        _write(db, _wanted(consumer_uuid, {rp_uuid: {"VCPU": 1}}, generation=3))
    assert (new.value.expected, new.value.given) == (None, 3)
    _write(db, _wanted(consumer_uuid, {rp_uuid: {"VCPU": 1}}))
    with pytest.raises(ConsumerGenerationConflict) as stale:
        _write(db, _wanted(consumer_uuid, {rp_uuid: {"VCPU": 2}}, generation=0))
    assert (stale.value.consumer_uuid, stale.value.expected, stale.value.given) == (
        consumer_uuid,
        1,
        0,
    )
    _write(db, _wanted(consumer_uuid, {rp_uuid: {"VCPU": 2}}), check_generation=False)


def test_a_missing_provider_then_an_unknown_class_then_capacity(db):
    rp_uuid = add_provider(db, {"VCPU": 2})
    missing = new_uuid()
    with pytest.raises(AllocationProviderNotFound) as not_found:
        _write(db, _wanted(new_uuid(), {missing: {"CUSTOM_NONE": 1}}))
    assert not_found.value.uuid == missing
    with pytest.raises(UnknownResourceClass) as unknown:
        _write(db, _wanted(new_uuid(), {rp_uuid: {"CUSTOM_NONE": 1, "CUSTOM_NEVER": 1}}))
    assert unknown.value.names == ("CUSTOM_NONE", "CUSTOM_NEVER")
    with pytest.raises(InventoryMissing) as no_inventory:
        _write(db, _wanted(new_uuid(), {rp_uuid: {"DISK_GB": 1}}))
    assert (no_inventory.value.resource_classes, no_inventory.value.provider_uuids) == (
        ("DISK_GB",),
        (rp_uuid,),
    )
    _write(db, _wanted(new_uuid(), {rp_uuid: {"VCPU": 2}}))
    with pytest.raises(CapacityExceeded) as full:
        _write(db, _wanted(new_uuid(), {rp_uuid: {"VCPU": 1}}))
    assert (full.value.uuid, full.value.resource_class) == (rp_uuid, "VCPU")


def test_an_amount_beyond_max_unit_violates_the_inventory(db):
    rp_uuid = add_provider(db, {"VCPU": 2})  # max_unit 2
    with pytest.raises(AmountViolatesInventory):
        _write(db, _wanted(new_uuid(), {rp_uuid: {"VCPU": 4}}), check_generation=False)


def test_delete_reports_a_consumer_without_allocations(db):
    rp_uuid = add_provider(db, {"VCPU": 2})
    consumer_uuid = new_uuid()
    _write(db, _wanted(consumer_uuid, {rp_uuid: {"VCPU": 1}}))
    db.write(partial(ops.delete, consumer_uuid=consumer_uuid))
    with pytest.raises(NoAllocations) as none_left:
        db.write(partial(ops.delete, consumer_uuid=consumer_uuid))
    assert none_left.value.consumer_uuid == consumer_uuid


def _usage(db, rp_uuid):
    _provider, held = db.read(partial(ops.for_provider, uuid=rp_uuid))
    return sum(a.used for a in held)


def test_a_provider_changed_after_the_write_read_it_is_a_conflict_worth_a_retry(db, monkeypatch):
    """The generation the write bumps is the one it read, not the client's: a
    provider changed meanwhile is ProviderChanged (a ConcurrentUpdate the
    Database runs again), and nothing of the write is left."""
    rp_uuid = add_provider(db, {"VCPU": 2})
    ChangedAfterRead(monkeypatch, times=1)
    with pytest.raises(ProviderChanged) as changed, db.engine.begin() as conn:
        ops.write(conn, [_wanted(new_uuid(), {rp_uuid: {"VCPU": 1}})], True, INCOMPLETE)
    assert changed.value.uuid == rp_uuid
    assert _usage(db, rp_uuid) == 0


def test_the_database_runs_the_whole_write_again_then_gives_up(db, monkeypatch):
    """[placement] allocation_conflict_retry_count more runs, each from the
    start (the provider read anew), then the conflict is the answer."""
    retried = []
    retrying = Database(db.engine, on_retry=retried.append, conflict_retries=2)
    rp_uuid = add_provider(db, {"VCPU": 2})

    changes = ChangedAfterRead(monkeypatch, times=2)
    _write(retrying, _wanted(new_uuid(), {rp_uuid: {"VCPU": 1}}))
    assert (changes.reads, retried) == (3, ["generation_conflict"] * 2)
    assert _usage(db, rp_uuid) == 1

    retried.clear()
    changes = ChangedAfterRead(monkeypatch, times=3)
    with pytest.raises(ProviderChanged):
        _write(retrying, _wanted(new_uuid(), {rp_uuid: {"VCPU": 1}}))
    assert (changes.reads, retried) == (3, ["generation_conflict"] * 2)
    assert _usage(db, rp_uuid) == 1


def test_a_consumer_generation_the_client_gave_wrong_is_never_retried(db):
    retried = []
    retrying = Database(db.engine, on_retry=retried.append, conflict_retries=5)
    rp_uuid = add_provider(db, {"VCPU": 2})
    consumer_uuid = new_uuid()
    _write(retrying, _wanted(consumer_uuid, {rp_uuid: {"VCPU": 1}}))
    with pytest.raises(ConsumerGenerationConflict):
        _write(retrying, _wanted(consumer_uuid, {rp_uuid: {"VCPU": 2}}, generation=0))
    assert retried == []
