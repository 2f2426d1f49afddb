"""Random clouds written with one PUT /resource_provider_trees/{root} per
tree (1.49) are answered as any other, through the application on every
backend of the matrix.

Each world is tests/support/clouds.py's ``random_cloud`` (one to four
trees of up to four providers and up to two sharing providers of DISK_GB,
a root or a child somewhere; inventories with reserved amounts, ratios,
units and used amounts; CUSTOM_ traits; aggregates). A sharing provider
shares with the trees of every provider in one of its aggregates and its
own (the rule candidates/world.py reads from the tables): the world's
``shares_with`` is worked out from the aggregates here, by that rule, so
that the hand-built world and the written one say the same. Every tree is
written with ONE tree PUT through the application; the used amounts are
allocation rows written in SQL (a PUT /allocations would refuse amounts
that break min_unit or step_size, which the random worlds have).

Then random 1.44 queries (``random_request``) are asked, and:

1. GET /allocation_candidates is the brute force of
   tests/unit/test_candidates_merge.py on the hand-built world
   (``Cloud.found``), exactly: the same candidates, none twice; the
   provider summaries carry the capacity ``int((total - reserved) *
   ratio)`` and used amount of every inventory as written, the traits,
   parent and root;
2. GET /allocation_candidates/explain counts those candidates, and the
   trees with candidates are the trees the brute force fills one by one;
3. GET /allocation_candidates/capacity lists exactly those trees; for a
   tree of one provider no sharing provider of a requested class reaches
   (``exact``) the copies are ``floor(free / amount)`` of the inventories
   as written; the total is the sum of the trees'.

Then one tree is written again, changed (inventories, traits, aggregates
and names changed, a provider moved under another parent, a provider added
with a uuid and one without, a leaf without usage deleted): the PUT moves
the generation of each provider it changed by exactly 1 and no other, and
the same application (its kept shape of the cloud, candidates/world.py)
answers the queries by the changed world. A PUT of the old body again is a 409 that writes nothing.

How many queries had candidates, used a sharing provider, and how many
trees were exact, is counted and each count bounded below, so that the
test cannot pass on nothing. A disagreement names the seed and the query.
"""

from __future__ import annotations

import dataclasses
import math
import random
import uuid
from collections import Counter
from typing import Any

import pytest
import sqlalchemy as sa

from placement_svc import app
from placement_svc.candidates.model import Found, Provider
from placement_svc.db import names, tables
from tests.support import databases, fixtures
from tests.support.clouds import (
    AGGREGATES,
    CLASSES,
    TRAITS,
    Cloud,
    ask,
    random_cloud,
    random_inventory,
    random_request,
    uuid_of,
)
from tests.unit.test_candidates_merge import brute_force

TREES = "1.49"
QUERY_VERSION = "1.44"  # random_request's
WORLDS = range(3214, 3222)
SLOW_WORLDS = [*range(3200, 3214), *range(3222, 3258)]
QUERIES_PER_WORLD = 8

RP = tables.resource_providers


class Checked:
    """What was compared, to be bounded below at the end."""

    def __init__(self):
        self.queries = self.with_candidates = self.with_sharing = self.exact_trees = 0
        self.rewrites = self.changed_answers = self.moves = 0


# -- the hand-built world, as it is written ----------------------------------------


def share_by_aggregates(cloud: Cloud) -> None:
    """Each sharing provider shares with its own tree and the tree of every
    provider in one of its aggregates: the rule of the written world."""
    data = cloud.data
    for pid in data.sharing:
        roots = {data.providers[pid].root_id}
        for other, held in data.aggregates.items():
            if held & data.aggregates[pid]:
                roots.add(data.providers[other].root_id)
        data.shares_with[pid] = roots


def tree_of(cloud: Cloud, root: int) -> list[int]:
    """The tree's providers, depth first from the root, children by id: parents
    before children (a provider moved may have a parent of a higher id)."""
    children: dict[int, list[int]] = {}
    for pid, provider in sorted(cloud.data.providers.items()):
        if provider.parent_id is not None:
            children.setdefault(provider.parent_id, []).append(pid)
    order = []

    def visit(pid: int) -> None:
        order.append(pid)
        for child in children.get(pid, ()):
            visit(child)

    visit(root)
    return order


