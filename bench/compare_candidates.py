"""Ask two Placement endpoints the same random allocation-candidates questions
and report where their answers differ.

Each round builds one small random world over the HTTP API in both endpoints
(trees of up to three levels, sharing providers -- with --nested-sharing
some of them children in a tree -- traits, aggregates, some allocations),
with resource classes and traits of its own, so that rounds do not see each
other's providers; then it asks random queries at random
microversions and compares the status, the error code, the allocation
requests (as a multiset: order is not part of the API) and the provider
summaries. Standard library only.

    python bench/compare_candidates.py --url http://127.0.0.1:8778 \\
        --compare http://127.0.0.1:8779 [--rounds 30] [--queries 40] [--seed 1]

Queries that hit the upstream defects named in the project's specification
errata are not asked (``--with-defects`` asks them too), so with upstream
Placement as ``--compare`` every difference printed is one to explain.
"""

from __future__ import annotations

import argparse
import json
import random
import sys
import uuid
from collections import Counter
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from candidates import Client  # noqa: E402  (bench/candidates.py)

SHARING = "MISC_SHARES_VIA_AGGREGATE"


class World:
    """One round's providers, as both endpoints hold them."""

    def __init__(self, tag: str, rng: random.Random, nested_sharing: bool = False):
        self.rng, self.tag = rng, tag
        # Sharing providers may be children in a tree (--nested-sharing).
        self.nested_sharing = nested_sharing
        self.classes = [f"CUSTOM_W{tag}_A", f"CUSTOM_W{tag}_B"]
        # Created in this order, the reverse of their names' order, so that a
        # trait list sorted by name differs from one in creation order.
        self.traits = [f"CUSTOM_W{tag}_Y", f"CUSTOM_W{tag}_X"]
        self.aggregates = [str(uuid.uuid4()) for _ in range(2)]
        self.providers: list[dict] = []  # name, uuid, parent, root, inventory, traits, aggs

    def plan(self) -> None:
        rng = self.rng
        for t in range(rng.randint(1, 3)):
            root = self._add(f"t{t}", None)
            for c in range(rng.randint(0, 3)):
                child = self._add(f"t{t}c{c}", root)
                for g in range(rng.choice([0, 0, 1, 2])):
                    self._add(f"t{t}c{c}g{g}", child)
        for s in range(rng.choice([0, 0, 1, 2])):
            parent = None
            if self.nested_sharing and rng.random() < 0.4:
                parent = rng.choice([p for p in self.providers if SHARING not in p["traits"]])
            sharing = self._add(f"s{s}", parent)
            sharing["inventory"] = {self.classes[1]: {"total": rng.randint(2, 6)}}
            sharing["traits"] = [SHARING]
            sharing["aggregates"] = rng.sample(self.aggregates, rng.randint(1, 2))

    def _add(self, name: str, parent: dict | None) -> dict:
        rng = self.rng
        inventory = {}
        for rc in self.classes:
            if rng.random() < 0.5:
                spec = {"total": rng.randint(1, 4)}
                if rng.random() < 0.15:
                    spec["max_unit"] = 1
                if rng.random() < 0.1:
                    spec["reserved"] = 1
                inventory[rc] = spec
        provider = {
            "name": name,
            "uuid": str(uuid.uuid4()),
            "parent": parent,
            "inventory": inventory,
            "traits": rng.sample(self.traits, rng.randint(0, 2)),
            "aggregates": rng.sample(self.aggregates, rng.choice([0, 0, 1, 2]))
            if parent is None
            else rng.sample(self.aggregates, rng.choice([0, 0, 0, 1])),
        }
        self.providers.append(provider)
        return provider

    def load(self, client: Client) -> None:
        for rc in self.classes:
            client.ok("PUT", f"/resource_classes/{rc}", expect=(201, 204))
        for trait in self.traits:
            client.ok("PUT", f"/traits/{trait}", expect=(201, 204))
        for p in self.providers:
            body = {"name": p["name"] + "-" + p["uuid"][:8], "uuid": p["uuid"]}
            if p["parent"]:
                body["parent_provider_uuid"] = p["parent"]["uuid"]
            client.ok("POST", "/resource_providers", body)
            generation = 0
            for path, key, value in (
                ("inventories", "inventories", p["inventory"]),
                ("traits", "traits", p["traits"]),
                ("aggregates", "aggregates", p["aggregates"]),
            ):
                if not value:
                    continue
                data = client.ok(
                    "PUT",
                    f"/resource_providers/{p['uuid']}/{path}",
                    {"resource_provider_generation": generation, key: value},
                )
                generation = data["resource_provider_generation"]

    def allocations(self) -> list[tuple[str, dict]]:
        """A few consumers, each taking one unit somewhere (planned once, made
        the same on both endpoints)."""
        made = []
        for p in self.providers:
            for rc, spec in p["inventory"].items():
                if self.rng.random() < 0.25 and spec["total"] - spec.get("reserved", 0) >= 1:
                    made.append((str(uuid.uuid4()), {p["uuid"]: {"resources": {rc: 1}}}))
        return made


