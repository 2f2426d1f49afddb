"""The records routes are declared in (see placement_svc/routes/__init__.py),
and the words several families' operations share."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

from microversion_parse import Version

from placement_svc import microversion as mv
from placement_svc.schemas.common import Param, Schema

SchemaOf = Callable[[Version], Schema | None]  # None: no such schema at that version


@dataclass(frozen=True)
class Operation:
    """One method of one URL.

    ``handler``: the name of the method serving it on its route's resource.
    ``policy``: the rule it is authorized by (None: no token needed).
    ``ok``: the success statuses, each with the name of its body in
    ``schemas/responses.Bodies`` (None: no body). ``errors``: the errors
    particular to the operation, each with why (the ones every request can
    get are the OpenAPI document's to add). ``since``: the microversion the
    operation appears at, a 404 before. ``allowed_since``: for a method of
    our own on an upstream URL, the version it joins the URL's Allow at
    (a 405 before, as for any method the URL lacks). ``body``, ``query``:
    the request schemas, by version; ``query_keys``: the keys of ``query``
    the handler reads, where not all; ``words``: what each query parameter
    means, by name. ``path``: a path parameter's schema where the handler
    checks one. ``location``: its successes carry a Location header.
    ``etag``: a conditional read from 1.47 (ETag, If-None-Match, 304); on a
    PUT, the ETag of its answer only.
    """

    method: str
    handler: str
    policy: str | None
    ok: Mapping[int, str | None]
    errors: Mapping[int, str] = field(default_factory=dict)
    since: Version = mv.BASE
    allowed_since: Version | None = None
    body: SchemaOf | None = None
    query: SchemaOf | None = None
    query_keys: tuple[str, ...] | None = None
    words: Mapping[str, Param] = field(default_factory=dict)
    path: Mapping[str, Callable[[Version], dict]] = field(default_factory=dict)
    location: bool = False
    etag: bool = False
    notes: str = ""


@dataclass(frozen=True)
class Route:
    """One URL template, the resource (by name: app.py builds one per name)
    whose methods serve it, and its operations. ``since``: a URL of our own,
    a 404 before that version whatever the method."""

    template: str
    resource: str
    operations: tuple[Operation, ...]
    since: Version | None = None


NO_PROVIDER = "No resource provider has the uuid."
PROVIDER_CONFLICT = (
    "The resource_provider_generation given is not the provider's (placement.concurrent_update)."
)
INVALID_BODY = "The body does not validate against its schema, or breaks a rule of the data."
BAD_QUERY = (
    "A parameter is unknown at this microversion or badly formed (each names what is wrong)."
)
JSON_OR_TEXT_406 = "The Accept header takes neither application/json nor text/plain."
WRITE_CONFLICT = (
    "the capacity or an inventory's rules do not allow the amounts, or the data changed meanwhile."
)

PROVIDER = "/resource_providers/{uuid}"
INVENTORIES = PROVIDER + "/inventories"


# Path parameters, by name: what a URL's {name} holds.
PATH_PARAMETERS: dict[str, Param] = {
    "uuid": Param({"type": "string"}, "The resource provider's uuid (anything else: 404)."),
    "name": Param({"type": "string"}, "The name."),
    "resource_class": Param({"type": "string"}, "The resource class name."),
    "consumer_uuid": Param({"type": "string"}, "The consumer's uuid."),
    "root_uuid": Param(
        {"type": "string"}, "The uuid of the tree's root provider (its provider's, for a new tree)."
    ),
}
