"""/resource_provider_trees/{root_uuid} (1.49, placement-svc's own): a whole
provider tree read, or written, in one request."""

from __future__ import annotations

import uuid as uuidlib
from functools import partial

from placement_svc import errors
from placement_svc.api.wording import concurrent_update, inventory_in_use, no_provider
from placement_svc.db import inventories
from placement_svc.db.exceptions import (
    ConcurrentUpdate,
    InventoryInUse,
    ParentProviderNotFound,
    ProviderExists,
    ProviderHasChildren,
    ProviderInUse,
    ProviderNotFound,
    UnknownResourceClass,
    UnknownTrait,
)
from placement_svc.http import answering, reading
from placement_svc.ops import trees as ops
from placement_svc.ops.exceptions import (
    InAnotherTree,
    InvalidInventory,
    NotARoot,
    StaleProviders,
    TreeShape,
)
from placement_svc.policies import aggregates as aggregate_rules
from placement_svc.policies import inventories as inventory_rules
from placement_svc.policies import resource_classes as class_rules
from placement_svc.policies import resource_providers as provider_rules
from placement_svc.policies import traits as trait_rules
from placement_svc.uuidutil import is_uuid_like

# Reading a tree is reading each provider's inventories, traits and
# aggregates: the single reads' rules, all of them (the operation's own,
# placement:resource_providers:show, is checked first).
READ_RULES = (inventory_rules.LIST, trait_rules.RP_TRAIT_LIST, aggregate_rules.LIST)

# The single write's rule for each kind of change a tree write makes.
WRITE_RULES = {
    ops.CREATE: provider_rules.CREATE,
    ops.UPDATE: provider_rules.UPDATE,
    ops.DELETE: provider_rules.DELETE,
    ops.INVENTORIES: inventory_rules.UPDATE,
    ops.TRAITS: trait_rules.RP_TRAIT_UPDATE,
    ops.AGGREGATES: aggregate_rules.UPDATE,
    ops.NEW_CLASSES: class_rules.UPDATE,
    ops.NEW_TRAITS: trait_rules.TRAITS_UPDATE,
}


def _not_a_root(uuid: str, root_uuid: str) -> str:
    return f"Resource provider {uuid} is not the root of a tree: its root is {root_uuid}."


def _stale(stale) -> str:
    named = []
    for uuid, actual, given in stale:
        given_text = "none" if given is None else given
        if actual is None:
            named.append(f"{uuid} does not exist (given {given_text})")
        else:
            named.append(f"{uuid} is at {actual} (given {given_text})")
    return "resource provider generation conflict: " + "; ".join(named)


def _words(fact: Exception, action: str) -> errors.PlacementError | None:
    """What a tree read or write reports, in the single writes' words where
    they have some (and their error codes always)."""
    match fact:
        case ProviderNotFound(uuid):
            return errors.NotFound(no_provider(uuid))
        case NotARoot(uuid, root_uuid) if action == "show":
            return errors.NotFound(_not_a_root(uuid, root_uuid))
        case NotARoot(uuid, root_uuid):
            return errors.BadRequest(
                _not_a_root(uuid, root_uuid) + " A tree write moves no provider out of its tree."
            )
        case TreeShape(problem):
            return errors.BadRequest(f"The body is not one provider tree: {problem}.")
        case InAnotherTree(uuid, its_root, root_uuid):
            return errors.BadRequest(
                f"Resource provider {uuid} is in the tree of {its_root}, not of {root_uuid}: "
                "a tree write moves no provider between trees."
            )
        case StaleProviders(stale):
            return errors.Conflict(_stale(stale), code=errors.CONCURRENT_UPDATE)
        case ProviderExists(_uuid, name):
            return errors.Conflict(
                f"Conflicting resource provider name: {name} already exists.",
                code=errors.DUPLICATE_NAME,
            )
        case ProviderInUse(uuid):
            return errors.Conflict(
                f"Unable to delete resource provider {uuid}: Resource provider has allocations.",
                code=errors.PROVIDER_IN_USE,
            )
        case ProviderHasChildren(uuid):  # a child added by another writer meanwhile
            return errors.Conflict(
                f"Unable to delete parent resource provider {uuid}: It has child resource "
                "providers.",
                code=errors.PROVIDER_CANNOT_DELETE_PARENT,
            )
        case InventoryInUse(uuid, classes):
            return errors.Conflict(
                f"update conflict: {inventory_in_use(uuid, classes)}",
                code=errors.INVENTORY_INUSE,
            )
        case InvalidInventory(uuid, resource_class, _zero_allowed):
            return errors.BadRequest(
                f"Unable to update inventory for resource provider {uuid}: Invalid inventory "
                f"for '{resource_class}' on resource provider '{uuid}'. The reserved value is "
                "greater than total."
            )
        case UnknownResourceClass(names):
            return errors.BadRequest(
                f"Unknown resource class in inventory: No such resource class {names[0]}."
            )
        case UnknownTrait(names):
            return errors.BadRequest(f"No such trait(s): {', '.join(names)}.")
        case ParentProviderNotFound(uuid):  # the parent went meanwhile
            return concurrent_update(uuid)
        case ConcurrentUpdate(uuid):  # still, after the retries
            return concurrent_update(uuid)
    return None


