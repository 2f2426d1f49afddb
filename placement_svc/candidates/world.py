"""The shape of the cloud, kept by each process between requests.

What GET /allocation_candidates reads of the cloud is mostly its shape: the
providers and their trees, every inventory, the traits, the aggregates, the
sharing providers and whom they share with. That changes rarely; usages
change with every claim. A World is the whole shape as plain data, read in
a fixed number of statements; ``Worlds`` keeps the newest one per engine
and reads it again only when the world generation has moved: the sum of
the rows triggers move in every statement that changes the shape, whoever
writes it (db/shape_changes.py), read in the request's own transaction.
Usages are always read fresh (search.py).

A World is shared by the requests of a process at once: nothing may change
it after ``load``.
"""

from __future__ import annotations

import threading
import time
import weakref
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any, NamedTuple, TypeVar

import sqlalchemy as sa
from sqlalchemy.engine import Connection, Engine

from placement_svc.candidates.model import Provider, Room
from placement_svc.db import shape_changes, tables
from placement_svc.db.engine import changed_world

T = TypeVar("T")
SHARING_TRAIT = "MISC_SHARES_VIA_AGGREGATE"
RP = tables.resource_providers
INV = tables.inventories
TRAIT = tables.traits
RC = tables.resource_classes
RPT = tables.resource_provider_traits
RPA = tables.resource_provider_aggregates
AGG = tables.placement_aggregates
# An inventory as the search reads it, in this order.
INVENTORY_COLUMNS = (
    INV.c.resource_provider_id,
    INV.c.resource_class_id,
    INV.c.total,
    INV.c.reserved,
    INV.c.allocation_ratio,
    INV.c.min_unit,
    INV.c.max_unit,
    INV.c.step_size,
)

# A World older than this is read again even if the generation has not
# moved: a change made in SQL by hand, outside every engine of ours, is seen
# within this long.
MAX_AGE = 60.0


class Stock(NamedTuple):
    """One inventory, as the search weighs it against a requested amount."""

    provider: int
    capacity: float  # (total - reserved) * allocation_ratio
    whole: int  # int(capacity): what provider summaries show
    min_unit: int
    max_unit: int
    step_size: int
    idle: Room  # its Room while nothing is allocated from it (most of a cloud's GPUs)


def stock(pid: int, capacity: float, min_unit: int, max_unit: int, step_size: int) -> Stock:
    """An inventory of this capacity ((total - reserved) * allocation_ratio)."""
    whole = int(capacity)
    idle = Room(capacity, min_unit, max_unit, step_size, whole, 0)
    return Stock(pid, capacity, whole, min_unit, max_unit, step_size, idle)


class Trees(NamedTuple):
    """What a request for some classes searches, before any usage: the trees
    holding an inventory of one of them and the sharing providers among
    those trees."""

    roots: list[int]  # all_roots, in id order
    sharing: frozenset[int]
    all_roots: frozenset[int]  # those trees, and the trees the sharing providers share with


