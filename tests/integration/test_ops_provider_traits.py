"""Provider trait units of work: the generation moves only when the set changes."""

from __future__ import annotations

from functools import partial

import pytest

from placement_svc.db.exceptions import ProviderNotFound, UnknownTrait
from placement_svc.ops import provider_traits as ops
from placement_svc.ops.exceptions import ProviderGenerationMismatch
from tests.integration.conftest import add_provider, new_uuid


def _replace(db, rp_uuid, names, seen):
    return db.write(partial(ops.replace, uuid=rp_uuid, trait_names=names, seen=seen))


def test_replace_moves_the_generation_only_on_a_change(db):
    rp_uuid = add_provider(db)
    generation, traits = _replace(db, rp_uuid, ["HW_CPU_X86_AVX", "HW_CPU_X86_AVX2"], 0)
    assert generation == 1
    assert sorted(t.name for t in traits) == ["HW_CPU_X86_AVX", "HW_CPU_X86_AVX2"]
    assert _replace(db, rp_uuid, ["HW_CPU_X86_AVX2", "HW_CPU_X86_AVX"], 1)[0] == 1


def test_the_generation_is_checked_before_the_names(db):
    rp_uuid = add_provider(db)
    with pytest.raises(ProviderGenerationMismatch):
        _replace(db, rp_uuid, ["CUSTOM_NONE"], 3)
    with pytest.raises(UnknownTrait) as unknown:
        _replace(db, rp_uuid, ["CUSTOM_Y", "CUSTOM_X", "HW_CPU_X86_AVX"], 0)
    assert unknown.value.names == ("CUSTOM_X", "CUSTOM_Y")


def test_delete_all_moves_the_generation_only_if_there_were_traits(db):
    rp_uuid = add_provider(db)
    db.write(partial(ops.delete_all, uuid=rp_uuid))
    assert db.read(partial(ops.list_for, uuid=rp_uuid))[0] == 0
    _replace(db, rp_uuid, ["HW_CPU_X86_AVX"], 0)
    db.write(partial(ops.delete_all, uuid=rp_uuid))
    assert db.read(partial(ops.list_for, uuid=rp_uuid)) == (2, [])


def test_a_missing_provider_is_reported(db):
    with pytest.raises(ProviderNotFound):
        db.read(partial(ops.list_for, uuid=new_uuid()))