def allocate(client: Client, consumer: str, allocations: dict) -> None:
    client.ok(
        "PUT",
        f"/allocations/{consumer}",
        {
            "allocations": allocations,
            "project_id": "compare",
            "user_id": "compare",
            "consumer_generation": None,
            "consumer_type": "INSTANCE",
        },
    )


def query(world: World, rng: random.Random, defects: bool) -> tuple[str, str] | None:
    """A random question and its microversion; None when it would hit a
    known upstream defect (unless ``defects``)."""
    minor = rng.choice([14, 17, 21, 22, 25, 28, 29, 31, 33, 35, 36, 36, 38, 39, 39, 39])
    a, b = world.classes
    x, y = world.traits
    parts: list[str] = []
    unsuffixed: dict[str, int] = {}
    if rng.random() < 0.75 or minor < 25:
        for rc in rng.sample([a, b], rng.randint(1, 2)):
            unsuffixed[rc] = rng.randint(1, 2)
        parts.append("resources=" + ",".join(f"{rc}:{n}" for rc, n in unsuffixed.items()))
        parts += constraints("", world, rng, minor)
    suffixes: dict[str, dict[str, int]] = {}
    if minor >= 25:
        for i in range(rng.randint(0 if unsuffixed else 1, 3)):
            suffix = f"_G{i}" if minor >= 33 and rng.random() < 0.5 else str(i + 1)
            resourceless = minor >= 36 and suffixes and rng.random() < 0.25
            resources = {} if resourceless else {rng.choice([a, b]): rng.randint(1, 2)}
            suffixes[suffix] = resources
            if resources:
                parts.append(
                    f"resources{suffix}=" + ",".join(f"{rc}:{n}" for rc, n in resources.items())
                )
            more = constraints(suffix, world, rng, minor)
            if resourceless and not more:
                more = [f"required{suffix}={rng.choice([x, y])}"]
            parts += more
    resourceless = [s for s, r in suffixes.items() if not r]
    if minor >= 36 and (resourceless or (len(suffixes) > 1 and rng.random() < 0.3)):
        members = set(resourceless)
        if len(suffixes) > 1:
            members |= set(rng.sample(sorted(suffixes), 2))
        if len(members) > 1 or resourceless:
            parts.append("same_subtree=" + ",".join(sorted(members)))
    if len(suffixes) > 1 or rng.random() < 0.2:
        policy = rng.choice(["none", "isolate"])
        parts.append(f"group_policy={policy}")
    else:
        policy = None
    if minor >= 35 and rng.random() < 0.2:
        parts.append("root_required=" + rng.choice([x, f"!{y}", f"{x},!{y}"]))
    if minor >= 16 and rng.random() < 0.2:
        parts.append(f"limit={rng.randint(1, 5)}")
    if not defects:
        if policy != "none" and any(rc in unsuffixed for r in suffixes.values() for rc in r):
            return None  # errata: same class unsuffixed and suffixed under isolate
        if suffixes and b in unsuffixed and any(r for r in suffixes.values()):
            sharing = [p for p in world.providers if SHARING in p["traits"]]
            if sharing:
                return None  # errata: a sharing provider alone serving the unsuffixed group
        for suffix in resourceless:
            mine = (f"required{suffix}", f"member_of{suffix}", f"in_tree{suffix}")
            own = [p.split("=", 1) for p in parts if p.split("=", 1)[0] in mine]
            if any(key.startswith("in_tree") for key, _ in own):
                return None  # errata: in_tree on a resourceless group
            positive = any(
                (key.startswith("required") and any(not t.startswith("!") for t in v.split(",")))
                or (key.startswith("member_of") and not v.startswith("!"))
                for key, v in own
            )
            if not positive:
                return None  # errata: a resourceless group with forbidden rules only
    return "&".join(parts), f"1.{minor}"