def listed_order(cloud: Cloud, root: int) -> list[str]:
    """The names of the tree as GET /resource_provider_trees lists them:
    depth first from the root, siblings by name."""
    data = cloud.data
    order = []

    def visit(pid: int) -> None:
        order.append(data.names[pid])
        below = [c for c, p in data.providers.items() if p.parent_id == pid]
        for child in sorted(below, key=data.names.__getitem__):
            visit(child)

    visit(root)
    return order


def tree_of_provider(cloud: Cloud, top: int) -> list[int]:
    """``top`` and every provider below it."""
    below = [top]
    for pid in below:
        below += [c for c, p in sorted(cloud.data.providers.items()) if p.parent_id == pid]
    return below


def provider_body(cloud: Cloud, pid: int, generation: int | None) -> dict[str, Any]:
    data = cloud.data
    provider = data.providers[pid]
    parent = data.providers[provider.parent_id].uuid if provider.parent_id else None
    body: dict[str, Any] = {
        "uuid": provider.uuid,
        "name": data.names[pid],
        "parent_provider_uuid": parent,
        "inventories": {
            rc: {
                "total": held.total,
                "reserved": held.reserved,
                "min_unit": held.min_unit,
                "max_unit": held.max_unit,
                "step_size": held.step_size,
                "allocation_ratio": held.allocation_ratio,
            }
            for (holder, rc), held in sorted(data.stock.items())
            if holder == pid
        },
        "traits": sorted(data.traits[pid]),
        "aggregates": sorted(data.aggregates[pid]),
    }
    if generation is not None:
        body["generation"] = generation
    return body


def put_tree(client, root_uuid: str, body: dict[str, Any], expect: int = 200):
    answer = client.put(
        f"/resource_provider_trees/{root_uuid}",
        json=body,
        headers={"openstack-api-version": f"placement {TREES}"},
    )
    assert answer.status_code == expect, answer.text
    return answer.json()


def write_world(client, test_db: databases.TestDatabase, cloud: Cloud) -> dict[str, int]:
    """Every tree with one PUT; the used amounts as allocation rows. The
    generation of every provider, by uuid."""
    data = cloud.data
    generations = {}
    for root in data.roots():
        members = tree_of(cloud, root)
        root_uuid = data.providers[root].uuid
        body = {
            "root": root_uuid,
            "providers": [provider_body(cloud, pid, None) for pid in members],
        }
        answer = put_tree(client, root_uuid, body)
        assert answer["root"] == root_uuid
        written = {p["uuid"]: p for p in answer["providers"]}
        assert set(written) == {data.providers[pid].uuid for pid in members}
        assert [p["name"] for p in answer["providers"]] == listed_order(cloud, root)
        for pid in members:
            got = written[data.providers[pid].uuid]
            assert got["generation"] == 0
            assert got["name"] == data.names[pid]
            assert got["traits"] == sorted(data.traits[pid])
            assert got["aggregates"] == sorted(data.aggregates[pid])
        generations.update({u: p["generation"] for u, p in written.items()})
    used = [(pid, rc, held.used) for (pid, rc), held in sorted(data.stock.items()) if held.used]
    if used:

        def allocate(conn) -> None:
            ids = dict(conn.execute(sa.select(RP.c.uuid, RP.c.id)).all())
            rc_ids = names.resource_class_ids(conn, CLASSES)
            conn.execute(
                sa.insert(tables.allocations),
                [
                    {
                        "resource_provider_id": ids[data.providers[pid].uuid],
                        "resource_class_id": rc_ids[rc],
                        "consumer_id": str(uuid.uuid4()),
                        "used": amount,
                    }
                    for pid, rc, amount in used
                ],
            )

        test_db.db.write(allocate)
    return generations


