"""The version document, and the catalogue of names: resource classes and traits."""

from __future__ import annotations

from microversion_parse import Version

from placement_svc import microversion as mv
from placement_svc.policies import resource_classes as class_rules
from placement_svc.policies import traits as trait_rules
from placement_svc.routes.records import INVALID_BODY, Operation, Route
from placement_svc.schemas import resource_class, trait
from placement_svc.schemas.common import Schema


def _rename(version: Version) -> Schema | None:
    """PUT /resource_classes/{name}: a body (the new name) before 1.7."""
    if version >= mv.RESOURCE_CLASS_PUT_CREATES:
        return None
    return resource_class.for_version(version)


ROUTES: tuple[Route, ...] = (
    Route(
        "/",
        "root",
        (Operation("GET", "home", None, {200: "version_document"}, notes="No token needed."),),
    ),
    Route(
        "/resource_classes",
        "resource_classes",
        (
            Operation(
                "GET",
                "list",
                class_rules.LIST,
                {200: "resource_classes"},
                since=mv.RESOURCE_CLASSES,
            ),
            Operation(
                "POST",
                "create",
                class_rules.CREATE,
                {201: None},
                {400: INVALID_BODY, 409: "A resource class of that name exists."},
                since=mv.RESOURCE_CLASSES,
                body=resource_class.for_version,
                location=True,
            ),
        ),
    ),
    Route(
        "/resource_classes/{name}",
        "resource_classes",
        (
            Operation(
                "GET",
                "show",
                class_rules.SHOW,
                {200: "resource_class"},
                {404: "No resource class has the name."},
                since=mv.RESOURCE_CLASSES,
            ),
            Operation(
                "PUT",
                "update",
                class_rules.UPDATE,
                {201: None, 204: None},
                {
                    400: "The name is not a custom resource class name (CUSTOM_ and A-Z, 0-9, _).",
                    409: "A resource class was created under the name meanwhile.",
                },
                since=mv.RESOURCE_CLASSES,
                body=_rename,
                path={"name": lambda v: resource_class.for_version(v)["properties"]["name"]},
                location=True,
                notes="Creates the custom resource class (201), or confirms it exists (204). "
                "Before 1.7 (upstream's history), a body renamed it.",
            ),
            Operation(
                "DELETE",
                "delete",
                class_rules.DELETE,
                {204: None},
                {
                    400: "A standard resource class cannot be deleted.",
                    404: "No resource class has the name.",
                    409: "A provider has inventory of the class.",
                },
                since=mv.RESOURCE_CLASSES,
            ),
        ),
    ),
    Route(
        "/traits",
        "traits",
        (
            Operation(
                "GET",
                "list",
                trait_rules.TRAITS_LIST,
                {200: "traits"},
                {
                    400: "name= is not in:<names> or startswith:<prefix>, or associated= "
                    "is not true or false."
                },
                since=mv.TRAITS,
                query=lambda v: trait.for_version(v).list_query,
                words=trait.QUERY_WORDS,
            ),
        ),
    ),
    Route(
        "/traits/{name}",
        "traits",
        (
            Operation(
                "GET",
                "show",
                trait_rules.TRAITS_SHOW,
                {204: None},
                {404: "No trait has the name."},
                since=mv.TRAITS,
            ),
            Operation(
                "PUT",
                "update",
                trait_rules.TRAITS_UPDATE,
                {201: None, 204: None},
                {400: "The name is not a custom trait name (CUSTOM_ and A-Z, 0-9, _)."},
                since=mv.TRAITS,
                path={"name": lambda v: trait.for_version(v).custom_trait},
                location=True,
                notes="Creates the custom trait (201), or confirms it exists (204).",
            ),
            Operation(
                "DELETE",
                "delete",
                trait_rules.TRAITS_DELETE,
                {204: None},
                {
                    400: "A standard trait cannot be deleted.",
                    404: "No trait has the name.",
                    409: "A provider has the trait.",
                },
                since=mv.TRAITS,
            ),
        ),
    ),
)
