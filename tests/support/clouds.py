"""Hand-built clouds for the tests of the explanation and the capacity
count, no database: a cloud written by name (``Cloud``), the shape of it a
process would keep, the search's Found of it and the whole cloud an
explanation reads, each made by the service's own code but for the SQL;
random clouds and requests over them.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field
from typing import NamedTuple
from urllib.parse import parse_qsl

from microversion_parse import Version

from placement_svc.candidates import request, rooms, world
from placement_svc.candidates.explain import cloud as explain_cloud
from placement_svc.candidates.model import Found, Provider, Room

EXPLAIN = Version(1, 44)
SHARING = "MISC_SHARES_VIA_AGGREGATE"
AGG1, AGG2, AGG3 = (f"aaaaaaaa-0000-4000-8000-00000000000{n}" for n in (1, 2, 3))
UNKNOWN = "ffffffff-ffff-4fff-8fff-ffffffffffff"


def ask(qs: str, version: Version = EXPLAIN) -> request.Request:
    params: dict[str, list[str]] = {}
    for key, value in parse_qsl(qs, keep_blank_values=True):
        params.setdefault(key, []).append(value)
    return request.parse(params, version)


def inventory(total, reserved=0, ratio=1.0, min_unit=1, max_unit=None, step=1, used=0) -> Stock:
    """One inventory; max_unit defaults to the total."""
    return Stock(
        total, reserved, ratio, min_unit, total if max_unit is None else max_unit, step, used
    )


def uuid_of(pid: int) -> str:
    return f"00000000-0000-4000-8000-{pid:012d}"


class Stock(NamedTuple):
    """One inventory as a test writes it, with its used amount."""

    total: int
    reserved: int
    allocation_ratio: float
    min_unit: int
    max_unit: int
    step_size: int
    used: int

    @property
    def free(self) -> float:
        return (self.total - self.reserved) * self.allocation_ratio - self.used

    def lacks(self, *amounts: int) -> tuple[str, ...]:
        """Its room's Room.lacks: what keeps these amounts off it."""
        whole = int((self.total - self.reserved) * self.allocation_ratio)
        room = Room(self.free, self.min_unit, self.max_unit, self.step_size, whole, self.used)
        return room.lacks(*amounts)


@dataclass
class Data:
    """A cloud as a test writes it: providers with names, traits,
    aggregates and inventories; the sharing providers and whom they share
    with (their root ids, their own among them)."""

    providers: dict[int, Provider] = field(default_factory=dict)
    names: dict[int, str] = field(default_factory=dict)
    traits: dict[int, frozenset[str]] = field(default_factory=dict)
    aggregates: dict[int, frozenset[str]] = field(default_factory=dict)
    stock: dict[tuple[int, str], Stock] = field(default_factory=dict)
    sharing: set[int] = field(default_factory=set)
    shares_with: dict[int, set[int]] = field(default_factory=dict)

    def roots(self) -> list[int]:
        return sorted({p.root_id for p in self.providers.values()})


