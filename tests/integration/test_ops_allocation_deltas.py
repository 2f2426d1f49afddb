"""Allocation deltas (1.50) as a unit of work, on every backend: amounts
added and taken away against the consumer's allocations as they are."""

from __future__ import annotations

from functools import partial

import pytest
import sqlalchemy as sa

from placement_svc.db import allocations as store
from placement_svc.db import consumers, tables
from placement_svc.db.engine import Database
from placement_svc.db.exceptions import (
    AllocationProviderNotFound,
    CapacityExceeded,
    ConsumerGenerationConflict,
)
from placement_svc.ops import allocations as ops
from placement_svc.ops.exceptions import OwnerMissing, RemovingTooMuch
from tests.integration.conftest import add_provider, new_uuid

INCOMPLETE = ("incomplete-project", "incomplete-user")


def _change(db, consumer_uuid, **delta):
    return db.write(
        partial(
            ops.change,
            consumer_uuid=consumer_uuid,
            delta=ops.Delta(**{"add": {}, "remove": {}, **delta}),
            incomplete=INCOMPLETE,
        )
    )


def _held(found) -> dict:
    return {(a.provider_uuid, a.resource_class): a.used for a in found}


def test_adds_and_removes_apply_to_what_is_held(db):
    rp = add_provider(db, {"VCPU": 16, "MEMORY_MB": 4096})
    consumer_uuid = new_uuid()
    consumer, found = _change(
        db, consumer_uuid, add={rp: {"VCPU": 2, "MEMORY_MB": 512}}, project_id="p", user_id="u"
    )
    assert _held(found) == {(rp, "VCPU"): 2, (rp, "MEMORY_MB"): 512}
    first = consumer.generation
    consumer, found = _change(
        db, consumer_uuid, add={rp: {"VCPU": 3}}, remove={rp: {"MEMORY_MB": 12}}
    )
    assert _held(found) == {(rp, "VCPU"): 5, (rp, "MEMORY_MB"): 500}
    assert consumer.generation == first + 1
    assert (consumer.project_id, consumer.user_id) == ("p", "u")  # kept when not given
    consumer, found = _change(db, consumer_uuid, remove={rp: {"MEMORY_MB": 500}})
    assert _held(found) == {(rp, "VCPU"): 5}  # at zero, the allocation goes
    consumer, found = _change(db, consumer_uuid, remove={rp: {"VCPU": 5}})
    assert (consumer, found) == (None, [])  # nothing left: the consumer goes, as PUT {} does
    assert db.read(partial(consumers.find, uuid=consumer_uuid)) is None


def test_removing_more_than_held_names_provider_class_and_figures(db):
    rp = add_provider(db, {"VCPU": 16})
    consumer_uuid = new_uuid()
    _change(db, consumer_uuid, add={rp: {"VCPU": 2}}, project_id="p", user_id="u")
    with pytest.raises(RemovingTooMuch) as caught:
        _change(db, consumer_uuid, add={rp: {"VCPU": 1}}, remove={rp: {"VCPU": 4}})
    assert (caught.value.provider_uuid, caught.value.resource_class) == (rp, "VCPU")
    assert (caught.value.removing, caught.value.held) == (4, 3)  # the add counts first
    _consumer, found = db.read(partial(ops.for_consumer, consumer_uuid=consumer_uuid))
    assert _held(found) == {(rp, "VCPU"): 2}  # nothing written


def test_a_new_consumer_needs_an_owner(db):
    rp = add_provider(db, {"VCPU": 16})
    with pytest.raises(OwnerMissing):
        _change(db, new_uuid(), add={rp: {"VCPU": 1}})


def test_a_generation_given_is_checked_and_absent_is_not(db):
    rp = add_provider(db, {"VCPU": 16})
    consumer_uuid = new_uuid()
    with pytest.raises(ConsumerGenerationConflict):
        _change(
            db, consumer_uuid, add={rp: {"VCPU": 1}}, project_id="p", user_id="u",
            check_generation=True, generation=0,
        )  # fmt: skip
    consumer, _found = _change(
        db, consumer_uuid, add={rp: {"VCPU": 1}}, project_id="p", user_id="u",
        check_generation=True, generation=None,
    )  # fmt: skip
    with pytest.raises(ConsumerGenerationConflict) as caught:
        _change(
            db, consumer_uuid, add={rp: {"VCPU": 1}}, check_generation=True,
            generation=consumer.generation + 1,
        )  # fmt: skip
    assert caught.value.expected == consumer.generation
    consumer, _found = _change(
        db, consumer_uuid, add={rp: {"VCPU": 1}}, check_generation=True,
        generation=consumer.generation,
    )  # fmt: skip


def test_capacity_and_providers_are_checked_as_put_checks_them(db):
    rp = add_provider(db, {"VCPU": 4})
    _change(db, new_uuid(), add={rp: {"VCPU": 3}}, project_id="p", user_id="u")
    consumer_uuid = new_uuid()
    with pytest.raises(CapacityExceeded):
        _change(db, consumer_uuid, add={rp: {"VCPU": 2}}, project_id="p", user_id="u")
    with pytest.raises(AllocationProviderNotFound):
        _change(db, consumer_uuid, add={new_uuid(): {"VCPU": 1}}, project_id="p", user_id="u")


def test_a_consumer_changed_between_read_and_write_is_run_again(db, monkeypatch):
    """Another writer moves the consumer's generation right after the delta
    reads its allocations: the write's check fails, the whole unit of work runs again
    (ConsumerMoved is retried), and both changes hold."""
    rp = add_provider(db, {"VCPU": 16})
    consumer_uuid = new_uuid()
    _change(db, consumer_uuid, add={rp: {"VCPU": 2}}, project_id="p", user_id="u")
    real_read, runs = store.for_consumer, []

    def other_writer(conn, uuid):  # one more VCPU, and the consumer's generation moved
        conn.execute(
            sa.update(tables.allocations)
            .where(tables.allocations.c.consumer_id == uuid)
            .values(used=tables.allocations.c.used + 1)
        )
        conn.execute(
            sa.update(tables.consumers)
            .where(tables.consumers.c.uuid == uuid)
            .values(generation=tables.consumers.c.generation + 1)
        )

    real_lock = consumers.lock

    def lock_after_the_other_writer(conn, uuid):
        # The run our rollback ends is run again and finds the other
        # writer's change there first (the rollback took it away with ours:
        # it is made again, as committed).
        if runs:
            other_writer(conn, uuid)
        real_lock(conn, uuid)

    def read_then_race(conn, uuid):  # the other writer commits right after our read
        consumer, found = real_read(conn, uuid)
        runs.append(consumer.generation)
        if len(runs) == 1:
            other_writer(conn, uuid)
        return consumer, found

    monkeypatch.setattr(consumers, "lock", lock_after_the_other_writer)
    monkeypatch.setattr(store, "for_consumer", read_then_race)
    retried: list[str] = []
    retrying = Database(db.engine, on_retry=retried.append, conflict_retries=2)
    consumer, found = _change(retrying, consumer_uuid, add={rp: {"VCPU": 1}})
    assert retried == ["generation_conflict"]
    assert len(runs) == 2 and runs[1] == runs[0] + 1
    assert _held(found) == {(rp, "VCPU"): 4}  # 2, the other writer's 1, ours 1
    assert consumer.generation == runs[1] + 1
