"""A resource provider and what hangs off it: inventories, usages, aggregates,
traits, the allocations against it."""

from __future__ import annotations

from microversion_parse import Version

from placement_svc import microversion as mv
from placement_svc.policies import aggregates as aggregate_rules
from placement_svc.policies import allocations as allocation_rules
from placement_svc.policies import inventories as inventory_rules
from placement_svc.policies import resource_providers as provider_rules
from placement_svc.policies import traits as trait_rules
from placement_svc.policies import usages as usage_rules
from placement_svc.routes.records import (
    BAD_QUERY,
    INVALID_BODY,
    NO_PROVIDER,
    PROVIDER_CONFLICT,
    Operation,
    Route,
)
from placement_svc.schemas import aggregate, inventory, provider_tree, resource_provider, trait
from placement_svc.schemas.common import Schema

PROVIDER = "/resource_providers/{uuid}"
INVENTORIES = PROVIDER + "/inventories"


def _provider_query(version: Version) -> Schema:
    return resource_provider.for_version(version).list_query


ROUTES: tuple[Route, ...] = (
    Route(
        "/resource_providers",
        "resource_providers",
        (
            Operation(
                "GET",
                "list",
                provider_rules.LIST,
                {200: "resource_providers"},
                {400: BAD_QUERY},
                query=_provider_query,
                words=resource_provider.QUERY_WORDS,
                etag=True,
            ),
            Operation(
                "POST",
                "create",
                provider_rules.CREATE,
                {200: "resource_provider"},
                {
                    400: INVALID_BODY,
                    409: "A provider with the uuid or name exists (placement.duplicate_name).",
                },
                body=lambda v: resource_provider.for_version(v).create,
                location=True,
            ),
        ),
    ),
    Route(
        PROVIDER,
        "resource_providers",
        (
            Operation(
                "GET",
                "show",
                provider_rules.SHOW,
                {200: "resource_provider"},
                {400: "include= names something else.", 404: NO_PROVIDER},
                query=_provider_query,
                query_keys=("include",),
                words=resource_provider.QUERY_WORDS,
                etag=True,
            ),
            Operation(
                "PUT",
                "update",
                provider_rules.UPDATE,
                {200: "resource_provider"},
                {
                    400: INVALID_BODY,
                    404: NO_PROVIDER,
                    409: "Another provider has the name (placement.duplicate_name).",
                },
                body=lambda v: resource_provider.for_version(v).update,
            ),
            Operation(
                "DELETE",
                "delete",
                provider_rules.DELETE,
                {204: None},
                {404: NO_PROVIDER, 409: "The provider has allocations or child providers."},
            ),
        ),
    ),
    Route(
        INVENTORIES,
        "inventories",
        (
            Operation(
                "GET",
                "list",
                inventory_rules.LIST,
                {200: "inventories"},
                {404: NO_PROVIDER},
                etag=True,
            ),
            Operation(
                "POST",
                "create",
                inventory_rules.CREATE,
                {201: "inventory"},
                {
                    400: INVALID_BODY,
                    404: NO_PROVIDER,
                    409: "The provider has inventory of the class, or changed meanwhile.",
                },
                body=lambda v: inventory.for_version(v).create,
                location=True,
            ),
            Operation(
                "PUT",
                "replace_all",
                inventory_rules.UPDATE,
                {200: "inventories"},
                {
                    400: INVALID_BODY,
                    404: NO_PROVIDER,
                    409: PROVIDER_CONFLICT + " Or allocations hold a class the body leaves out.",
                },
                body=lambda v: inventory.for_version(v).replace_all,
            ),
            Operation(
                "DELETE",
                "delete_all",
                inventory_rules.DELETE,
                {204: None},
                {
                    404: NO_PROVIDER,
                    405: "Before microversion 1.5.",
                    409: "Allocations hold some of the inventory, or it changed meanwhile.",
                },
            ),
        ),
    ),
    Route(
        INVENTORIES + "/{resource_class}",
        "inventories",
        (
            Operation(
                "GET",
                "show",
                inventory_rules.SHOW,
                {200: "inventory"},
                {404: "No such provider, or it has no inventory of the class."},
                etag=True,
            ),
            Operation(
                "PUT",
                "update",
                inventory_rules.UPDATE,
                {200: "inventory"},
                {
                    400: INVALID_BODY + " Or the provider has no inventory of the class.",
                    404: "No such provider or no such resource class.",
                    409: PROVIDER_CONFLICT + " Or allocations exceed the new capacity.",
                },
                body=lambda v: inventory.for_version(v).update_one,
            ),
            Operation(
                "DELETE",
                "delete",
                inventory_rules.DELETE,
                {204: None},
                {
                    404: "No such provider, or it has no inventory of the class.",
                    409: "Allocations hold the inventory, or it changed meanwhile.",
                },
            ),
        ),
    ),
    Route(
        PROVIDER + "/usages",
        "provider_usages",
        (
            Operation(
                "GET",
                "show",
                usage_rules.PROVIDER_USAGES,
                {200: "provider_usages"},
                {404: NO_PROVIDER},
                etag=True,
            ),
        ),
    ),
    Route(
        PROVIDER + "/aggregates",
        "aggregates",
        (
            Operation(
                "GET",
                "list",
                aggregate_rules.LIST,
                {200: "aggregates"},
                {404: NO_PROVIDER},
                since=mv.AGGREGATES,
                etag=True,
            ),
            Operation(
                "PUT",
                "replace",
                aggregate_rules.UPDATE,
                {200: "aggregates"},
                {400: INVALID_BODY, 404: NO_PROVIDER, 409: PROVIDER_CONFLICT},
                since=mv.AGGREGATES,
                body=aggregate.for_version,
            ),
        ),
    ),
    Route(
        PROVIDER + "/allocations",
        "allocations",
        (
            Operation(
                "GET",
                "for_provider",
                allocation_rules.RP_ALLOC_LIST,
                {200: "provider_allocations"},
                {404: NO_PROVIDER},
                etag=True,
            ),
        ),
    ),
    Route(
        PROVIDER + "/traits",
        "provider_traits",
        (
            Operation(
                "GET",
                "list",
                trait_rules.RP_TRAIT_LIST,
                {200: "provider_traits"},
                {404: NO_PROVIDER},
                since=mv.TRAITS,
                etag=True,
            ),
            Operation(
                "PUT",
                "replace",
                trait_rules.RP_TRAIT_UPDATE,
                {200: "provider_traits"},
                {
                    400: INVALID_BODY + " Or a trait does not exist.",
                    404: NO_PROVIDER,
                    409: PROVIDER_CONFLICT,
                },
                since=mv.TRAITS,
                body=lambda v: trait.for_version(v).provider_traits,
            ),
            Operation(
                "DELETE",
                "delete",
                trait_rules.RP_TRAIT_DELETE,
                {204: None},
                {404: NO_PROVIDER, 409: "The provider changed meanwhile."},
                since=mv.TRAITS,
            ),
        ),
    ),
    Route(
        "/resource_provider_trees/{root_uuid}",
        "provider_trees",
        (
            Operation(
                "GET",
                "show",
                provider_rules.SHOW,
                {200: "provider_tree"},
                {404: NO_PROVIDER + " Or it is not a root (the detail names its root)."},
                etag=True,
                notes="A whole tree, parents before children, each provider with its "
                "inventories, traits and aggregates (placement-svc's own, 1.49). Also "
                "needs the inventories, traits and aggregates list rules.",
            ),
            Operation(
                "PUT",
                "replace",
                provider_rules.SHOW,
                {200: "provider_tree"},
                {
                    400: INVALID_BODY + " Or a provider of the body is in another tree, or "
                    "the uuid names a provider that is not a root, or a class or trait that "
                    "is not custom does not exist.",
                    409: "Providers were not at the generations given (every one named, "
                    "placement.concurrent_update), or a name is another provider's "
                    "(placement.duplicate_name), or a provider to delete has allocations "
                    "(placement.resource_provider.inuse), or an inventory to remove is in use "
                    "(placement.inventory.inuse).",
                },
                body=lambda _v: provider_tree.TREE,
                etag=True,
                notes="The tree becomes exactly the body, in one transaction (placement-svc's "
                "own, 1.49). Each single write's rule is checked for what the body changes: "
                "creating, updating or deleting providers, their inventories, traits and "
                "aggregates, new custom resource classes and traits. The answer is the "
                "GET's body, with the ETag the GET would answer.",
            ),
        ),
        since=mv.TREE_WRITES,
    ),
)