class Cloud:
    """Providers by name (``data``), and what the engine makes of them for a
    request, as the service does but for the SQL: the shape of the cloud a
    process keeps (``world``), the search's Found (``found``, by rooms.found
    as search.search makes it) and the whole cloud an explanation reads
    (``whole``, by explain/cloud.py, with the names and inventory numbers
    explain/names.py would read)."""

    def __init__(self):
        self.data = Data()
        self.ids: dict[str, int] = {}

    def provider(self, name, parent=None, stock=None, traits=(), aggregates=()) -> int:
        data = self.data
        pid = len(self.ids) + 1
        parent_id = self.ids[parent] if parent else None
        root_id = data.providers[parent_id].root_id if parent else pid
        self.ids[name] = pid
        data.providers[pid] = Provider(pid, uuid_of(pid), parent_id, root_id)
        data.names[pid] = name
        data.traits[pid] = frozenset(traits)
        data.aggregates[pid] = frozenset(aggregates)
        for rc, held in (stock or {}).items():
            data.stock[(pid, rc)] = held if isinstance(held, Stock) else inventory(held)
        return pid

    def sharing(self, name, stock, shares_with, parent=None, traits=(), aggregates=()) -> int:
        """A sharing provider: its own tree and ``shares_with`` (root names)."""
        pid = self.provider(name, parent, stock, (SHARING, *traits), aggregates)
        self.data.sharing.add(pid)
        root = self.data.providers[pid].root_id
        self.data.shares_with[pid] = {root} | {self.ids[r] for r in shares_with}
        return pid

    def uuid(self, name: str) -> str:
        return self.data.providers[self.ids[name]].uuid

    def named(self, pids) -> list[str]:
        return [self.data.names[pid] for pid in pids]

    def world(self, classes=()) -> world.World:
        """The shape of the cloud a process would keep for these data, with
        an id for every class of an inventory and of ``classes``."""
        data = self.data
        every = sorted({rc for _pid, rc in data.stock} | set(classes))
        traits = sorted(set().union(*data.traits.values())) if data.traits else []
        shape = world.World(
            1,
            providers=dict(sorted(data.providers.items())),
            traits=dict(data.traits),
            trait_ids={name: n for n, name in enumerate(traits, start=1)},
            aggregates=dict(data.aggregates),
            class_ids={rc: n for n, rc in enumerate(every, start=1)},
        )
        shape.all_traits = dict(shape.trait_ids)
        holders: dict[int, set[int]] = {}
        for (pid, rc), held in sorted(data.stock.items()):
            rc_id = shape.class_ids[rc]
            capacity = (held.total - held.reserved) * held.allocation_ratio
            shape.stock.setdefault(rc_id, []).append(
                world.stock(pid, capacity, held.min_unit, held.max_unit, held.step_size)
            )
            holders.setdefault(rc_id, set()).add(data.providers[pid].root_id)
        shape.stock_ids = {rc_id: [s.provider for s in held] for rc_id, held in shape.stock.items()}
        shape.holders = {rc_id: frozenset(roots) for rc_id, roots in holders.items()}
        for pid, provider in shape.providers.items():
            shape.members.setdefault(provider.root_id, []).append(pid)
        shape.roots = frozenset(shape.members)
        shape.sharing = frozenset(p for p, held in data.traits.items() if SHARING in held)
        shape.shares_with = {
            pid: frozenset(data.shares_with.get(pid, {data.providers[pid].root_id}))
            for pid in shape.sharing
        }
        return shape

    def found(
        self, req: request.Request, shape: world.World | None = None, answer_only: bool = False
    ) -> Found:
        """What search.search makes for ``req`` of these data: the shape of
        the cloud (``shape``, or a new one), the used amounts of the
        requested classes, rooms.found (``answer_only``: as for the answer
        alone)."""
        shape = self.world(req.resource_classes()) if shape is None else shape
        wanted, beyond = rooms.weighed(req, shape.class_ids)
        if answer_only:  # as search.search: known empty from the shape alone
            known = rooms.unservable(shape, req, wanted, beyond)
            if known is not None:
                return known
        used: dict[int, dict[int, int]] = {}
        for (pid, rc), held in self.data.stock.items():
            if held.used:
                used.setdefault(shape.class_ids[rc], {})[pid] = held.used
        return rooms.found(shape, req, wanted, used, None, beyond, answer_only)

    def whole(self, req: request.Request, found: Found | None = None) -> explain_cloud.Cloud:
        """The whole cloud the explanation of ``req`` reads (of ``found``, the
        search's, when given), with every provider's name and the numbers
        of every inventory of a requested class."""
        found = self.found(req) if found is None else found
        seen = explain_cloud.of(found)
        seen.names = dict(self.data.names)
        seen.inventories = {
            (pid, rc): explain_cloud.Inventory(held.total, held.reserved, held.allocation_ratio)
            for (pid, rc), held in self.data.stock.items()
            if rc in found.classes
        }
        return seen


# Random clouds and requests, for the checks against the engine.

CLASSES = ("VCPU", "DISK_GB")
TRAITS = ("CUSTOM_A", "CUSTOM_B", "CUSTOM_C")
AGGREGATES = (AGG1, AGG2, AGG3)


def random_inventory(rng: random.Random) -> Stock:
    return inventory(
        rng.randint(1, 6),
        reserved=rng.choice([0, 0, 1]),
        ratio=rng.choice([1.0, 1.0, 1.5, 0.5]),
        min_unit=rng.choice([1, 1, 2]),
        max_unit=rng.choice([None, None, 2, 3]),
        step=rng.choice([1, 1, 2]),
        used=rng.choice([0, 0, 1, 2]),
    )