@dataclass
class World:
    generation: int | None  # None: the database has no generation row
    providers: dict[int, Provider] = field(default_factory=dict)  # in id order
    traits: dict[int, frozenset[str]] = field(default_factory=dict)  # every provider
    trait_ids: dict[str, int] = field(default_factory=dict)  # every trait held
    aggregates: dict[int, frozenset[str]] = field(default_factory=dict)  # every provider
    stock: dict[int, list[Stock]] = field(default_factory=dict)  # class id -> in provider order
    # class id -> the roots of the trees holding an inventory of it
    holders: dict[int, frozenset[int]] = field(default_factory=dict)
    sharing: frozenset[int] = frozenset()
    shares_with: dict[int, frozenset[int]] = field(default_factory=dict)  # sharing -> roots
    roots: frozenset[int] = frozenset()
    members: dict[int, list[int]] = field(default_factory=dict)  # root -> its tree, in id order
    loaded_at: float = 0.0
    # class id -> the providers of its stock, in the same order (for bisect)
    stock_ids: dict[int, list[int]] = field(default_factory=dict)
    # Every trait and resource class there is, held or not: name -> id.
    all_traits: dict[str, int] = field(default_factory=dict)
    class_ids: dict[str, int] = field(default_factory=dict)
    # What requests ask again and again, worked out once per world (see
    # ``remember``): a request's trees, its anchors.
    _memo: dict[Any, Any] = field(default_factory=dict, repr=False)

    def remember(self, key: Any, compute: Callable[[], T]) -> T:
        """``compute()``, kept under ``key`` for the life of this world (up to
        a few hundred keys: requests name few sets of classes and filters)."""
        try:
            return self._memo[key]
        except KeyError:
            pass
        value = compute()
        if len(self._memo) < 512:
            self._memo[key] = value
        return value

    def class_names(self) -> dict[int, str]:
        """class id -> name, for every resource class."""
        return self.remember("class names", lambda: {i: n for n, i in self.class_ids.items()})

    def trees(self, rc_ids: frozenset[int]) -> Trees:
        """The trees a request for these classes searches (see Trees)."""
        return self.remember(("trees", rc_ids), lambda: self._trees(rc_ids))

    def _trees(self, rc_ids: frozenset[int]) -> Trees:
        roots: set[int] = set()
        for rc_id in rc_ids:
            roots.update(self.holders.get(rc_id, ()))
        providers = self.providers
        sharing = frozenset(pid for pid in self.sharing if providers[pid].root_id in roots)
        every = set(roots)
        for pid in sharing:
            every.update(self.shares_with[pid])
        return Trees(sorted(every), sharing, frozenset(every))


def load(conn: Connection, generation: int | None = None) -> World:
    """The whole shape of the cloud, in six statements."""
    world = World(generation, loaded_at=time.monotonic())
    providers, trait_ids = world.providers, world.trait_ids
    trait_names: dict[int, list[str]] = {}
    rows = conn.execute(
        sa.select(
            RP.c.id,
            RP.c.uuid,
            RP.c.parent_provider_id,
            RP.c.root_provider_id,
            TRAIT.c.name,
            TRAIT.c.id,
        )
        .select_from(
            RP.outerjoin(RPT, RPT.c.resource_provider_id == RP.c.id).outerjoin(
                TRAIT, TRAIT.c.id == RPT.c.trait_id
            )
        )
        .order_by(RP.c.id)
    ).all()
    for pid, uuid, parent_id, root_id, trait, trait_id in rows:
        if pid not in providers:
            providers[pid] = Provider(pid, uuid, parent_id, root_id)
        if trait is not None:
            trait_ids[trait] = trait_id
            trait_names.setdefault(pid, []).append(trait)
    world.traits = interned(trait_names, providers)
    for provider in providers.values():
        world.members.setdefault(provider.root_id, []).append(provider.id)
    world.roots = frozenset(world.members)
    _load_stock(conn, world)
    _load_aggregates(conn, world)
    for table, names in ((TRAIT, world.all_traits), (RC, world.class_ids)):
        names.update((name, id_) for name, id_ in conn.execute(sa.select(table.c.name, table.c.id)))
    return world


def _load_stock(conn: Connection, world: World) -> None:
    holders: dict[int, set[int]] = {}
    providers = world.providers
    for pid, rc_id, total, reserved, ratio, min_unit, max_unit, step_size in conn.execute(
        sa.select(*INVENTORY_COLUMNS).order_by(INV.c.resource_provider_id)
    ):
        provider = providers.get(pid)
        if provider is None:  # added after the providers were read (READ COMMITTED)
            continue
        capacity = (total - reserved) * ratio
        world.stock.setdefault(rc_id, []).append(
            stock(pid, capacity, min_unit, max_unit, step_size)
        )
        holders.setdefault(rc_id, set()).add(provider.root_id)
    world.stock_ids = {rc_id: [s.provider for s in stock] for rc_id, stock in world.stock.items()}
    world.holders = {rc_id: frozenset(roots) for rc_id, roots in holders.items()}


