"""Usage units of work: a provider's per class, a project's per class or type."""

from __future__ import annotations

from functools import partial

import pytest
from microversion_parse import Version

from placement_svc import microversion as mv
from placement_svc.db.allocations import Wanted
from placement_svc.db.exceptions import ProviderNotFound
from placement_svc.ops import allocations, usages
from tests.integration.conftest import add_provider, new_uuid


def _allocate(db, rp_uuid, resources, consumer_type=None):
    wanted = Wanted(
        new_uuid(),
        {rp_uuid: resources},
        project_id="project",
        user_id="user",
        consumer_type=consumer_type,
    )
    db.write(
        partial(allocations.write, wanted=[wanted], check_generation=False, incomplete=("p", "u"))
    )


def test_a_provider_usage_lists_every_class_it_has_inventory_of(db):
    rp_uuid = add_provider(db, {"VCPU": 8, "DISK_GB": 10})
    _allocate(db, rp_uuid, {"VCPU": 3})
    assert db.read(partial(usages.for_provider, uuid=rp_uuid)) == (1, {"DISK_GB": 0, "VCPU": 3})
    with pytest.raises(ProviderNotFound):
        db.read(partial(usages.for_provider, uuid=new_uuid()))


def test_project_totals_are_grouped_by_consumer_type_from_1_38(db):
    rp_uuid = add_provider(db, {"VCPU": 8})
    _allocate(db, rp_uuid, {"VCPU": 1}, consumer_type="INSTANCE")
    _allocate(db, rp_uuid, {"VCPU": 2})
    before = db.read(partial(usages.totals, version=Version(1, 37), project_id="project"))
    assert before == {"VCPU": 3}
    by_type = db.read(partial(usages.totals, version=mv.CONSUMER_TYPES, project_id="project"))
    assert by_type == {
        "INSTANCE": {"VCPU": 1, "consumer_count": 1},
        "unknown": {"VCPU": 2, "consumer_count": 1},
    }