def clear(test_db: databases.TestDatabase) -> None:
    """Every row a world wrote; the standard names and the custom traits stay."""

    def work(conn) -> None:
        conn.execute(sa.update(RP).values(parent_provider_id=None, root_provider_id=None))
        for table in (
            tables.allocations,
            tables.consumers,
            tables.resource_provider_traits,
            tables.resource_provider_aggregates,
            tables.placement_aggregates,
            tables.inventories,
            RP,
        ):
            conn.execute(sa.delete(table))

    test_db.db.write(work)


# -- the checks ----------------------------------------------------------------------


def key_of(candidate: dict[str, Any], pids: dict[str, int]):
    """An allocation request as brute_force's keys are made."""
    return (
        frozenset(
            (pids[u], frozenset(held["resources"].items()))
            for u, held in candidate["allocations"].items()
        ),
        frozenset(
            (suffix, frozenset(pids[u] for u in uuids))
            for suffix, uuids in candidate["mappings"].items()
        ),
    )


def get(client, path: str) -> dict[str, Any]:
    answer = client.get(path, headers={"openstack-api-version": f"placement {QUERY_VERSION}"})
    assert answer.status_code == 200, (path, answer.text)
    return answer.json()


def check_query(client, cloud: Cloud, qs: str, where: str, checked: Checked) -> set:
    """The checks of one query; the candidates (brute force's keys)."""
    req = ask(qs)
    found: Found = cloud.found(req)
    expected = brute_force(req, found)
    data = cloud.data
    pids = {p.uuid: pid for pid, p in data.providers.items()}
    body = get(client, f"/allocation_candidates?{qs}")
    keys = Counter(key_of(one, pids) for one in body["allocation_requests"])
    twice = [k for k, n in keys.items() if n > 1]
    assert not twice, f"{where}: candidates listed twice: {twice}"
    assert set(keys) == expected, (
        f"{where}: GET /allocation_candidates has {len(keys)} candidates, brute force "
        f"{len(expected)}; only the service's: {sorted(map(str, set(keys) - expected))[:3]}; "
        f"only brute force's: {sorted(map(str, expected - set(keys)))[:3]}"
    )
    checked.queries += 1
    checked.with_candidates += bool(expected)
    checked.with_sharing += any(
        pid in data.sharing for allocations, _mappings in expected for pid, _r in allocations
    )
    check_summaries(cloud, body["provider_summaries"], where)

    # the trees with candidates, the brute force one tree at a time
    filled = {
        root for root in found.roots if brute_force(req, dataclasses.replace(found, roots=[root]))
    }
    explained = get(client, f"/allocation_candidates/explain?{qs}&near_misses=0")
    assert explained["candidates"] == len(expected), (where, explained["candidates"])
    assert explained["trees_with_candidates"] == len(filled), (
        where,
        explained["trees_with_candidates"],
        len(filled),
    )

    counted = get(client, f"/allocation_candidates/capacity?{qs}")
    trees = {pids[tree["root"]["uuid"]]: tree for tree in counted["trees"]}
    assert set(trees) == filled, (where, sorted(trees), sorted(filled))
    assert counted["trees_with_room"] == len(filled), where
    totals: Counter = Counter()
    for group in req.groups.values():
        totals.update(group.resources)
    # The total spends a sharing provider's room once, not once per tree it
    # serves: the sum of the trees' copies, but for those.
    sharing_in_reach = any(
        root in data.shares_with[s] and any((s, rc) in data.stock for rc in totals)
        for s in data.sharing
        for root in trees
        if s != root
    )
    copies_of_trees = sum(tree["copies"] for tree in counted["trees"])
    assert counted["total"] <= copies_of_trees, where
    if not sharing_in_reach:
        assert counted["total"] == copies_of_trees, where
    for root, tree in trees.items():
        assert tree["copies"] >= 1, (where, tree)
        assert tree["root"]["name"] == data.names[root], (where, tree)
        alone = tree_of(cloud, root) == [root]
        reached = any(
            root in data.shares_with[s] and any((s, rc) in data.stock for rc in totals)
            for s in data.sharing
            if s != root
        )
        if not alone or reached or root in data.sharing:
            continue
        # one way to place each copy: the count is exact, and the brute force's
        held = {rc: data.stock[(root, rc)] for rc in totals}
        copies = min(math.floor(held[rc].free / amount) for rc, amount in totals.items())
        assert tree["exact"], (where, tree)
        assert tree["copies"] == copies, (where, tree, copies)
        checked.exact_trees += 1
    return expected


