"""GET /resource_providers writes its list as JSON bytes itself
(api/resource_providers.list_json): the same JSON as the bodies every other
read of a provider renders (``representer``), at every version, whatever the
names and the mount prefix hold."""

from __future__ import annotations

import datetime
import json
from types import SimpleNamespace

import pytest

from placement_svc import microversion as mv
from placement_svc.api import resource_providers
from placement_svc.db.providers import ListedProvider, Provider
from placement_svc.http import answering
from placement_svc.ops import providers as ops_providers

NAMES = [
    "plain",
    'a "quoted" name',
    "back\\slash",
    "per%cent %s %d %%",
    "tab\tnew\nline\x00nul\x1f",
    "ünïcødé 名前 😀",
    "</script>",
]
PREFIXES = ["", "/placement", "/p%20lace%s", '/we"ird\\']


def _request(version: str, prefix: str) -> SimpleNamespace:
    major, minor = version.split(".")
    return SimpleNamespace(
        context=SimpleNamespace(
            placement=SimpleNamespace(version=mv.Version(int(major), int(minor)))
        ),
        root_path=prefix,
    )


def _rows(providers: list[Provider]) -> list[ListedProvider]:
    """The rows a list reads of these providers."""
    return [
        ListedProvider(
            p.id, f"{p.uuid}|{p.parent_uuid or ''}|{p.root_uuid}", p.name, p.generation, None
        )
        for p in providers
    ]


def test_a_row_is_the_provider_again():
    assert [_bodied(ops_providers.ListedProvider._make(row)) for row in _rows(_providers())] == [
        _bodied(p) for p in _providers()
    ]


def _bodied(p) -> tuple:
    return (p.id, p.uuid, p.name, p.generation, p.parent_uuid, p.root_uuid)


def _providers() -> list[Provider]:
    stamp = datetime.datetime(2026, 1, 2, 3, 4, 5)
    made = []
    for index, name in enumerate(NAMES):
        uuid = f"00000000-0000-0000-0000-{index:012d}"
        root = "00000000-0000-0000-0000-000000000000"
        parent = None if index == 0 else root
        made.append(Provider(index + 1, uuid, name, index * 7, None, 1, parent, root, stamp))
    # An adopted upstream database may hold a provider without a generation.
    made.append(Provider(99, "ffffffff-0000-0000-0000-000000000099", "none", None, None, 99, None,
                         "ffffffff-0000-0000-0000-000000000099", None))  # fmt: skip
    return made


@pytest.mark.parametrize("version", ["1.0", "1.1", "1.6", "1.11", "1.14", "1.39", "1.45"])
@pytest.mark.parametrize("prefix", PREFIXES)
def test_the_list_is_the_bodies_representer_makes(version, prefix):
    req = _request(version, prefix)
    found = _providers()
    written = resource_providers.list_json(req, _rows(found))
    body_of = resource_providers.representer(req)
    assert json.loads(written) == {"resource_providers": [body_of(p) for p in found]}


def test_keys_come_in_the_order_of_the_single_body():
    req = _request("1.39", "/placement")
    provider = _providers()[1]
    written = json.loads(resource_providers.list_json(req, _rows([provider])))[
        "resource_providers"
    ][0]
    assert list(written) == list(resource_providers.representer(req)(provider))
    assert written["links"][0] == {
        "rel": "self",
        "href": "/placement/resource_providers/00000000-0000-0000-0000-000000000001",
    }
    assert written["links"][-1]["href"].endswith("000000000001/allocations")


def test_an_empty_list():
    assert resource_providers.list_json(_request("1.39", ""), []) == b'{"resource_providers":[]}'


def test_a_name_utf8_cannot_hold_is_written_as_the_bodies_are():
    req = _request("1.39", "")
    found = [*_providers()[:2], _providers()[2]._replace(name="lone \ud800 surrogate")]
    body_of = resource_providers.representer(req)
    written = resource_providers.list_json(req, _rows(found))
    assert written == answering.dumps({"resource_providers": [body_of(p) for p in found]})
    assert json.loads(written)["resource_providers"][2]["name"] == "lone \ud800 surrogate"


def test_what_is_kept_between_lists_is_a_function_of_the_uuids_alone():
    req = _request("1.39", "/placement")
    body_of = resource_providers.representer(req)
    found = _providers()
    resource_providers.list_json(req, _rows(found))  # keeps each provider's place
    moved = [
        p._replace(name=f"{p.name} renamed", generation=(p.generation or 0) + 1) for p in found
    ]
    moved[3] = moved[3]._replace(parent_uuid=found[1].uuid)  # re-parented
    written = resource_providers.list_json(req, _rows(moved))
    assert json.loads(written) == {"resource_providers": [body_of(p) for p in moved]}


def test_the_kept_places_are_bounded(monkeypatch):
    monkeypatch.setattr(resource_providers, "_PLACES", {})
    monkeypatch.setattr(resource_providers, "PLACES_KEPT", 3)
    monkeypatch.setattr(resource_providers, "FORMS_KEPT", 2)
    found = _providers()
    for prefix in ("", "/a", "/b"):
        resource_providers.list_json(_request("1.39", prefix), _rows(found))
    kept = resource_providers._PLACES
    assert len(kept) == 1  # a third form: the two kept were dropped
    (places,) = kept.values()
    assert len(places) == len(found)
    resource_providers.list_json(_request("1.39", "/b"), _rows(found[:1]))
    assert len(places) == 1  # past PLACES_KEPT: started over


def _embedded(found: list[Provider]):
    from placement_svc.db.inventories import Inventory
    from placement_svc.ops.providers import Embedded

    first, second = found[0].id, found[1].id
    return Embedded(
        inventories={
            first: [Inventory("DISK_GB", 100, 10, 1, 100, 1, 1.5)],
            second: [Inventory("VCPU", 8, 0, 1, 8, 1, 16.0), Inventory("VGPU", 4, 0, 1, 4, 2, 1.0)],
        },
        traits={first: ["CUSTOM_ÜN", "HW_CPU_X86_AVX2"]},
        aggregates={second: ["00000000-0000-0000-0000-0000000000aa"]},
        usages={first: {"DISK_GB": 40}, second: {"VCPU": 3, "VGPU": 0}},
    )


@pytest.mark.parametrize("prefix", PREFIXES)
def test_with_include_the_list_is_the_bodies_representer_makes(prefix):
    req = _request("1.45", prefix)
    found = _providers()
    embedded = _embedded(found)
    written = resource_providers.list_json(req, _rows(found), embedded)
    body_of = resource_providers.representer(req)
    expected = {"resource_providers": [body_of(p, embedded) for p in found]}
    assert written == answering.dumps(expected)  # byte for byte, key order included
    assert json.loads(written)["resource_providers"][-1]["traits"] == {
        "traits": [],
        "resource_provider_generation": None,
    }


def test_with_include_a_name_no_utf8_holds_falls_back():
    req = _request("1.45", "")
    found = _providers()
    found[0] = found[0]._replace(name="lone \ud800 surrogate")
    embedded = _embedded(found)
    written = resource_providers.list_json(req, _rows(found), embedded)
    body_of = resource_providers.representer(req)
    expected = {"resource_providers": [body_of(p, embedded) for p in found]}
    assert written == answering.dumps(expected)
