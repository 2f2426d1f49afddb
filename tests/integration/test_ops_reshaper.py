"""The reshape: inventory moves from a root to a child while in use, in one
transaction; its refusals name the provider and the figures."""

from __future__ import annotations

from functools import partial

import pytest

from placement_svc.db.allocations import Wanted
from placement_svc.db.engine import Database
from placement_svc.db.exceptions import ProviderNotFound, UnknownResourceClass
from placement_svc.ops import allocations, inventories, providers
from placement_svc.ops import reshaper as ops
from placement_svc.ops.exceptions import ProviderGenerationMismatch
from tests.integration.conftest import add_provider, new_uuid
from tests.support.races import ChangedAfterRead

INCOMPLETE = ("incomplete-project", "incomplete-user")


def _reshape(db, new_inventories, wanted):
    db.write(
        partial(
            ops.reshape,
            new_inventories=new_inventories,
            wanted=wanted,
            check_generation=True,
            incomplete=INCOMPLETE,
        )
    )


def _owner(consumer_uuid, resources, generation):
    return Wanted(consumer_uuid, resources, "project", "user", generation)


def test_inventory_in_use_moves_from_the_root_to_a_child(db):
    root_uuid = add_provider(db, {"VCPU": 8})
    child = db.write(
        partial(providers.create, name="numa0", uuid=new_uuid(), parent_uuid=root_uuid)
    )
    consumer_uuid = new_uuid()
    db.write(
        partial(
            allocations.write,
            wanted=[_owner(consumer_uuid, {root_uuid: {"VCPU": 2}}, None)],
            check_generation=True,
            incomplete=INCOMPLETE,
        )
    )
    _reshape(
        db,
        {
            root_uuid: {"resource_provider_generation": 1, "inventories": {}},
            child.uuid: {"resource_provider_generation": 0, "inventories": {"VCPU": {"total": 8}}},
        },
        [_owner(consumer_uuid, {child.uuid: {"VCPU": 2}}, 1)],
    )
    assert db.read(partial(inventories.list_for, uuid=root_uuid)) == (2, [])
    generation, found = db.read(partial(inventories.list_for, uuid=child.uuid))
    assert (generation, [inv.resource_class for inv in found]) == (3, ["VCPU"])
    _consumer, held = db.read(partial(allocations.for_consumer, consumer_uuid=consumer_uuid))
    assert [(a.provider_uuid, a.used) for a in held] == [(child.uuid, 2)]


def test_the_inventories_providers_are_checked_first(db):
    rp_uuid = add_provider(db)
    missing = new_uuid()
    with pytest.raises(ProviderNotFound) as not_found:
        _reshape(db, {missing: {"resource_provider_generation": 0, "inventories": {}}}, [])
    assert not_found.value.uuid == missing
    with pytest.raises(ProviderGenerationMismatch) as stale:
        _reshape(db, {rp_uuid: {"resource_provider_generation": 7, "inventories": {}}}, [])
    assert (stale.value.uuid, stale.value.actual, stale.value.given) == (rp_uuid, 0, 7)


def test_an_unknown_class_is_reported_by_name(db):
    rp_uuid = add_provider(db)
    body = {
        rp_uuid: {"resource_provider_generation": 0, "inventories": {"CUSTOM_NONE": {"total": 1}}}
    }
    with pytest.raises(UnknownResourceClass) as unknown:
        _reshape(db, body, [])
    assert unknown.value.names == ("CUSTOM_NONE",)


def test_a_provider_changed_meanwhile_runs_the_reshape_again_and_the_client_is_told(
    db, monkeypatch
):
    """The inventories' providers are read, checked against the client's
    generations, then written at the generation read: another writer in
    between makes the reshape run again, and the second run finds the
    client's generation stale (a 409 of the client's, not retried)."""
    retried = []
    retrying = Database(db.engine, on_retry=retried.append, conflict_retries=3)
    rp_uuid = add_provider(db)
    body = {rp_uuid: {"resource_provider_generation": 0, "inventories": {"VCPU": {"total": 4}}}}
    changes = ChangedAfterRead(monkeypatch, times=1, reader="query")
    with pytest.raises(ProviderGenerationMismatch) as stale:
        _reshape(retrying, body, [])
    assert (stale.value.actual, stale.value.given) == (1, 0)
    assert changes.left == 0
    assert retried == ["generation_conflict"]
    assert db.read(partial(inventories.list_for, uuid=rp_uuid))[1] == []  # nothing written
