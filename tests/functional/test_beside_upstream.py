"""Upstream OpenStack Placement 16.0.0 and placement-svc serving one
database at once, each answering at 1.39 exactly as it would alone (issue
27, part 2: "Serve beside upstream").

On each backend of the matrix upstream (from PyPI, tests/functional/
upstream.py) makes the schema and fills the cloud through its own API, and
the real ``placement-svc db sync`` adopts the database while upstream goes on
serving it. Then one long-lived placement-svc application (in this process:
it keeps its world, the shape of the cloud that GET /allocation_candidates
searches, between requests) serves the same database beside upstream's
gunicorn process.

Each step is a write through one side, upstream and placement-svc in turn:
an inventory added, changed and removed; a trait set; an aggregate set and
unset; a sharing provider unmade and made again; a provider created, a
child provider created, children moved to another parent (1.37) and
providers deleted; a custom resource class and a custom trait created by one
side and used by the other; claims made through one side and the capacity
they take read through the other; a write with a generation the other side
has just moved past, refused with upstream's 409
``placement.concurrent_update``. Before each write placement-svc's world is
warm (a candidates read); right after it, with no wait for the world's
maximum age, the same reads go to both sides: allocation candidates at 1.39
(shared, granular with required traits, member_of, in_tree, root_required,
forbidden traits, the new names) and at 1.29 and 1.25, provider lists
filtered by resources, traits and trees, every provider with its
inventories, traits, aggregates and usages, the consumers' allocations and
the projects' usages. Each answer of placement-svc is upstream's: the same
status and the same JSON (lists whose order neither fixes compared as
sorted lists; an error's request id aside). Every difference is kept,
named by its step and request, and all are reported at once.

Then ``placement-svc db hand-back`` gives the database back while upstream
serves on, alone, and upstream answers what both answered last.
"""

from __future__ import annotations

import contextlib
import uuid
from collections.abc import Iterator

import httpx
import pytest

from tests.functional.test_adopt_upstream import (
    U,
    cli,
    client,
    fill,
    normalised,
    ok,
    ours,
    reads,
    same_reads,
)
from tests.support import databases, upstream

pytestmark = pytest.mark.slow

# fill()'s names (U), and those the steps add.
N = {
    **U,
    **{
        name: str(uuid.uuid5(uuid.NAMESPACE_DNS, f"{name}.beside.test"))
        for name in ("numa2", "c5", "c6")
    },
}
PROVIDERS = ("cn1", "numa0", "numa1", "cn2", "ss1", "cn3", "numa2")
CONSUMERS = ("c1", "c2", "c3", "c5", "c6")

# GET /allocation_candidates: (microversion, query).
CANDIDATES = [
    ("1.39", "resources=VCPU:1,DISK_GB:10"),  # from a tree and a sharing provider
    ("1.39", "resources=VCPU:1&resources1=MEMORY_MB:512&group_policy=none"),
    (
        "1.39",
        "resources1=VCPU:1&required1=HW_CPU_X86_AVX2&resources2=DISK_GB:10&group_policy=none",
    ),
    ("1.39", f"resources=VCPU:1&member_of={N['agg1']}"),
    ("1.39", f"resources=VCPU:1,MEMORY_MB:256&member_of=!{N['agg2']}"),
    ("1.39", f"resources=VCPU:1&in_tree={N['cn1']}"),
    ("1.39", "resources=VCPU:2&root_required=CUSTOM_GOLD"),
    # Forbidden traits in a numbered group: in the unnumbered one upstream
    # answers 500 on PostgreSQL while no provider shares (it looks the
    # traits up by name where it means by id).
    ("1.39", "resources1=VCPU:1&required1=!HW_CPU_X86_AVX2"),
    ("1.39", "resources=CUSTOM_MAGIC:1,VCPU:1"),
    ("1.39", "resources=DISK_GB:100"),
    # Names that one side creates and the other uses: a 400 until they exist
    # (one unknown name a query: which one upstream names first is not what
    # this test is about).
    ("1.39", "resources=CUSTOM_FRESH:1"),
    ("1.39", "resources=VCPU:1&required=CUSTOM_SHINY"),
    ("1.39", "resources=CUSTOM_OURS:1,VCPU:1"),
    ("1.39", "resources1=VCPU:1&required1=!CUSTOM_OURS"),
    ("1.29", "resources=VCPU:1,DISK_GB:10"),
    ("1.25", "resources1=VCPU:1&resources2=DISK_GB:10&group_policy=isolate"),
]
LISTS = [
    "/resource_providers",
    "/resource_providers?resources=VCPU:1",
    "/resource_providers?resources=VCPU:4,MEMORY_MB:512",
    f"/resource_providers?resources=DISK_GB:10&member_of={N['agg1']}",
    "/resource_providers?resources=CUSTOM_FRESH:1",
    "/resource_providers?required=HW_CPU_X86_AVX2",
    f"/resource_providers?in_tree={N['cn1']}",
    "/traits?name=startswith:CUSTOM",
    "/resource_classes",
]
PROVIDER_TAILS = ("", "/inventories", "/traits", "/aggregates", "/usages")