def constraints(suffix: str, world: World, rng: random.Random, minor: int) -> list[str]:
    x, y = world.traits
    parts = []
    if minor >= 17 and rng.random() < 0.3:
        choices = [x, f"{x},{y}"]
        if minor >= 22:
            choices += [f"!{x}", f"{x},!{y}"]
        if minor >= 39:
            choices += [f"in:{x},{y}"]
        parts.append(f"required{suffix}={rng.choice(choices)}")
    if rng.random() < 0.2:
        agg = rng.choice(world.aggregates)
        choices = [agg]
        if minor >= 21:
            choices.append("in:" + ",".join(world.aggregates))
        if minor >= 32:
            choices.append(f"!{agg}")
        parts.append(f"member_of{suffix}={rng.choice(choices)}")
    if minor >= 31 and rng.random() < 0.15:
        parts.append(f"in_tree{suffix}={rng.choice(world.providers)['uuid']}")
    return parts


def normalised(status: int, raw: bytes):
    data = json.loads(raw) if raw else None
    if status != 200:
        codes = [e.get("code") for e in (data or {}).get("errors", [])]
        return status, codes
    for request in data["allocation_requests"]:
        # Upstream keeps a group's providers in a set: their order means nothing.
        for suffix, providers in request.get("mappings", {}).items():
            request["mappings"][suffix] = sorted(providers)
    requests = Counter(json.dumps(r, sort_keys=True) for r in data["allocation_requests"])
    # Trait lists keep their order: both list a provider's traits in trait id
    # order (upstream on SQLite and MySQL; on PostgreSQL its order is the
    # link rows' physical order, which this comparison would report).
    return status, requests, json.dumps(data["provider_summaries"], sort_keys=True)


def without_limit(qs: str) -> str:
    return "&".join(p for p in qs.split("&") if not p.startswith("limit="))


def _named(allocation_request) -> set[str]:
    """The provider uuids of one allocation request, list form or dict form."""
    allocations = allocation_request["allocations"]
    if isinstance(allocations, dict):
        return set(allocations)
    return {a["resource_provider"]["uuid"] for a in allocations}


