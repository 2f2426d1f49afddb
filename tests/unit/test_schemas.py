"""Each schema module says which schema a version gets (``for_version``), and
every schema's validator is built once, when its module loads."""

from __future__ import annotations

import jsonschema
import pytest
from microversion_parse import Version

from placement_svc import microversion as mv
from placement_svc.schemas import (
    aggregate,
    allocation,
    allocation_candidate,
    inventory,
    reshaper,
    resource_class,
    resource_provider,
    trait,
    usage,
)
from placement_svc.schemas.common import Schema, pick

EVERY_VERSION = [Version(1, minor) for minor in range(mv.MAX_VERSION.minor + 1)]
MODULES = [
    aggregate,
    allocation,
    allocation_candidate,
    inventory,
    reshaper,
    resource_class,
    resource_provider,
    trait,
    usage,
]


def _schemas(chosen) -> list:
    return [s for s in (chosen if isinstance(chosen, tuple) else [chosen]) if s is not None]


@pytest.mark.parametrize("module", MODULES, ids=lambda m: m.__name__.rsplit(".", 1)[-1])
def test_every_version_gets_prebuilt_schemas(module):
    for version in EVERY_VERSION:
        for schema in _schemas(module.for_version(version)):
            assert isinstance(schema, Schema)
            assert module.for_version(version) == module.for_version(version)


def test_the_candidates_table_has_every_version_the_parts_change_at():
    for version in EVERY_VERSION[mv.ALLOCATION_CANDIDATES.minor :]:
        assert allocation_candidate.for_version(version) == allocation_candidate._build(version)


def test_provider_list_queries_grow_with_the_filters_in_upstream_order():
    names = {
        v: list(resource_provider.for_version(Version(1, v)).list_query["properties"])
        for v in (0, 3, 4, 14, 18, 39)
    }
    assert names[0] == ["name", "uuid"]
    assert names[4] == ["name", "uuid", "member_of", "resources"]
    assert names[39] == ["name", "uuid", "member_of", "resources", "in_tree", "required"]


def test_allocation_bodies_change_at_their_features():
    assert allocation.for_version(Version(1, 7)).put is allocation.PUT_V1_0
    assert allocation.for_version(mv.ALLOCATION_PROJECT_USER).put is allocation.PUT_V1_8
    assert allocation.for_version(Version(1, 12)).post is None
    assert allocation.for_version(mv.POST_ALLOCATIONS).post is allocation.POST_V1_13
    assert allocation.for_version(mv.ALLOCATION_DELTAS) == (
        allocation.PUT_V1_38,
        allocation.POST_V1_38,
    )
    assert allocation.for_version(mv.HOLDS) == (allocation.PUT_V1_51, allocation.POST_V1_51)


def test_check_raises_what_jsonschema_validate_raises():
    body = {"name": "lower", "extra": 1}
    with pytest.raises(jsonschema.ValidationError) as ours:
        resource_class.NAME_BODY.check(body)
    with pytest.raises(jsonschema.ValidationError) as theirs:
        jsonschema.validate(body, dict(resource_class.NAME_BODY))
    assert ours.value.message == theirs.value.message


def test_body_uuids_follow_upstream_looser_rule():
    aggregate.REPLACE_V1_1.check(["0DC9E3E1A6DE4CD3A7E2D7B1A5FB5E62"])  # no dashes: accepted
    with pytest.raises(jsonschema.ValidationError):
        aggregate.REPLACE_V1_1.check(["not-a-uuid"])


def test_pick_takes_the_last_feature_a_version_has():
    table = [(mv.BASE, "a"), (mv.TRAITS, "b"), (mv.GRANULAR, "c")]
    assert [pick(table, Version(1, m)) for m in (0, 5, 6, 24, 25, 39)] == list("aabbcc")
