"""Aggregate units of work: the provider first, then the body, then its generation."""

from __future__ import annotations

from functools import partial

import jsonschema
import pytest

from placement_svc import microversion as mv
from placement_svc.db.exceptions import ProviderNotFound
from placement_svc.ops import aggregates as ops
from placement_svc.ops.exceptions import ProviderGenerationMismatch
from tests.integration.conftest import add_provider, new_uuid


def test_replace_then_list(db):
    rp_uuid = add_provider(db)
    aggs = sorted([new_uuid(), new_uuid()])
    body = {"aggregates": aggs, "resource_provider_generation": 0}
    assert db.write(partial(ops.replace, uuid=rp_uuid, data=body, version=mv.MAX_VERSION)) == (
        1,
        aggs,
    )
    assert db.read(partial(ops.list_for, uuid=rp_uuid)) == (1, aggs)


def test_before_1_19_the_bare_list_still_moves_the_generation(db):
    rp_uuid = add_provider(db)
    agg = new_uuid()
    generation, _ = db.write(partial(ops.replace, uuid=rp_uuid, data=[agg], version=mv.AGGREGATES))
    assert generation == 1


def test_a_missing_provider_comes_before_a_bad_body(db):
    with pytest.raises(ProviderNotFound):
        db.write(partial(ops.replace, uuid=new_uuid(), data="junk", version=mv.MAX_VERSION))
    rp_uuid = add_provider(db)
    with pytest.raises(jsonschema.ValidationError):
        db.write(partial(ops.replace, uuid=rp_uuid, data="junk", version=mv.MAX_VERSION))


def test_a_stale_generation_is_a_mismatch_with_both_figures(db):
    rp_uuid = add_provider(db)
    body = {"aggregates": [], "resource_provider_generation": 5}
    with pytest.raises(ProviderGenerationMismatch) as stale:
        db.write(partial(ops.replace, uuid=rp_uuid, data=body, version=mv.MAX_VERSION))
    assert (stale.value.uuid, stale.value.actual, stale.value.given) == (rp_uuid, 0, 5)
