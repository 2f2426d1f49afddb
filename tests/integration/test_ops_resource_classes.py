"""Resource class units of work: custom classes are the client's, standard ones
read-only, and each refusal is a fact carrying the name it is about."""

from __future__ import annotations

from functools import partial

import pytest

from placement_svc.db.exceptions import (
    ResourceClassExists,
    ResourceClassInUse,
    ResourceClassNotFound,
)
from placement_svc.ops import resource_classes as ops
from placement_svc.ops.exceptions import StandardResourceClass
from tests.integration.conftest import add_provider


def test_ensure_creates_a_custom_class_once(db):
    rc, created = db.write(partial(ops.ensure, name="CUSTOM_GOLD"))
    assert (rc.name, created) == ("CUSTOM_GOLD", True)
    again, created = db.write(partial(ops.ensure, name="CUSTOM_GOLD"))
    assert (again.id, created) == (rc.id, False)


def test_create_refuses_a_name_that_exists(db):
    db.write(partial(ops.create, name="CUSTOM_GOLD"))
    with pytest.raises(ResourceClassExists) as caught:
        db.write(partial(ops.create, name="CUSTOM_GOLD"))
    assert caught.value.name == "CUSTOM_GOLD"


def test_rename_refuses_a_standard_class_and_a_taken_name(db):
    with pytest.raises(StandardResourceClass) as caught:
        db.write(partial(ops.rename, name="VCPU", new_name="CUSTOM_CPU"))
    assert caught.value.name == "VCPU"
    db.write(partial(ops.create, name="CUSTOM_A"))
    db.write(partial(ops.create, name="CUSTOM_B"))
    with pytest.raises(ResourceClassExists) as caught:
        db.write(partial(ops.rename, name="CUSTOM_A", new_name="CUSTOM_B"))
    assert caught.value.name == "CUSTOM_B"
    assert db.write(partial(ops.rename, name="CUSTOM_A", new_name="CUSTOM_C")).name == "CUSTOM_C"


def test_a_missing_class_is_reported_before_whether_it_is_standard(db):
    with pytest.raises(ResourceClassNotFound) as caught:
        db.write(partial(ops.delete, name="CUSTOM_NONE"))
    assert caught.value.name == "CUSTOM_NONE"


def test_delete_refuses_a_standard_class_and_one_in_use(db):
    with pytest.raises(StandardResourceClass):
        db.write(partial(ops.delete, name="VCPU"))
    db.write(partial(ops.create, name="CUSTOM_GOLD"))
    add_provider(db, {"CUSTOM_GOLD": 1})
    with pytest.raises(ResourceClassInUse) as caught:
        db.write(partial(ops.delete, name="CUSTOM_GOLD"))
    assert caught.value.name == "CUSTOM_GOLD"