def answers(http: httpx.Client) -> dict[str, tuple[int, object]]:
    """What one side answers to every read: request -> status and JSON."""
    requests = [(version, f"/allocation_candidates?{query}") for version, query in CANDIDATES]
    requests += [("1.39", path) for path in LISTS]
    for name in PROVIDERS:
        requests += [("1.39", f"/resource_providers/{N[name]}{tail}") for tail in PROVIDER_TAILS]
    requests += [("1.39", f"/allocations/{N[consumer]}") for consumer in CONSUMERS]
    # At 1.37: from 1.38 upstream answers these with 500 on PostgreSQL.
    requests += [("1.37", f"/usages?project_id={N[project]}") for project in ("p1", "p2")]
    found = {}
    for version, path in requests:
        answer = http.get(path, headers={"openstack-api-version": f"placement {version}"})
        found[f"GET {path} at {version}"] = (answer.status_code, comparable(answer.json()))
    return found


def comparable(body):
    """The JSON, lists whose order neither side fixes sorted, an error's
    request id (one per request) left out."""
    if isinstance(body, dict) and isinstance(body.get("errors"), list):
        body = {
            "errors": [
                {k: v for k, v in error.items() if k != "request_id"} for error in body["errors"]
            ]
        }
    return normalised(body)


class Beside:
    """Upstream and placement-svc over one database, compared after each step."""

    def __init__(self, theirs: httpx.Client, mine: httpx.Client):
        self.theirs, self.mine = theirs, mine
        self.differences: list[str] = []
        self.last: dict[str, tuple[int, object]] = {}

    @contextlib.contextmanager
    def step(self, name: str) -> Iterator[None]:
        """A step: placement-svc's world warmed, the step's writes, then
        every read through both sides at once, each answer compared."""
        version, query = CANDIDATES[0]
        warm = self.mine.get(
            f"/allocation_candidates?{query}",
            headers={"openstack-api-version": f"placement {version}"},
        )
        assert warm.status_code == 200, (name, warm.text)
        yield
        self.compare(name)

    def compare(self, name: str) -> None:
        expected, found = answers(self.theirs), answers(self.mine)
        assert expected.keys() == found.keys()
        for request, answer in expected.items():
            if found[request] != answer:
                self.differences.append(
                    f"{name}: {request}\n  upstream:      {answer}\n"
                    f"  placement-svc: {found[request]}"
                )
        self.last = expected


# Writes, through either side (``http``), by the names of N.


def generation(http: httpx.Client, name: str) -> int:
    return ok(http.get(f"/resource_providers/{N[name]}"))["generation"]


def put_inventory(http, name: str, resource_class: str, **fields) -> None:
    body = {"resource_provider_generation": generation(http, name), **fields}
    ok(http.put(f"/resource_providers/{N[name]}/inventories/{resource_class}", json=body))


def add_inventory(http, name: str, resource_class: str, **fields) -> None:
    body = {
        "resource_provider_generation": generation(http, name),
        "resource_class": resource_class,
        **fields,
    }
    ok(http.post(f"/resource_providers/{N[name]}/inventories", json=body))


def delete_inventory(http, name: str, resource_class: str) -> None:
    ok(http.delete(f"/resource_providers/{N[name]}/inventories/{resource_class}"))


def set_traits(http, name: str, traits: list[str], at: int | None = None) -> httpx.Response:
    body = {
        "resource_provider_generation": generation(http, name) if at is None else at,
        "traits": traits,
    }
    return http.put(f"/resource_providers/{N[name]}/traits", json=body)