def check_summaries(cloud: Cloud, summaries: dict[str, Any], where: str) -> None:
    data = cloud.data
    pids = {p.uuid: pid for pid, p in data.providers.items()}
    for rp_uuid, summary in summaries.items():
        pid = pids[rp_uuid]
        provider = data.providers[pid]
        held = {rc: stock for (holder, rc), stock in data.stock.items() if holder == pid}
        wanted = {
            rc: {
                "capacity": int((stock.total - stock.reserved) * stock.allocation_ratio),
                "used": stock.used,
            }
            for rc, stock in held.items()
        }
        assert summary["resources"] == wanted, (where, data.names[pid], summary)
        assert sorted(summary["traits"]) == sorted(data.traits[pid]), (where, data.names[pid])
        parent = data.providers[provider.parent_id].uuid if provider.parent_id else None
        assert summary["parent_provider_uuid"] == parent, where
        assert summary["root_provider_uuid"] == data.providers[provider.root_id].uuid, where


# Asked of every world besides the random queries: they often have
# candidates, in trees of one provider too.
SIMPLE = ["resources=VCPU:1", "resources=DISK_GB:1", "resources=VCPU:1,DISK_GB:1"]


def queries(rng: random.Random, cloud: Cloud) -> list[str]:
    """The simple queries, and random ones the parser takes."""
    chosen: list[str] = list(SIMPLE)
    while len(chosen) < len(SIMPLE) + QUERIES_PER_WORLD:
        qs = random_request(rng, cloud)
        try:
            ask(qs)
        except Exception:  # noqa: BLE001 - a combination parse refuses
            continue
        chosen.append(qs)
    return chosen


# -- the rewrite ---------------------------------------------------------------------


def rewrite(rng: random.Random, cloud: Cloud, root: int) -> tuple[dict, set[int], int | None]:
    """Change the tree of ``root`` in ``cloud``: the new body's providers
    (without generations yet), the ids of the providers that existed and
    changed, and the id of the provider to be made without a uuid (its uuid
    is the PUT's to give)."""
    data = cloud.data
    members = tree_of(cloud, root)
    before = {pid: provider_body(cloud, pid, None) for pid in members}
    changed: set[int] = set()
    for pid in members:
        if rng.random() < 0.4:  # an inventory changed, one removed or added
            for rc in CLASSES:
                key = (pid, rc)
                stock = data.stock.get(key)
                if stock is not None and stock.used == 0 and rng.random() < 0.3:
                    del data.stock[key]
                elif stock is not None:
                    total = stock.total + rng.choice([-1, 1, 2]) if stock.total > 1 else 3
                    data.stock[key] = stock._replace(total=total)
                elif rng.random() < 0.5:
                    data.stock[key] = random_inventory(rng)._replace(used=0)
        if rng.random() < 0.3:
            trait = rng.choice(TRAITS)
            data.traits[pid] = data.traits[pid] ^ {trait}
        if rng.random() < 0.25:
            aggregate = rng.choice(AGGREGATES)
            data.aggregates[pid] = data.aggregates[pid] ^ {aggregate}
        if rng.random() < 0.15:
            data.names[pid] = data.names[pid] + "-renamed"
    # a provider moves under another of the tree, now and then
    movable = [pid for pid in members if pid != root]
    moves = 0
    if movable and rng.random() < 0.8:
        moved = rng.choice(movable)
        below = set(tree_of_provider(cloud, moved))
        parents = [
            pid for pid in members if pid not in below and pid != data.providers[moved].parent_id
        ]
        if parents:
            parent = rng.choice(parents)
            data.providers[moved] = data.providers[moved]._replace(parent_id=parent)
            moves += 1
    # a leaf without usage goes, now and then
    leaves = [
        pid
        for pid in members
        if pid != root
        and not any(p.parent_id == pid for p in data.providers.values())
        and not any(h.used for (holder, _rc), h in data.stock.items() if holder == pid)
    ]
    if leaves and rng.random() < 0.5:
        gone = rng.choice(leaves)
        for store in (data.names, data.traits, data.aggregates):
            del store[gone]
        for key in [k for k in data.stock if k[0] == gone]:
            del data.stock[key]
        del data.providers[gone]
        data.sharing.discard(gone)
        data.shares_with.pop(gone, None)
        members.remove(gone)
    # a new child with a uuid, and a new leaf without one
    new_ids = []
    for _ in range(2):
        pid = max(data.providers) + 1
        parent = rng.choice(members)
        data.providers[pid] = Provider(pid, uuid_of(pid), parent, root)
        data.names[pid] = f"N{pid}"
        data.traits[pid] = frozenset(rng.sample(TRAITS, rng.randint(0, 1)))
        data.aggregates[pid] = frozenset(rng.sample(AGGREGATES, rng.randint(0, 1)))
        if rng.random() < 0.7:
            data.stock[(pid, rng.choice(CLASSES))] = random_inventory(rng)._replace(used=0)
        members.append(pid)
        new_ids.append(pid)
    share_by_aggregates(cloud)
    for pid in members:
        if pid in before and provider_body(cloud, pid, None) != before[pid]:
            changed.add(pid)
    return {"members": tree_of(cloud, root), "moves": moves}, changed, new_ids[-1]


