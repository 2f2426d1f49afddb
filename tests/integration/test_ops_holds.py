"""Holds (1.51) as units of work, on every backend: a hold counts until it
expires by the database's clock, is gone for every read and write from that
moment, is swept by writes (the named consumer's at once, a bounded number
of others, tombstones kept for late confirms), and a confirm racing its
expiry wins only if the hold is still there after the providers moved."""

from __future__ import annotations

from functools import partial

import pytest
import sqlalchemy as sa

from placement_svc.db import allocations as store
from placement_svc.db import capacity as figures
from placement_svc.db import holds, names, tables
from placement_svc.db.allocations import Wanted
from placement_svc.db.exceptions import CapacityExceeded
from placement_svc.ops import allocations as ops
from placement_svc.ops.exceptions import HoldExpired, NoAllocations
from tests.integration.conftest import add_provider, new_uuid

INCOMPLETE = ("incomplete-project", "incomplete-user")
HOLD = tables.allocation_holds


def _claim(db, consumer_uuid, rp_uuid, amount, hold_ttl=None, generation=None):
    wanted = Wanted(
        consumer_uuid,
        {rp_uuid: {"VCPU": amount}} if amount else {},
        "project",
        "user",
        generation,
        hold_ttl=hold_ttl,
    )
    db.write(partial(ops.write, wanted=[wanted], check_generation=True, incomplete=INCOMPLETE))


def _expire(db, *consumer_uuids):
    """The holds' time has come (a second ago, by the database's clock)."""

    def work(conn):
        conn.execute(
            sa.update(HOLD)
            .where(HOLD.c.consumer_id.in_(consumer_uuids))
            .values(expires_at=holds.now() - 1_000_000)
        )

    db.write(work)


def _usage(db, rp_uuid) -> int:
    def work(conn):
        rp_id = conn.execute(
            sa.select(tables.resource_providers.c.id).where(
                tables.resource_providers.c.uuid == rp_uuid
            )
        ).scalar_one()
        rc_id = names.resource_class_ids(conn, ["VCPU"])["VCPU"]
        found = figures.usage(conn, {rp_id}, {rc_id})
        return sum(found.values())

    return db.read(work)


def _rows(db, table, consumer_uuid) -> int:
    column = table.c.uuid if table is tables.consumers else table.c.consumer_id
    return db.read(
        lambda conn: conn.execute(
            sa.select(sa.func.count()).select_from(table).where(column == consumer_uuid)
        ).scalar()
    )


def test_a_hold_counts_until_it_expires_then_nothing_does(db):
    rp = add_provider(db, {"VCPU": 4})
    held = new_uuid()
    _claim(db, held, rp, 3, hold_ttl=600)
    assert _usage(db, rp) == 3
    with pytest.raises(CapacityExceeded):
        _claim(db, new_uuid(), rp, 2)
    _expire(db, held)
    # Gone for every read at once, though nothing has swept it yet.
    assert _rows(db, tables.allocations, held) == 1
    assert _usage(db, rp) == 0
    assert db.read(partial(ops.for_consumer, consumer_uuid=held)) == (None, [])
    _claim(db, new_uuid(), rp, 4)  # its room is taken, and it is swept by the way
    assert _usage(db, rp) == 4
    assert (_rows(db, tables.allocations, held), _rows(db, tables.consumers, held)) == (0, 0)
    assert _rows(db, HOLD, held) == 1  # the tombstone, for a late confirm


def test_a_late_confirm_is_told_the_hold_expired_swept_or_not(db):
    rp = add_provider(db, {"VCPU": 4})
    held = new_uuid()
    _claim(db, held, rp, 1, hold_ttl=600)
    _expire(db, held)
    confirm = partial(ops.confirm, consumer_uuid=held, check_generation=False, generation=None)
    with pytest.raises(HoldExpired):
        db.write(confirm)
    _claim(db, new_uuid(), rp, 1)  # sweeps it
    with pytest.raises(HoldExpired):
        db.write(confirm)
    with pytest.raises(NoAllocations):
        db.write(partial(ops.confirm, consumer_uuid=new_uuid(), check_generation=False,
                         generation=None))  # fmt: skip


def test_confirm_makes_it_permanent_and_moves_the_generations(db):
    rp = add_provider(db, {"VCPU": 4})
    held = new_uuid()
    _claim(db, held, rp, 2, hold_ttl=600)
    consumer, found = db.read(partial(ops.for_consumer, consumer_uuid=held))
    assert found[0].hold_expires_at is not None
    db.write(partial(ops.confirm, consumer_uuid=held, check_generation=True, generation=1))
    after, found_after = db.read(partial(ops.for_consumer, consumer_uuid=held))
    assert found_after[0].hold_expires_at is None
    assert after.generation == consumer.generation + 1
    assert found_after[0].provider_generation == found[0].provider_generation + 1
    _expire(db, held)  # no hold left to expire
    assert _usage(db, rp) == 2
    db.write(partial(ops.confirm, consumer_uuid=held, check_generation=False, generation=None))
    assert db.read(partial(ops.for_consumer, consumer_uuid=held))[0].generation == after.generation