def limit_rule_broken(world: World, qs: str, limited: bytes, unlimited: bytes) -> str | None:
    """What a limited answer breaks of upstream's rule, or None: at most
    ``limit`` candidates, each one of the unlimited answer's, and the
    summaries those of the unlimited answer whose provider's root is the
    root of a provider of a returned candidate."""
    limit = int(next(p for p in qs.split("&") if p.startswith("limit="))[6:])
    cut, whole = json.loads(limited), json.loads(unlimited)
    root = {}
    for p in world.providers:
        top = p
        while top["parent"]:
            top = top["parent"]
        root[p["uuid"]] = top["uuid"]
    for request in cut["allocation_requests"] + whole["allocation_requests"]:
        for suffix, providers in request.get("mappings", {}).items():
            request["mappings"][suffix] = sorted(providers)
    requests = [json.dumps(r, sort_keys=True) for r in cut["allocation_requests"]]
    every = {json.dumps(r, sort_keys=True) for r in whole["allocation_requests"]}
    if len(requests) != min(limit, len(every)) or not set(requests) <= every:
        return f"{len(requests)} candidates for limit={limit} of {len(every)}"
    roots = {root[u] for r in cut["allocation_requests"] for u in _named(r)}
    expected = {u for u in whole["provider_summaries"] if root[u] in roots}
    if set(cut["provider_summaries"]) != expected:
        names = {p["uuid"]: p["name"] for p in world.providers}
        got = sorted(names[u] for u in cut["provider_summaries"])
        return f"summaries {got}, expected {sorted(names[u] for u in expected)}"
    return None


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--url", default="http://127.0.0.1:8778")
    parser.add_argument("--compare", required=True, metavar="URL")
    parser.add_argument("--token", default="admin")
    parser.add_argument("--rounds", type=int, default=30)
    parser.add_argument("--queries", type=int, default=40)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--with-defects", action="store_true")
    parser.add_argument(
        "--nested-sharing",
        action="store_true",
        help="sharing providers may be children in a tree (upstream 16.0.0 answers 500 where "
        "one serves another tree's unsuffixed group: those answers are counted, not printed)",
    )
    args = parser.parse_args(argv)
    rng = random.Random(args.seed)
    clients = [Client(args.url, args.token), Client(args.compare, args.token)]
    asked = differ = erred = 0
    run = uuid.uuid4().hex[:6].upper()
    for round_ in range(args.rounds):
        world = World(f"{run}{round_}", rng, args.nested_sharing)
        world.plan()
        consumers = world.allocations()
        for client in clients:
            client.headers["openstack-api-version"] = "placement 1.39"
            world.load(client)
            for consumer, allocations in consumers:
                allocate(client, consumer, allocations)
        for _ in range(args.queries):
            asked_for = query(world, rng, args.with_defects)
            if asked_for is None:
                continue
            qs, version = asked_for
            answers = []
            for client in clients:
                client.headers["openstack-api-version"] = f"placement {version}"
                answers.append(client.raw("GET", "/allocation_candidates?" + qs))
            asked += 1
            if args.nested_sharing and answers[1][0] == 500 and answers[0][0] == 200:
                erred += 1  # upstream's KeyError on a nested sharing provider
                continue
            if "limit=" in qs:
                # Which candidates come back is not fixed: each endpoint is
                # checked against its own unlimited answer instead.
                same = answers[0][0] == answers[1][0]
                if same and answers[0][0] == 200:
                    whole = without_limit(qs)
                    for client, (_status, raw) in zip(clients, answers):
                        unlimited = client.raw("GET", "/allocation_candidates?" + whole)[1]
                        broken = limit_rule_broken(world, qs, raw, unlimited)
                        if broken:
                            same = False
                            print(f"  {client.url}: {broken}")
            else:
                same = normalised(*answers[0]) == normalised(*answers[1])
            if not same:
                differ += 1
                print(f"round {round_} {version} {qs}")
                explain(world, clients, answers)
    print(f"{asked} queries asked, {differ} answered differently")
    if erred:
        print(f"{erred} answered 500 by {args.compare} alone (not compared)")
    return 1 if differ else 0


def explain(world: World, clients, answers) -> None:
    """What each endpoint said that the other did not, with provider names."""
    names = {p["uuid"]: p["name"] for p in world.providers}

    def named(text: str) -> str:
        for provider_uuid, name in names.items():
            text = text.replace(provider_uuid, name)
        return text.replace(f"CUSTOM_W{world.tag}_", "")

    views = [normalised(*answer) for answer in answers]
    if any(view[0] != 200 for view in views):
        for client, (status, raw) in zip(clients, answers):
            print(f"  {client.url}: {status} {named(raw[:1000].decode())}")
    else:
        for client, mine, theirs in ((clients[0], *views), (clients[1], *reversed(views))):
            for request in sorted((mine[1] - theirs[1]).elements()):
                print(f"  only {client.url}: {named(request)}")
        if views[0][2] != views[1][2]:
            for client, view in zip(clients, views):
                print(f"  summaries {client.url}: {named(view[2])}")
    print("  world:", named(json.dumps(summary_of(world))))


def summary_of(world: World):
    return [
        {
            "name": p["name"],
            "uuid": p["uuid"][:8],
            "parent": p["parent"]["name"] if p["parent"] else None,
            "inventory": p["inventory"],
            "traits": p["traits"],
            "aggregates": [world.aggregates.index(a) for a in p["aggregates"]],
        }
        for p in world.providers
    ]


if __name__ == "__main__":
    sys.exit(main())