def set_aggregates(http, name: str, aggregates: list[str], at: int | None = None):
    body = {
        "resource_provider_generation": generation(http, name) if at is None else at,
        "aggregates": [N[a] for a in aggregates],
    }
    return http.put(f"/resource_providers/{N[name]}/aggregates", json=body)


def create(http, name: str, parent: str | None = None) -> None:
    body = {"name": name, "uuid": N[name]}
    if parent:
        body["parent_provider_uuid"] = N[parent]
    ok(http.post("/resource_providers", json=body))


def move(http, name: str, parent: str) -> None:
    """A provider to another parent, in another tree (1.37)."""
    body = {"name": name, "parent_provider_uuid": N[parent]}
    ok(http.put(f"/resource_providers/{N[name]}", json=body))


def claim(http, consumer: str, where: dict, project: str, user: str, at: int | None):
    body = {
        "allocations": {N[rp]: {"resources": resources} for rp, resources in where.items()},
        "project_id": N[project],
        "user_id": N[user],
        "consumer_generation": at,
        "consumer_type": "INSTANCE",
    }
    return http.put(f"/allocations/{N[consumer]}", json=body)


def conflict(answer: httpx.Response) -> str:
    """The error code of a 409."""
    assert answer.status_code == 409, (answer.request.url, answer.text)
    return answer.json()["errors"][0]["code"]


