"""Units of work on a whole provider tree (1.49, placement-svc's own): read
it in one go, or make it exactly what the client says in one transaction.

A compute host's tree (a root, its NUMA nodes, NICs, GPUs...) is written by
nova one provider and one part at a time, each with its own generation; a
crash between two requests leaves half a tree. ``replace`` takes the whole
wanted tree and, in the caller's one transaction:

1. checks the body is one tree rooted at the URL's provider (``TreeShape``);
2. reads the tree as it is, and the body's providers wherever they are: one
   in another tree is refused (``InAnotherTree``: a tree write moves nothing
   between trees), and so is a URL naming a provider that is not a root;
3. checks every generation the body carries at once (``StaleProviders``
   names each provider the client saw at another generation, or saw that
   no longer exists);
4. works out what changes, and asks ``permit`` for those kinds of change
   (the API checks each single write's policy rule) before writing;
5. names: custom traits and classes the body names are created, any other
   unknown name is refused;
6. moves the generation of every existing provider that changes or goes,
   once, conditionally on the generation read (another writer meanwhile
   makes the whole unit of work run again: ``ProviderChanged``), then
   writes: names held by providers that give them up are freed first,
   new providers are made parents first, moved and renamed ones updated,
   absent ones deleted children first, then each provider's inventories,
   traits and aggregates.

Any refusal raises before the transaction commits, so nothing is written.
A new provider starts at generation 0 with its parts; an existing one moves
by exactly one if anything of it changed, and not at all otherwise.
"""

from __future__ import annotations

import re
import uuid as uuidlib
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

from sqlalchemy.engine import Connection

from placement_svc.db import aggregates as aggregate_store
from placement_svc.db import embedded, names, providers, resource_classes, tables, traits
from placement_svc.db import inventories as inventory_store
from placement_svc.db import provider_traits as trait_store
from placement_svc.db.exceptions import (
    ConcurrentUpdate,
    ProviderChanged,
    ProviderExists,
    ProviderNotFound,
    ResourceClassExists,
    UnknownResourceClass,
    UnknownTrait,
)
from placement_svc.db.inventories import Inventory
from placement_svc.db.providers import Provider
from placement_svc.ops.exceptions import (
    InAnotherTree,
    InvalidInventory,
    NotARoot,
    StaleProviders,
    TreeShape,
)
from placement_svc.schemas.common import CUSTOM_NAME_PATTERN

_CUSTOM = re.compile(CUSTOM_NAME_PATTERN)
_LONGEST = 255  # a name's column, as PUT /resource_classes/{name} and /traits/{name} allow

# The kinds of change a tree write may make; the API checks the single
# write's policy rule of each kind the write makes.
CREATE, UPDATE, DELETE = "create", "update", "delete"
INVENTORIES, TRAITS, AGGREGATES = "inventories", "traits", "aggregates"
NEW_CLASSES, NEW_TRAITS = "new_classes", "new_traits"


@dataclass(frozen=True)
class Node:
    """One provider of a tree: as read, or as the client wants it (``uuid``
    None: a new provider, given a uuid when made; ``generation``: the one
    the client saw, None for a provider it means to create)."""

    uuid: str | None
    name: str
    parent_uuid: str | None
    generation: int | None
    inventories: dict[str, Inventory] = field(default_factory=dict)
    traits: frozenset[str] = frozenset()
    aggregates: frozenset[str] = frozenset()

    def same_parts(self, other: Node) -> tuple[bool, bool, bool]:
        """(inventories, traits, aggregates) the same as ``other``'s."""
        return (
            _fields(self.inventories) == _fields(other.inventories),
            self.traits == other.traits,
            self.aggregates == other.aggregates,
        )


@dataclass(frozen=True)
class Tree:
    """A tree as read: its root's uuid and its providers, parents before
    children (depth first, siblings by name)."""

    root: str
    nodes: list[Node]
    newest: object = None  # the newest change of its providers (a datetime)


def _fields(inventories: dict[str, Inventory]) -> dict[str, dict]:
    return {name: inv.fields() for name, inv in inventories.items()}


def read(conn: Connection, root_uuid: str) -> Tree:
    """The tree rooted at ``root_uuid``: ProviderNotFound, or NotARoot for a
    provider that has a parent."""
    root = providers.find(conn, root_uuid)
    if root is None:
        raise ProviderNotFound(root_uuid)
    if root.parent_id is not None:
        raise NotARoot(root.uuid, root.root_uuid)
    return _read_tree(conn, root)


