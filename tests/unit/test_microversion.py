"""The microversion table and header negotiation, without a web server."""

from __future__ import annotations

import pytest
from microversion_parse import Version

from placement_svc import microversion as mv

# Each named feature at the version upstream's history gives it.
UPSTREAM_HISTORY = {
    "AGGREGATES": (1, 1),
    "RESOURCE_CLASSES": (1, 2),
    "MEMBER_OF": (1, 3),
    "RESOURCES_FILTER": (1, 4),
    "DELETE_INVENTORIES": (1, 5),
    "TRAITS": (1, 6),
    "RESOURCE_CLASS_PUT_CREATES": (1, 7),
    "ALLOCATION_PROJECT_USER": (1, 8),
    "USAGES": (1, 9),
    "ALLOCATION_CANDIDATES": (1, 10),
    "ALLOCATIONS_LINK": (1, 11),
    "ALLOCATIONS_DICT": (1, 12),
    "POST_ALLOCATIONS": (1, 13),
    "NESTED_PROVIDERS": (1, 14),
    "CACHE_HEADERS": (1, 15),
    "CANDIDATES_LIMIT": (1, 16),
    "CANDIDATES_REQUIRED": (1, 17),
    "PROVIDERS_REQUIRED": (1, 18),
    "AGGREGATE_GENERATION": (1, 19),
    "PROVIDER_POST_RETURNS_BODY": (1, 20),
    "CANDIDATES_MEMBER_OF": (1, 21),
    "FORBIDDEN_TRAITS": (1, 22),
    "ERROR_CODES": (1, 23),
    "MULTI_MEMBER_OF": (1, 24),
    "GRANULAR": (1, 25),
    "RESERVED_EQUALS_TOTAL": (1, 26),
    "ALL_RESOURCES_IN_SUMMARIES": (1, 27),
    "CONSUMER_GENERATION": (1, 28),
    "NESTED_CANDIDATES": (1, 29),
    "RESHAPER": (1, 30),
    "CANDIDATES_IN_TREE": (1, 31),
    "FORBIDDEN_AGGREGATES": (1, 32),
    "STRING_SUFFIXES": (1, 33),
    "MAPPINGS": (1, 34),
    "ROOT_REQUIRED": (1, 35),
    "SAME_SUBTREE": (1, 36),
    "REPARENTING": (1, 37),
    "CONSUMER_TYPES": (1, 38),
    "ANY_TRAITS": (1, 39),
}

# placement-svc's own, above upstream's newest (docs/microversions.rst).
OWN_HISTORY = {
    "ROOT_MEMBER_OF": (1, 40),
    "OPTIONAL_GROUP_POLICY": (1, 41),
    "GRANULAR_ISOLATE": (1, 42),
    "SAME_SUBTREE_APART": (1, 43),
    "CANDIDATES_EXPLAIN": (1, 44),
    "PROVIDER_INCLUDE": (1, 45),
    "BULK_ALLOCATIONS": (1, 46),
    "CONDITIONAL_READS": (1, 47),
    "RANKED_CANDIDATES": (1, 48),
    "TREE_WRITES": (1, 49),
    "ALLOCATION_DELTAS": (1, 50),
    "HOLDS": (1, 51),
}


def _header(value: str) -> dict:
    return {"OpenStack-API-Version": value}


@pytest.mark.parametrize("name, version", sorted(UPSTREAM_HISTORY.items()))
def test_each_feature_is_named_at_its_upstream_version(name, version):
    assert getattr(mv, name) == Version(*version)


@pytest.mark.parametrize("name, version", sorted(OWN_HISTORY.items()))
def test_each_of_our_features_is_named_above_upstreams_newest(name, version):
    assert getattr(mv, name) == Version(*version) > mv.UPSTREAM_MAX_VERSION


def test_every_version_from_1_0_to_1_51_is_served_and_each_has_a_feature():
    assert mv.VERSIONS == [f"1.{minor}" for minor in range(52)]
    named = {tuple(v) for v in [*UPSTREAM_HISTORY.values(), *OWN_HISTORY.values()]}
    assert named == {(1, minor) for minor in range(1, 52)}
    assert (mv.MIN_VERSION, mv.MAX_VERSION) == (Version(1, 0), Version(1, 51))
    assert mv.UPSTREAM_MAX_VERSION == Version(1, 39)


def test_features_compare_as_versions():
    assert Version(1, 15) >= mv.CACHE_HEADERS
    assert not Version(1, 14) >= mv.CACHE_HEADERS
    assert Version(1, 10) > mv.TRAITS  # a tuple comparison, not a string one


def test_no_header_means_the_minimum():
    assert mv.from_headers({}) == Version(1, 0)


def test_latest_means_the_maximum():
    assert mv.from_headers(_header("placement latest")) == Version(1, 51)


def test_with_a_cap_latest_is_the_cap_and_above_it_is_a_406():
    cap = mv.served_up_to("1.39")
    assert mv.from_headers(_header("placement latest"), cap) == Version(1, 39)
    assert mv.from_headers(_header("placement 1.39"), cap) == Version(1, 39)
    with pytest.raises(mv.MicroversionError) as caught:
        mv.from_headers(_header("placement 1.40"), cap)
    assert (caught.value.status, caught.value.message) == (
        406,
        "Invalid microversion: Unacceptable version header: 1.40",
    )


def test_no_cap_is_the_newest():
    assert mv.served_up_to(None) == mv.served_up_to("") == mv.MAX_VERSION


@pytest.mark.parametrize(
    "value, expected",
    [
        ("placement 1.0", (1, 0)),
        ("placement 1.39", (1, 39)),
        ("placement 1.2", (1, 2)),
        ("PLACEMENT 1.6", (1, 6)),
        ("placement  1.6 ", (1, 6)),
        ("placement 1.02", (1, 2)),
        ("compute 2.1, placement 1.17", (1, 17)),
        ("placement 1.17, compute 2.1", (1, 17)),
        ("compute 2.1", (1, 0)),
        ("placement", (1, 0)),
    ],
)
def test_a_served_version_is_read_from_the_header(value, expected):
    assert mv.from_headers(_header(value)) == Version(*expected)


def test_the_header_is_read_from_a_wsgi_environ_too():
    environ = {"HTTP_OPENSTACK_API_VERSION": "placement 1.23", "PATH_INFO": "/"}
    assert mv.from_headers(environ) == Version(1, 23)


@pytest.mark.parametrize("version", ["1.52", "0.9", "2.0", "1.100"])
def test_a_well_formed_version_not_served_is_a_406(version):
    with pytest.raises(mv.MicroversionError) as caught:
        mv.from_headers(_header(f"placement {version}"))
    assert caught.value.status == 406
    assert f"Unacceptable version header: {version}" in caught.value.message


@pytest.mark.parametrize("version", ["pony.horse", "1.2.3", "1.", "LATEST", "one"])
def test_a_malformed_version_is_a_400(version):
    with pytest.raises(mv.MicroversionError) as caught:
        mv.from_headers(_header(f"placement {version}"))
    assert caught.value.status == 400
    assert caught.value.message == (
        f"Invalid microversion: invalid version string: {version}; expected "
        "'placement X.Y' with a version from 1.0 to 1.51, or 'placement latest'"
    )


def test_the_response_header_names_the_service_and_the_version():
    assert mv.header_value(Version(1, 7)) == "placement 1.7"
    assert mv.header_value(mv.MAX_VERSION) == "placement 1.51"