def _load_aggregates(conn: Connection, world: World) -> None:
    """Every provider's aggregates, and the trees each sharing provider
    shares with: those of every provider in one of its aggregates, and its
    own."""
    names_of: dict[int, list[str]] = {}
    members: dict[int, list[int]] = {}  # aggregate id -> providers
    for pid, aggregate_id, uuid in conn.execute(
        sa.select(RPA.c.resource_provider_id, RPA.c.aggregate_id, AGG.c.uuid).select_from(
            RPA.join(AGG, AGG.c.id == RPA.c.aggregate_id)
        )
    ):
        if pid not in world.providers:
            continue
        names_of.setdefault(pid, []).append(uuid)
        members.setdefault(aggregate_id, []).append(pid)
    world.aggregates = interned(names_of, world.providers)
    providers = world.providers
    world.sharing = frozenset(pid for pid, held in world.traits.items() if SHARING_TRAIT in held)
    if not world.sharing:
        return
    reach: dict[int, set[int]] = {pid: {providers[pid].root_id} for pid in world.sharing}
    for pids in members.values():
        sharers = [pid for pid in pids if pid in reach]
        if sharers:
            roots = {providers[pid].root_id for pid in pids}
            for pid in sharers:
                reach[pid] |= roots
    world.shares_with = {pid: frozenset(roots) for pid, roots in reach.items()}


def interned(names_of: dict[int, list[str]], providers: Iterable[int]) -> dict[int, frozenset[str]]:
    """provider -> its names as a frozenset, for every provider given (empty
    if it has none); equal sets are one object."""
    shared: dict[tuple[str, ...], frozenset[str]] = {(): frozenset()}
    result = {}
    for pid in providers:
        key = tuple(sorted(names_of.get(pid, ())))
        value = shared.get(key)
        if value is None:
            value = shared[key] = frozenset(key)
        result[pid] = value
    return result


def generation(conn: Connection) -> int | None:
    """The world generation in this transaction; None without its rows."""
    found = conn.execute(shape_changes.SUM).scalar()
    return None if found is None else int(found)


class Worlds:
    """The newest World of one database, as one process last read it."""

    def __init__(self) -> None:
        self._world: World | None = None
        self._lock = threading.Lock()
        self.loads = 0  # how many times the shape was read: for tests and benches

    def current(self, conn: Connection) -> World:
        """The shape of the cloud as this transaction sees it: the kept one
        when the generation is the kept one's, else read now and kept (but
        not of this transaction's own uncommitted changes: rolled back, its
        generation would come again with other changes). The last read is
        kept, not the highest generation: a database restored from a backup
        goes back to lower ones, and an older snapshot's world kept by a
        slower reader costs one more read, never a wrong answer (worlds are
        used only at their own generation, and random steps keep two
        histories from sharing one; see db/shape_changes.py)."""
        mine = changed_world(conn)  # this transaction's own changes: not for others
        seen = generation(conn)
        kept = self._world
        if (
            not mine
            and seen is not None
            and kept is not None
            and kept.generation == seen
            and time.monotonic() - kept.loaded_at < MAX_AGE
        ):
            return kept
        world = load(conn, seen)
        with self._lock:
            self.loads += 1
            if not mine and seen is not None:
                self._world = world
        return world

    def forget(self) -> None:
        self._world = None


_WORLDS: weakref.WeakKeyDictionary[Engine, Worlds] = weakref.WeakKeyDictionary()
_WORLDS_LOCK = threading.Lock()


def of(engine: Engine) -> Worlds:
    """The Worlds kept for ``engine`` (one per database a process opened)."""
    with _WORLDS_LOCK:
        worlds = _WORLDS.get(engine)
        if worlds is None:
            worlds = _WORLDS[engine] = Worlds()
        return worlds