def check_rewrite(client, cloud: Cloud, rng: random.Random, generations, where: str) -> int:
    """Rewrite a tree of the world; how many providers it moved."""
    data = cloud.data
    candidates = [r for r in data.roots() if len(tree_of(cloud, r)) > 1 or rng.random() < 0.5]
    root = rng.choice(candidates or data.roots())
    root_uuid = data.providers[root].uuid
    old_members = tree_of(cloud, root)
    old_uuids = {pid: data.providers[pid].uuid for pid in old_members}
    old_body = {
        "root": root_uuid,
        "providers": [
            provider_body(cloud, pid, generations[data.providers[pid].uuid]) for pid in old_members
        ],
    }
    plan, changed, anonymous = rewrite(rng, cloud, root)
    providers = []
    for pid in plan["members"]:
        rp_uuid = data.providers[pid].uuid
        body = provider_body(cloud, pid, generations.get(rp_uuid))
        if pid == anonymous:
            del body["uuid"]
        providers.append(body)
    answer = put_tree(client, root_uuid, {"root": root_uuid, "providers": providers})
    written = {p["name"]: p for p in answer["providers"]}
    assert len(written) == len(plan["members"]), (where, answer)
    assert [p["name"] for p in answer["providers"]] == listed_order(cloud, root), where
    # the provider made without a uuid: the uuid the PUT gave it
    made = written[data.names[anonymous]]
    uuid.UUID(made["uuid"])
    assert made["uuid"] not in {p.uuid for p in data.providers.values()}
    data.providers[anonymous] = data.providers[anonymous]._replace(uuid=made["uuid"])
    for pid in plan["members"]:
        got = written[data.names[pid]]
        assert got["uuid"] == data.providers[pid].uuid, where
        was = generations.get(got["uuid"])
        if was is None:
            assert got["generation"] == 0, (where, got)
        else:
            moved = 1 if pid in changed else 0
            assert got["generation"] == was + moved, (where, data.names[pid], was, got)
        generations[got["uuid"]] = got["generation"]
    # The old body again: every provider it names that changed, or that is
    # gone, is stale (without either, it is the new body less the new
    # providers, a valid PUT).
    deleted = set(old_members) - set(plan["members"])
    if not (changed or deleted):
        return plan["moves"]
    stale = client.put(
        f"/resource_provider_trees/{root_uuid}",
        json=old_body,
        headers={"openstack-api-version": f"placement {TREES}"},
    )
    assert stale.status_code == 409, (where, stale.text)
    error = stale.json()["errors"][0]
    assert error["code"] == "placement.concurrent_update", (where, error)
    for pid in changed:  # each named, with the generation it is at
        rp_uuid = data.providers[pid].uuid
        assert f"{rp_uuid} is at {generations[rp_uuid]}" in error["detail"], (where, error)
    for pid in deleted:
        assert f"{old_uuids[pid]} does not exist" in error["detail"], (where, error)
    after = client.get(
        f"/resource_provider_trees/{root_uuid}",
        headers={"openstack-api-version": f"placement {TREES}"},
    )
    assert after.status_code == 200
    assert after.json() == answer, f"{where}: a refused PUT wrote something"
    return plan["moves"]