def _canonical(uuid: str) -> str:
    return str(uuidlib.UUID(uuid))


def _node(entry: dict) -> ops.Node:
    """One provider of a PUT body (checked against its schema) as a Node."""
    parent = entry["parent_provider_uuid"]
    return ops.Node(
        uuid=_canonical(entry["uuid"]) if "uuid" in entry else None,
        name=entry["name"],
        parent_uuid=_canonical(parent) if parent is not None else None,
        generation=entry.get("generation"),
        inventories={
            name: inventories.with_defaults(name, record)
            for name, record in entry.get("inventories", {}).items()
        },
        traits=frozenset(entry.get("traits", ())),
        aggregates=frozenset(entry.get("aggregates", ())),
    )


def body(tree: ops.Tree) -> dict:
    return {
        "root": tree.root,
        "providers": [
            {
                "uuid": node.uuid,
                "name": node.name,
                "parent_provider_uuid": node.parent_uuid,
                "generation": node.generation,
                "inventories": {
                    name: node.inventories[name].fields() for name in sorted(node.inventories)
                },
                "traits": sorted(node.traits),
                "aggregates": sorted(node.aggregates),
            }
            for node in tree.nodes
        ],
    }


class ProviderTrees:
    def __init__(self, db):
        self.db = db

    def _authorize_read(self, req) -> None:
        reading.authorize(req)
        for rule in READ_RULES:
            req.context.placement.can(rule)

    def show(self, req, resp, root_uuid):
        reading.check_accept(req)
        self._authorize_read(req)
        with answering.worded(_words, "show"):
            tree = self.db.read(partial(ops.read, root_uuid=root_uuid))
        answering.render(resp, body(tree))
        answering.cache_headers(req, resp, tree.newest)

    def replace(self, req, resp, root_uuid):
        reading.require_json(req)
        self._authorize_read(req)
        if not is_uuid_like(root_uuid):
            raise errors.BadRequest(f"Malformed root provider uuid: {root_uuid}")
        data = reading.read_body(req)
        root_uuid = _canonical(root_uuid)
        if _canonical(data["root"]) != root_uuid:
            raise errors.BadRequest(
                f"The body's root {data['root']} is not the URL's provider {root_uuid}."
            )
        with answering.worded(_words, "replace"):
            wanted = [_node(entry) for entry in data["providers"]]
            permit = partial(self._permit, req)
            work = partial(ops.replace, root_uuid=root_uuid, wanted=wanted, permit=permit)
            tree = self.db.write(work)
        answering.render(resp, body(tree))
        answering.cache_headers(req, resp, tree.newest)

    @staticmethod
    def _permit(req, kinds: frozenset[str]) -> None:
        """The single write's rule of each kind of change, in a fixed order."""
        for kind, rule in WRITE_RULES.items():
            if kind in kinds:
                req.context.placement.can(rule)