def _members(conn: Connection, root: Provider) -> list[Provider]:
    return providers.query(conn, tables.resource_providers.c.root_provider_id == root.id)


def _read_tree(conn: Connection, root: Provider, members: list[Provider] | None = None) -> Tree:
    """The tree in five statements whatever its size."""
    if members is None:
        members = _members(conn, root)
    ids = [p.id for p in members]
    held = embedded.inventories(conn, ids)
    with_traits = embedded.traits(conn, ids)
    in_aggregates = embedded.aggregates(conn, ids)
    nodes = {
        p.uuid: Node(
            uuid=p.uuid,
            name=p.name,
            parent_uuid=p.parent_uuid,
            generation=p.generation,
            inventories={inv.resource_class: inv for inv in held.get(p.id, [])},
            traits=frozenset(with_traits.get(p.id, ())),
            aggregates=frozenset(in_aggregates.get(p.id, ())),
        )
        for p in members
    }
    stamps = [p.modified for p in members if p.modified is not None]
    stamps += [inv.modified for invs in held.values() for inv in invs if inv.modified]
    return Tree(root.uuid, ordered(root.uuid, nodes), max(stamps) if stamps else None)


def ordered(root_uuid: str, nodes: dict[str, Node]) -> list[Node]:
    """Parents before children: depth first from the root, siblings by name
    (then uuid). ``nodes`` by uuid; one unreachable from the root is left out."""
    children: dict[str | None, list[Node]] = {}
    for node in nodes.values():
        children.setdefault(node.parent_uuid, []).append(node)
    found, todo = [], [nodes[root_uuid]]
    while todo:
        node = todo.pop()
        found.append(node)
        below = sorted(children.get(node.uuid, ()), key=lambda n: (n.name, n.uuid or ""))
        todo.extend(reversed(below))
    return found


def check_shape(root_uuid: str, wanted: list[Node]) -> None:
    """The body is one tree rooted at ``root_uuid`` (pure: no database)."""
    roots = [node for node in wanted if node.parent_uuid is None]
    if len(roots) != 1:
        raise TreeShape(f"{len(roots)} providers have no parent; a tree has exactly one, its root")
    if roots[0].uuid != root_uuid:
        raise TreeShape(
            f"the provider without a parent is {roots[0].uuid or 'a new one'}, not the root "
            f"{root_uuid}"
        )
    seen_uuids: set[str] = set()
    seen_names: set[str] = set()
    for node in wanted:
        if node.uuid is not None:
            if node.uuid in seen_uuids:
                raise TreeShape(f"provider {node.uuid} is given twice")
            seen_uuids.add(node.uuid)
        if node.name in seen_names:
            raise TreeShape(f"the name {node.name!r} is given to two providers")
        seen_names.add(node.name)
    for node in wanted:
        if node.parent_uuid is not None and node.parent_uuid not in seen_uuids:
            raise TreeShape(
                f"the parent {node.parent_uuid} of provider {node.uuid or node.name!r} is "
                "not in the tree"
            )
        if node.parent_uuid is not None and node.parent_uuid == node.uuid:
            raise TreeShape(f"provider {node.uuid} is its own parent")
    # Every provider reaches the root (no loop among the others).
    parent_of = {node.uuid: node.parent_uuid for node in wanted if node.uuid is not None}
    for node in wanted:
        steps, current = 0, node.parent_uuid
        while current is not None:
            steps += 1
            if steps > len(wanted):
                raise TreeShape(f"provider {node.uuid or node.name!r} is in a loop of parents")
            current = parent_of.get(current)


@dataclass
class Plan:
    """What a tree write does, worked out before anything is written."""

    created: list[Node] = field(default_factory=list)  # parents first
    moved_or_renamed: list[Node] = field(default_factory=list)
    deleted: list[Provider] = field(default_factory=list)  # children first
    changed: dict[str, Node] = field(default_factory=dict)  # existing, by uuid
    parts: dict[str, tuple[bool, bool, bool]] = field(default_factory=dict)
    new_classes: list[str] = field(default_factory=list)
    new_traits: list[str] = field(default_factory=list)

    def kinds(self) -> frozenset[str]:
        kinds = set()
        if self.created:
            kinds.add(CREATE)
        if self.moved_or_renamed:
            kinds.add(UPDATE)
        if self.deleted:
            kinds.add(DELETE)
        for same_inventories, same_traits, same_aggregates in self.parts.values():
            if not same_inventories:
                kinds.add(INVENTORIES)
            if not same_traits:
                kinds.add(TRAITS)
            if not same_aggregates:
                kinds.add(AGGREGATES)
        if self.new_classes:
            kinds.add(NEW_CLASSES)
        if self.new_traits:
            kinds.add(NEW_TRAITS)
        return frozenset(kinds)