def steps(beside: Beside) -> None:
    """Each write through one side, upstream and placement-svc in turn."""
    theirs, mine = beside.theirs, beside.mine
    with beside.step("upstream adds an inventory (MEMORY_MB on cn2)"):
        add_inventory(theirs, "cn2", "MEMORY_MB", total=2048)
    with beside.step("placement-svc changes an inventory (numa0's VCPU to 6, ratio 1)"):
        put_inventory(mine, "numa0", "VCPU", total=6, allocation_ratio=1.0)
    with beside.step("upstream sets a trait (HW_CPU_X86_AVX2 on cn2)"):
        ok(set_traits(theirs, "cn2", ["HW_CPU_X86_AVX2"]))
    with beside.step("placement-svc sets an aggregate (cn2 joins agg1, ss1 shares with it)"):
        ok(set_aggregates(mine, "cn2", ["agg1", "agg2"]))
    with beside.step("upstream unmakes a sharing provider (ss1 without its traits)"):
        ok(set_traits(theirs, "ss1", []))
    with beside.step("placement-svc makes it a sharing provider again"):
        ok(set_traits(mine, "ss1", ["MISC_SHARES_VIA_AGGREGATE"]))
    with beside.step("upstream creates a provider (cn3 in agg1, with VCPU and MEMORY_MB)"):
        create(theirs, "cn3")
        add_inventory(theirs, "cn3", "VCPU", total=4)
        add_inventory(theirs, "cn3", "MEMORY_MB", total=1024)
        ok(set_aggregates(theirs, "cn3", ["agg1"]))
    with beside.step("placement-svc creates a child provider (numa2 under cn3)"):
        create(mine, "numa2", parent="cn3")
        add_inventory(mine, "numa2", "VCPU", total=2)
        ok(set_traits(mine, "numa2", ["HW_CPU_X86_AVX2"]))
    with beside.step("upstream moves a child to another tree (numa1 from cn1 to cn3)"):
        move(theirs, "numa1", "cn3")
    with beside.step("placement-svc moves a child to another tree (numa2 from cn3 to cn1)"):
        move(mine, "numa2", "cn1")
    with beside.step("upstream creates a resource class and a trait (CUSTOM_FRESH, CUSTOM_SHINY)"):
        ok(theirs.put("/resource_classes/CUSTOM_FRESH"))
        ok(theirs.put("/traits/CUSTOM_SHINY"))
    with beside.step(
        "placement-svc uses upstream's new names on cn3 and creates its own (CUSTOM_OURS)"
    ):
        add_inventory(mine, "cn3", "CUSTOM_FRESH", total=10)
        ok(set_traits(mine, "cn3", ["CUSTOM_SHINY"]))
        ok(mine.put("/resource_classes/CUSTOM_OURS"))
        ok(mine.put("/traits/CUSTOM_OURS"))
    with beside.step("upstream uses placement-svc's new names (on cn2 and numa0)"):
        add_inventory(theirs, "cn2", "CUSTOM_OURS", total=3)
        ok(set_traits(theirs, "numa0", ["CUSTOM_OURS"]))
    with beside.step("placement-svc claims all of cn3's CUSTOM_FRESH and 3 of its VCPU"):
        ok(claim(mine, "c5", {"cn3": {"VCPU": 3, "CUSTOM_FRESH": 10}}, "p2", "u1", None))
    with beside.step("upstream claims all of cn2's CUSTOM_OURS and moves c2 to cn3"):
        ok(claim(theirs, "c6", {"cn2": {"CUSTOM_OURS": 3}}, "p1", "u1", None))
        c2 = ok(theirs.get(f"/allocations/{N['c2']}"))["consumer_generation"]
        ok(claim(theirs, "c2", {"cn3": {"VCPU": 1}}, "p1", "u2", c2))

    with beside.step("placement-svc writes past a generation upstream holds: 409 there"):
        held = generation(theirs, "cn2")
        ok(set_traits(mine, "cn2", ["HW_CPU_X86_AVX2", "CUSTOM_GOLD"], at=held))
        stale = set_aggregates(theirs, "cn2", ["agg2"], at=held)
        assert conflict(stale) == "placement.concurrent_update", stale.text
        # ... and the same stale write is refused the same way by both sides
        same = set_aggregates(mine, "cn2", ["agg2"], at=held)
        assert (same.status_code, comparable(same.json())) == (409, comparable(stale.json()))
    with beside.step("upstream writes past generations placement-svc holds: 409 here"):
        held = generation(mine, "numa0")
        body = {"resource_provider_generation": held, "total": 7, "allocation_ratio": 1.0}
        path = f"/resource_providers/{N['numa0']}/inventories/VCPU"
        ok(theirs.put(path, json=body))
        stale = mine.put(path, json=body)
        assert conflict(stale) == "placement.concurrent_update", stale.text
        same = theirs.put(path, json=body)
        assert (same.status_code, comparable(same.json())) == (409, comparable(stale.json()))
        # a consumer's generation, too
        c5 = ok(mine.get(f"/allocations/{N['c5']}"))["consumer_generation"]
        ok(claim(theirs, "c5", {"cn3": {"VCPU": 2, "CUSTOM_FRESH": 10}}, "p2", "u1", c5))
        stale = claim(mine, "c5", {"cn3": {"VCPU": 1}}, "p2", "u1", c5)
        assert conflict(stale) == "placement.concurrent_update", stale.text
        same = claim(theirs, "c5", {"cn3": {"VCPU": 1}}, "p2", "u1", c5)
        assert (same.status_code, comparable(same.json())) == (409, comparable(stale.json()))
        new = claim(mine, "c6", {"cn2": {"VCPU": 1}}, "p1", "u1", None)
        assert conflict(new) == "placement.concurrent_update", new.text

    with beside.step("placement-svc removes an inventory (cn2's DISK_GB)"):
        delete_inventory(mine, "cn2", "DISK_GB")
    with beside.step("upstream removes an inventory and unsets an aggregate (cn3, cn2)"):
        delete_inventory(theirs, "cn3", "MEMORY_MB")
        ok(set_aggregates(theirs, "cn2", ["agg2"]))
    with beside.step("placement-svc deletes a provider upstream created (cn3)"):
        ok(mine.delete(f"/allocations/{N['c5']}"))
        ok(mine.delete(f"/allocations/{N['c2']}"))
        move(mine, "numa1", "cn1")
        ok(mine.delete(f"/resource_providers/{N['cn3']}"))
    with beside.step("upstream deletes a provider placement-svc created (numa2)"):
        ok(theirs.delete(f"/resource_providers/{N['numa2']}"))


def test_upstream_and_placement_svc_serve_one_database_at_once(backend, tmp_path):
    with databases.empty_database_url(backend, tmp_path) as url:
        upstream.migrate(url, tmp_path)
        with upstream.serving(url, tmp_path) as base, client(base) as theirs:
            fill(theirs)
            synced = cli("db", "sync", url=url, cwd=tmp_path)
            assert synced.returncode == 0, synced.stderr

            with ours(url) as mine:
                beside = Beside(theirs, mine)
                beside.compare("adopted, before any step")
                steps(beside)
                served = reads(mine)

            back = cli("db", "hand-back", url=url, cwd=tmp_path)
            assert back.returncode == 0, back.stderr
            alone, alone_reads = answers(theirs), reads(theirs)

        assert not beside.differences, "\n".join(beside.differences)
        # upstream alone, still serving: what both answered last
        assert alone == beside.last
        same_reads(served, alone_reads)