def random_cloud(rng: random.Random) -> Cloud:
    """One to four trees of up to four providers, and up to two sharing
    providers of DISK_GB (a root, or a child in a tree); random inventories,
    traits and aggregates."""
    cloud = Cloud()

    def some(names, most):
        return rng.sample(names, rng.randint(0, most))

    def stock():
        return {rc: random_inventory(rng) for rc in CLASSES if rng.random() < 0.5}

    roots = []
    for t in range(rng.randint(1, 4)):
        names = [f"T{t}"]
        roots.append(names[0])
        cloud.provider(names[0], None, stock(), some(TRAITS, 2), some(AGGREGATES, 2))
        for c in range(rng.randint(0, 3)):
            name = f"T{t}C{c}"
            cloud.provider(name, rng.choice(names), stock(), some(TRAITS, 2), some(AGGREGATES, 1))
            names.append(name)
    for s in range(rng.randint(0, 2)):
        cloud.sharing(
            f"S{s}",
            {"DISK_GB": random_inventory(rng)},
            some(roots, len(roots)),
            parent=rng.choice([None, None, rng.choice(list(cloud.ids))]),
            traits=some(TRAITS, 1),
            aggregates=some(AGGREGATES, 1),
        )
    return cloud


def random_request(rng: random.Random, cloud: Cloud, rules: bool = True) -> str:
    """A query at 1.44 over ``cloud``: groups with random resources, traits,
    aggregates and in_tree; with ``rules`` also root_required,
    root_member_of, group_policy, isolate and same_subtree. Negated groups
    all have resources: a resourceless one may be served by a sharing
    provider in another tree, which search.py loads only when it holds an
    inventory of a requested class (the Survey has every provider), so the
    engine's answer and the explanation's would not be comparable."""
    parts = []

    def filters(suffix: str) -> None:
        if rng.random() < 0.35:
            trait = rng.choice(TRAITS)
            other = rng.choice([t for t in TRAITS if t != trait])
            parts.append(
                f"required{suffix}="
                + rng.choice([trait, f"!{trait}", f"in:{trait},{other}", f"{trait},!{other}"])
            )
        if rng.random() < 0.25:
            agg, other = rng.sample(AGGREGATES, 2)
            parts.append(f"member_of{suffix}=" + rng.choice([agg, f"in:{agg},{other}", f"!{agg}"]))
        if rng.random() < 0.1:
            pid = rng.choice(sorted(cloud.data.providers))
            parts.append(f"in_tree{suffix}=" + rng.choice([uuid_of(pid), UNKNOWN]))

    def resources(suffix: str) -> None:
        classes = rng.sample(CLASSES, rng.randint(1, 2))
        parts.append(
            f"resources{suffix}=" + ",".join(f"{rc}:{rng.randint(1, 3)}" for rc in classes)
        )

    if rng.random() < 0.6:
        resources("")
        filters("")
    granular: list[str] = []
    resourceless: list[str] = []
    for i in range(rng.randint(0 if parts else 1, 3)):
        suffix = f"_G{i}"
        if rules and granular and rng.random() < 0.2:
            resourceless.append(suffix)
            parts.append(f"required{suffix}=" + rng.choice(TRAITS))
        else:
            resources(suffix)
            granular.append(suffix)
        filters(suffix)
    if not rules:
        return "&".join(parts)
    if rng.random() < 0.2:
        parts.append("root_required=" + rng.choice(["CUSTOM_A", "!CUSTOM_B", "CUSTOM_A,!CUSTOM_C"]))
    if rng.random() < 0.15:
        parts.append("root_member_of=" + rng.choice([AGG1, f"in:{AGG1},{AGG2}", f"!{AGG3}"]))
    for suffix in resourceless:  # each with a group that has resources
        parts.append(f"same_subtree={rng.choice(granular)},{suffix}")
    if len(granular) > 1 and rng.random() < 0.3:
        first, second = rng.sample(granular, 2)
        parts.append(f"same_subtree={first},{second}")
    elif len(granular) > 1 and rng.random() < 0.3:
        first, second = rng.sample(granular, 2)
        parts.append(f"same_subtree={first},!{second}")
    every = granular + resourceless
    if len(every) > 1 and rng.random() < 0.4:
        if rng.random() < 0.5:
            parts.append("group_policy=isolate")
        else:
            parts.append("isolate=" + ",".join(rng.sample(every, rng.randint(1, len(every)))))
    return "&".join(parts)