_EMPTY = Node(None, "", None, None)


def replace(
    conn: Connection,
    root_uuid: str,
    wanted: list[Node],
    permit: Callable[[frozenset[str]], None],
) -> Tree:
    """PUT /resource_provider_trees/{root_uuid}: the tree becomes ``wanted``
    (the module's docstring has the order of the checks); returns it as read
    back. ``permit`` raises for a kind of change the caller may not make."""
    check_shape(root_uuid, wanted)
    with_uuids = [
        node if node.uuid is not None else _with_uuid(node, str(uuidlib.uuid4())) for node in wanted
    ]
    wanted = ordered(root_uuid, {node.uuid: node for node in with_uuids})
    root = providers.find(conn, root_uuid)
    if root is not None and root.parent_id is not None:
        raise NotARoot(root.uuid, root.root_uuid)
    members = _members(conn, root) if root is not None else []
    by_uuid = {p.uuid: p for p in members}
    given = [node.uuid for node in wanted if node.uuid not in by_uuid]
    elsewhere = {p.uuid: p for p in providers.by_uuids(conn, given)} if given else {}
    for node in wanted:
        if node.uuid in elsewhere:
            if elsewhere[node.uuid].root_uuid == root_uuid:
                # This very tree, made by another writer since the root was
                # looked for (read committed): run again, and find it stale.
                raise ProviderChanged(node.uuid)
            raise InAnotherTree(node.uuid, elsewhere[node.uuid].root_uuid, root_uuid)
    _check_generations(wanted, by_uuid)
    current = {n.uuid: n for n in _read_tree(conn, root, members).nodes} if root else {}
    plan = _plan(conn, wanted, current, by_uuid)
    permit(plan.kinds())
    for node in wanted:  # the rule of PUT .../inventories from 1.26
        for inv in node.inventories.values():
            if inv.capacity < 0:
                raise InvalidInventory(node.uuid, inv.resource_class, True)
    if root is not None and not plan.kinds():
        return _read_tree(conn, root, members)  # nothing to write
    _write(conn, plan, wanted, by_uuid)
    root = providers.get(conn, root_uuid)
    return _read_tree(conn, root)


def _with_uuid(node: Node, uuid: str) -> Node:
    return Node(
        uuid, node.name, node.parent_uuid, node.generation, node.inventories, node.traits,
        node.aggregates,
    )  # fmt: skip


def _check_generations(wanted: list[Node], by_uuid: dict[str, Provider]) -> None:
    """Every provider of the body at the generation it is at (None: one the
    client means to create); every mismatch named at once."""
    stale = []
    for node in wanted:
        found = by_uuid.get(node.uuid)
        actual = found.generation if found is not None else None
        if node.generation != actual:
            stale.append((node.uuid, actual, node.generation))
    if stale:
        raise StaleProviders(tuple(stale))


def _plan(
    conn: Connection,
    wanted: list[Node],
    current: dict[str, Node],
    by_uuid: dict[str, Provider],
) -> Plan:
    plan = Plan()
    keep = {node.uuid for node in wanted}
    for node in wanted:
        was = current.get(node.uuid)
        if was is None:
            plan.created.append(node)
            continue
        parts = node.same_parts(was)
        if was.name != node.name or was.parent_uuid != node.parent_uuid:
            plan.moved_or_renamed.append(node)
        elif all(parts):
            continue
        plan.changed[node.uuid] = node
        plan.parts[node.uuid] = parts
    for node in plan.created:  # a new provider's parts are written too
        plan.parts[node.uuid] = node.same_parts(_EMPTY)
    gone = [p for p in by_uuid.values() if p.uuid not in keep]
    depth = {p.id: _depth(p, by_uuid) for p in gone}
    plan.deleted = sorted(gone, key=lambda p: -depth[p.id])
    plan.new_classes, plan.new_traits = _new_names(conn, wanted)
    return plan