def test_a_write_without_hold_confirms_and_one_with_hold_extends(db):
    rp = add_provider(db, {"VCPU": 4})
    held = new_uuid()
    _claim(db, held, rp, 1, hold_ttl=10)
    first = db.read(partial(ops.for_consumer, consumer_uuid=held))[1][0].hold_expires_at
    _claim(db, held, rp, 2, hold_ttl=600, generation=1)
    second = db.read(partial(ops.for_consumer, consumer_uuid=held))[1][0].hold_expires_at
    assert second - first >= 500 * 1_000_000
    _claim(db, held, rp, 2, generation=2)
    assert db.read(partial(ops.for_consumer, consumer_uuid=held))[1][0].hold_expires_at is None
    assert _rows(db, HOLD, held) == 0


def test_a_write_of_an_expired_consumer_starts_it_afresh(db):
    rp = add_provider(db, {"VCPU": 4})
    held = new_uuid()
    _claim(db, held, rp, 1, hold_ttl=600)
    _expire(db, held)
    _claim(db, held, rp, 3, generation=None)  # the consumer is new again: null generation
    consumer, found = db.read(partial(ops.for_consumer, consumer_uuid=held))
    assert [(a.used, a.hold_expires_at) for a in found] == [(3, None)]
    assert _rows(db, HOLD, held) == 0


def test_each_write_sweeps_a_bounded_number_of_other_expired_holds(db):
    rp = add_provider(db, {"VCPU": 1000})
    lapsed = [new_uuid() for _ in range(holds.SWEEP_AT_MOST + 5)]
    for consumer_uuid in lapsed:
        _claim(db, consumer_uuid, rp, 1, hold_ttl=600)
    _expire(db, *lapsed)
    _claim(db, new_uuid(), rp, 1)
    left = sum(_rows(db, tables.allocations, c) for c in lapsed)
    assert left == 5
    _claim(db, new_uuid(), rp, 1)
    assert sum(_rows(db, tables.allocations, c) for c in lapsed) == 0
    assert _usage(db, rp) == 2


def test_old_tombstones_go(db):
    rp = add_provider(db, {"VCPU": 10})
    held = new_uuid()
    _claim(db, held, rp, 1, hold_ttl=600)
    _expire(db, held)
    _claim(db, new_uuid(), rp, 1)  # swept: a tombstone stays
    assert _rows(db, HOLD, held) == 1
    db.write(
        lambda conn: conn.execute(
            sa.update(HOLD)
            .where(HOLD.c.consumer_id == held)
            .values(expires_at=holds.now() - (holds.TOMBSTONE_SECONDS + 1) * 1_000_000)
        )
    )
    _claim(db, new_uuid(), rp, 1)
    assert _rows(db, HOLD, held) == 0


def test_a_confirm_after_a_claim_took_the_lapsed_room_loses(db, monkeypatch):
    """The hold lapses while the confirm moves the providers' generations
    (a claim counting its room as free waited for them, or they for it):
    the confirm reads the clock again after that, and is told the hold
    expired: never both the claim and the confirm."""
    rp = add_provider(db, {"VCPU": 4})
    held = new_uuid()
    _claim(db, held, rp, 4, hold_ttl=600)
    real_bump, bumped = store.bump_providers, []

    def bump_then_lapse(conn, touched):
        real_bump(conn, touched)
        bumped.append([p.uuid for p in touched])
        conn.execute(
            sa.update(HOLD).where(HOLD.c.consumer_id == held).values(expires_at=holds.now() - 1)
        )

    monkeypatch.setattr(store, "bump_providers", bump_then_lapse)
    with pytest.raises(HoldExpired):
        db.write(partial(ops.confirm, consumer_uuid=held, check_generation=False, generation=None))
    assert bumped == [[rp]]
    monkeypatch.undo()
    assert db.read(partial(ops.for_consumer, consumer_uuid=held))[1][
        0
    ].hold_expires_at  # rolled back
    _expire(db, held)  # the lapse the confirm saw, committed this time
    _claim(db, new_uuid(), rp, 4)
    assert _usage(db, rp) == 4


def test_held_allocations_read_at_any_version_are_the_rows_of_the_consumer(db):
    rp = add_provider(db, {"VCPU": 4})
    held, kept = new_uuid(), new_uuid()
    _claim(db, held, rp, 1, hold_ttl=600)
    _claim(db, kept, rp, 1)
    found = db.read(lambda conn: store.for_consumers(conn, [held, kept]))
    assert {
        uuid: allocs[0].hold_expires_at is not None for uuid, (_c, allocs) in found.items()
    } == {
        held: True,
        kept: False,
    }


def test_an_expired_hold_keeps_no_provider_or_class_from_being_deleted(db):
    """Its rows point at the provider and the class (foreign keys): they are
    swept first, with the consumer, and the deletions go through."""
    from placement_svc.ops import providers as provider_ops
    from placement_svc.ops import resource_classes as class_ops

    db.write(lambda conn: class_ops.ensure(conn, "CUSTOM_LAPSING"))
    rp = add_provider(db, {"CUSTOM_LAPSING": 4})
    held = new_uuid()
    wanted = Wanted(held, {rp: {"CUSTOM_LAPSING": 1}}, "project", "user", None, hold_ttl=600)
    db.write(partial(ops.write, wanted=[wanted], check_generation=True, incomplete=INCOMPLETE))
    _expire(db, held)
    db.write(partial(provider_ops.delete, uuid=rp))
    db.write(partial(class_ops.delete, name="CUSTOM_LAPSING"))
    assert (_rows(db, tables.allocations, held), _rows(db, tables.consumers, held)) == (0, 0)