@pytest.fixture
def client(test_db):
    application = app.create_app(fixtures.make_conf(), test_db.db)
    with fixtures.api_client(application, headers={"x-auth-token": "admin"}) as client:
        yield client


def run(client, test_db, seeds) -> Checked:
    """Each seed's world written, asked, written again and asked again."""
    checked = Checked()
    for seed in seeds:
        rng = random.Random(seed)
        cloud = random_cloud(rng)
        share_by_aggregates(cloud)
        clear(test_db)
        generations = write_world(client, test_db, cloud)
        asked = queries(rng, cloud)
        before = [
            check_query(client, cloud, qs, f"seed {seed}, query {n}: {qs}", checked)
            for n, qs in enumerate(asked)
        ]
        checked.moves += check_rewrite(client, cloud, rng, generations, f"seed {seed}, rewrite")
        checked.rewrites += 1
        for n, qs in enumerate(asked):
            where = f"seed {seed}, after the rewrite, {n}: {qs}"
            after = check_query(client, cloud, qs, where, checked)
            checked.changed_answers += after != before[n]
    clear(test_db)
    print(f"{len(seeds)} worlds: {vars(checked)}")
    assert checked.queries == 2 * len(seeds) * (len(SIMPLE) + QUERIES_PER_WORLD)
    return checked


def test_tree_written_worlds_are_answered_as_brute_force_finds(client, test_db):
    checked = run(client, test_db, WORLDS)
    assert checked.with_candidates > checked.queries // 5, vars(checked)
    assert checked.with_sharing >= 3 and checked.exact_trees >= 5, vars(checked)
    assert checked.changed_answers >= 10 and checked.moves >= 1, vars(checked)


@pytest.mark.slow
def test_many_more_tree_written_worlds(client, test_db):
    checked = run(client, test_db, SLOW_WORLDS)
    assert checked.with_candidates > checked.queries // 5, vars(checked)
    assert checked.with_sharing >= 10 and checked.exact_trees >= 15, vars(checked)
    assert checked.changed_answers >= 30 and checked.moves >= 10, vars(checked)


def test_the_rewrite_is_seen_by_the_kept_world(client, test_db):
    """A tree written again changes the answer of the same application at
    once: here a host that had no VCPU gets some, then loses it again."""
    cloud = Cloud()
    cloud.provider("H", None, {"DISK_GB": 4}, ("CUSTOM_A",))
    cloud.provider("H-child", "H", {}, ("CUSTOM_B",))
    clear(test_db)
    generations = write_world(client, test_db, cloud)
    host = cloud.uuid("H")
    qs = "resources=VCPU:1"
    assert get(client, f"/allocation_candidates?{qs}")["allocation_requests"] == []
    tree = client.get(
        f"/resource_provider_trees/{host}", headers={"openstack-api-version": f"placement {TREES}"}
    ).json()
    assert {p["uuid"]: p["generation"] for p in tree["providers"]} == generations
    child = next(p for p in tree["providers"] if p["name"] == "H-child")
    child["inventories"] = {"VCPU": {"total": 2}}
    answer = put_tree(client, host, tree)
    found = get(client, f"/allocation_candidates?{qs}")["allocation_requests"]
    assert found == [
        {
            "allocations": {child["uuid"]: {"resources": {"VCPU": 1}}},
            "mappings": {"": [child["uuid"]]},
        }
    ]
    child = next(p for p in answer["providers"] if p["name"] == "H-child")
    child["inventories"] = {}
    put_tree(client, host, answer)
    assert get(client, f"/allocation_candidates?{qs}")["allocation_requests"] == []