def _depth(provider: Provider, by_uuid: dict[str, Provider]) -> int:
    steps, current = 0, provider
    while current.parent_uuid is not None and current.parent_uuid in by_uuid:
        steps += 1
        current = by_uuid[current.parent_uuid]
    return steps


def _new_names(conn: Connection, wanted: list[Node]) -> tuple[list[str], list[str]]:
    """The custom classes and traits to create; UnknownResourceClass or
    UnknownTrait for a name that is not custom and does not exist."""
    class_names = sorted({name for node in wanted for name in node.inventories})
    trait_names = sorted({name for node in wanted for name in node.traits})
    return (
        _missing(class_names, names.resource_class_ids(conn, class_names), UnknownResourceClass),
        _missing(trait_names, names.trait_ids(conn, trait_names), UnknownTrait),
    )


def _missing(asked: list[str], found: dict[str, int], unknown: type) -> list[str]:
    missing = [name for name in asked if name not in found]
    not_custom = [name for name in missing if not _CUSTOM.match(name) or len(name) > _LONGEST]
    if not_custom:
        raise unknown(tuple(not_custom))
    return missing


def _create_names(conn: Connection, plan: Plan) -> None:
    for name in plan.new_classes:
        try:
            resource_classes.create(conn, name)
        except ResourceClassExists:  # created meanwhile by another writer
            pass
    for name in plan.new_traits:
        traits.ensure(conn, name)


def _write(conn: Connection, plan: Plan, wanted: list[Node], by_uuid: dict[str, Provider]) -> None:
    _create_names(conn, plan)
    # Every provider that changes or goes moves its generation first, from
    # the one read: another writer since then makes the whole write run again.
    # In id order, as every tree write takes them: two writes of one tree
    # wait for each other rather than deadlock.
    bumped = [by_uuid[uuid] for uuid in plan.changed] + plan.deleted
    for provider in sorted(bumped, key=lambda p: p.id):
        try:
            providers.bump_generation(conn, provider)
        except ConcurrentUpdate as exc:
            raise ProviderChanged(exc.uuid) from exc
    made: dict[str, Provider] = {}

    def now(uuid: str) -> Provider:
        if uuid not in made:
            made[uuid] = providers.get(conn, uuid)
        return made[uuid]

    _free_names(conn, plan, wanted, by_uuid, made)
    for node in plan.created:
        parent = now(node.parent_uuid) if node.parent_uuid is not None else None
        try:
            made[node.uuid] = providers.create(conn, node.name, node.uuid, parent)
        except ProviderExists as exc:
            if exc.uuid is None:
                raise  # the name is another provider's
            # Made by another writer since this one read (two first writes
            # of one tree at once): run again, and the client's "new" is stale.
            raise ProviderChanged(node.uuid) from exc
    for node in plan.moved_or_renamed:
        parent = now(node.parent_uuid) if node.parent_uuid is not None else None
        made[node.uuid] = providers.update(conn, now(node.uuid), node.name, parent)
    for provider in plan.deleted:
        providers.delete(conn, now(provider.uuid))
    trait_ids = names.trait_ids(conn, {name for node in wanted for name in node.traits})
    for node in [*plan.created, *plan.changed.values()]:
        same_inventories, same_traits, same_aggregates = plan.parts[node.uuid]
        provider = now(node.uuid)
        if not same_inventories:
            inventory_store.replace(conn, provider, list(node.inventories.values()), bump=False)
        if not same_traits:
            trait_store.replace(conn, provider.id, {trait_ids[name] for name in node.traits})
        if not same_aggregates:
            aggregate_store.replace(conn, provider.id, sorted(node.aggregates))


def _free_names(
    conn: Connection,
    plan: Plan,
    wanted: list[Node],
    by_uuid: dict[str, Provider],
    made: dict[str, Provider],
) -> None:
    """A provider renamed or deleted whose name another provider of the body
    takes is given a name no one has first, so the writes that follow never
    meet a name in use within the tree (two children swapping names, a
    deleted child's name given to a new one)."""
    wanted_names = {node.name: node.uuid for node in wanted}
    leaving: Iterable[Provider] = [
        *(by_uuid[node.uuid] for node in plan.moved_or_renamed),
        *plan.deleted,
    ]
    for provider in leaving:
        taker = wanted_names.get(provider.name)
        if taker is not None and taker != provider.uuid:
            made[provider.uuid] = providers.update(
                conn, provider, f"placement-svc tree write {provider.uuid}"
            )
