"""/resource_providers and /resource_providers/{uuid}."""

from __future__ import annotations

import uuid as uuidlib
from collections.abc import Callable
from functools import partial
from json.encoder import encode_basestring as _quote  # C: str -> JSON string

from placement_svc import errors, queryparams
from placement_svc import microversion as mv
from placement_svc.api.wording import no_provider
from placement_svc.db.exceptions import (
    ParentProviderNotFound,
    ProviderExists,
    ProviderHasChildren,
    ProviderInUse,
    ProviderNotFound,
    UnknownResourceClass,
    UnknownTrait,
)
from placement_svc.http import answering, reading
from placement_svc.ops import providers as ops
from placement_svc.ops.exceptions import (
    ProviderIsOwnParent,
    ProviderNameMissing,
    ProviderTreeLoop,
    ReparentingNotAllowed,
    UnparentingNotAllowed,
)
from placement_svc.policies import aggregates as aggregate_policies
from placement_svc.policies import inventories as inventory_policies
from placement_svc.policies import traits as trait_policies
from placement_svc.policies import usages as usage_policies
from placement_svc.schemas import resource_provider as schema

# Why upstream could not create or save a provider, after "failed because: ".
_REASONS = {
    ProviderNameMissing: "name is required",
    ProviderIsOwnParent: "parent provider UUID cannot be same as UUID. Please set parent "
    "provider UUID to None if there is no parent.",
    ParentProviderNotFound: "parent provider UUID does not exist.",
    ReparentingNotAllowed: "re-parenting a provider is not currently allowed.",
    UnparentingNotAllowed: "un-parenting a provider is not currently allowed.",
    ProviderTreeLoop: "creating loop in the provider tree is not allowed.",
}


def _words(fact: Exception, action: str, name: str = "") -> errors.PlacementError | None:
    """Upstream's answer to what the provider units of work report."""
    match fact:
        case UnknownTrait(names):
            return errors.BadRequest(
                f'Invalid trait(s) in "required" parameter: No such trait(s): {", ".join(names)}.'
            )
        case UnknownResourceClass(names):
            return errors.BadRequest(
                f"Invalid resource class in resources parameter: No such resource class {names[0]}."
            )
        case ProviderNotFound(uuid) if action == "delete":
            return errors.NotFound(f"{no_provider(uuid)} for delete")
        case ProviderNotFound(uuid):
            return errors.NotFound(no_provider(uuid))
        case ProviderExists(uuid, taken_name) if action == "create":
            taken = [f"uuid: {uuid}"] if uuid else []
            taken += [f"name: {taken_name}"] if taken_name else []
            return _duplicate(", ".join(taken))
        case ProviderExists(_uuid, taken_name):
            return _duplicate(taken_name)
        case ProviderNameMissing() | ProviderIsOwnParent() | ParentProviderNotFound() if (
            action == "create"
        ):
            return errors.BadRequest(
                f'Unable to create resource provider "{name}", {fact.uuid}: Object action '
                f"create failed because: {_REASONS[type(fact)]}"
            )
        case (
            ParentProviderNotFound()
            | ReparentingNotAllowed()
            | UnparentingNotAllowed()
            | ProviderTreeLoop()
        ):
            return _cannot_save(fact)
        case ProviderHasChildren(uuid):
            return errors.Conflict(
                f"Unable to delete parent resource provider {uuid}: It has child resource "
                "providers.",
                code=errors.PROVIDER_CANNOT_DELETE_PARENT,
            )
        case ProviderInUse(uuid):
            return errors.Conflict(
                f"Unable to delete resource provider {uuid}: Resource provider has allocations.",
                code=errors.PROVIDER_IN_USE,
            )
    return None


def _cannot_save(fact) -> errors.BadRequest:
    # Upstream's own check for the parent names action "create"; its failed write, "update".
    checked = isinstance(fact, ParentProviderNotFound) and not fact.vanished
    return errors.BadRequest(
        f"Unable to save resource provider {fact.uuid}: Object action "
        f"{'create' if checked else 'update'} failed because: {_REASONS[type(fact)]}"
    )


def _duplicate(what: str) -> errors.Conflict:
    return errors.Conflict(
        f"Conflicting resource provider {what} already exists.", code=errors.DUPLICATE_NAME
    )


def represent(req, provider, embedded: ops.Embedded | None = None) -> dict:
    return representer(req)(provider, embedded)


def representer(req) -> Callable[..., dict]:
    """A provider's body at the request's version, as a function made once
    per request: a list of thousands asks the version, the links' relations
    and the mount prefix once, not once per provider."""
    version = reading.version(req)
    prefix = answering.url(req, "/resource_providers/")
    rels = schema.link_rels(version)
    nested = version >= mv.NESTED_PROVIDERS

    def body_of(provider, embedded: ops.Embedded | None = None) -> dict:
        base = prefix + provider.uuid
        body = {
            "uuid": provider.uuid,
            "name": provider.name,
            "generation": provider.generation,
            "links": [{"rel": "self", "href": base}]
            + [{"rel": rel, "href": f"{base}/{rel}"} for rel in rels],
        }
        if nested:
            body["parent_provider_uuid"] = provider.parent_uuid
            body["root_provider_uuid"] = provider.root_uuid
        if embedded is not None:
            body.update(_embedded(provider, embedded))
        return body

    return body_of


def list_json(req, providers, embedded: ops.Embedded | None = None) -> bytes:
    """GET /resource_providers' body: the bodies ``representer`` makes, in
    its keys' order, written straight as JSON from the list's rows
    (``ListedProvider``); with ``embedded`` (include=, 1.45), each
    provider's embedded bodies after its own, written by orjson as
    ``answering.dumps`` writes them.
    A list of thousands is the read operators and nova's periodic make
    most, and a dict per provider and per link, then an encoder walking
    them, cost twice this.

    Every string (name, uuids, the mount prefix) is quoted by the standard
    library's C encoder, non-ASCII kept as UTF-8 as ``answering.dumps``
    keeps it. The pieces are small strings joined once at the end: a
    buffer per provider (orjson's per string, a format's per body) cost
    several times as much. What a provider's body holds but for its name
    and generation is kept between requests under its row's ``uuids``
    (``_places``). A name no UTF-8 can hold (a lone surrogate) is left to
    ``answering.dumps``."""
    version = reading.version(req)
    href = _quote(answering.url(req, "/resource_providers/"))[1:-1]
    rels = tuple(_quote(rel)[1:-1] for rel in schema.link_rels(version))
    nested = version >= mv.NESTED_PROVIDERS
    places = _places(href, rels, nested)
    get = places.get
    out: list[str] = []
    for row in providers:
        _id, uuids, name, generation, _modified = row
        place = get(uuids)
        if place is None:
            place = places[uuids] = _place(uuids, href, rels, nested)
        name = "null" if name is None else _quote(name)
        generation = "null" if generation is None else str(generation)
        if embedded is None:
            out += (place[0], name, ',"generation":', generation, place[1], ",")
        else:  # the provider's body without its closing brace, then the embedded ones
            included = answering.dumps(_embedded(row, embedded)).decode("utf-8")
            out += (place[0], name, ',"generation":', generation, place[1][:-1], ",")
            out += (included[1:], ",")
    if out:
        out.pop()  # the comma after the last
    try:
        return ('{"resource_providers":[' + "".join(out) + "]}").encode("utf-8")
    except UnicodeEncodeError:
        body_of = representer(req)
        listed = [body_of(ops.ListedProvider._make(row), embedded) for row in providers]
        return answering.dumps({"resource_providers": listed})


# (the mount prefix, the links' relations, nested) -> a provider's uuids
# (its own, its parent's, its root's, as ListedProvider joins them) -> what
# its list body holds before its name and after its generation. Kept by
# each process between requests: a pure function of its key, read again for
# every list. Bounded: a form keeps PLACES_KEPT providers and starts over
# past them, and FORMS_KEPT forms (versions of the links, prefixes) are kept
# at most.
_PLACES: dict[tuple[str, tuple[str, ...], bool], dict[str, tuple[str, str]]] = {}
PLACES_KEPT = 20_000
FORMS_KEPT = 4


def _places(href: str, rels: tuple[str, ...], nested: bool) -> dict[str, tuple[str, str]]:
    form = (href, rels, nested)
    kept = _PLACES.get(form)
    if kept is None:
        if len(_PLACES) >= FORMS_KEPT:
            _PLACES.clear()
        kept = _PLACES[form] = {}
    elif len(kept) >= PLACES_KEPT:
        kept.clear()
    return kept


def _place(uuids: str, href: str, rels: tuple[str, ...], nested: bool) -> tuple[str, str]:
    """A provider's list body around its name and generation: its uuid,
    then its links and (``nested``) its parent's and root's uuids."""
    uuid, parent_uuid, root_uuid = uuids.split("|")
    quoted = _quote(uuid)
    bare = quoted[1:-1]
    links = [f'"links":[{{"rel":"self","href":"{href}{bare}"}}']
    links += [f',{{"rel":"{rel}","href":"{href}{bare}/{rel}"}}' for rel in rels]
    after = "," + "".join(links) + "]"
    if nested:
        parent = _quote(parent_uuid) if parent_uuid else "null"
        after += f',"parent_provider_uuid":{parent},"root_provider_uuid":{_quote(root_uuid)}'
    return '{"uuid":' + quoted + ',"name":', after + "}"


def _embedded(provider, embedded: ops.Embedded) -> dict:
    """What include= asked for (1.45): the bodies of the provider's own
    sub-resource reads, as GET /resource_providers/{uuid}/<name> answers."""
    pid, generation = provider.id, provider.generation
    body: dict = {}
    if embedded.inventories is not None:
        held = embedded.inventories.get(pid, [])
        body["inventories"] = {
            "resource_provider_generation": generation,
            "inventories": {inv.resource_class: inv.fields() for inv in held},
        }
    if embedded.traits is not None:
        body["traits"] = {
            "traits": embedded.traits.get(pid, []),
            "resource_provider_generation": generation,
        }
    if embedded.aggregates is not None:
        body["aggregates"] = {
            "aggregates": embedded.aggregates.get(pid, []),
            "resource_provider_generation": generation,
        }
    if embedded.usages is not None:
        body["usages"] = {
            "resource_provider_generation": generation,
            "usages": embedded.usages.get(pid, {}),
        }
    return body


def _include(params: dict[str, list[str]]) -> frozenset[str] | None:
    """include=a,b (1.45): the sub-resources to embed; None without it."""
    if "include" not in params:
        return None
    value = params["include"][-1]
    names = [name.strip() for name in value.split(",")]
    unknown = [name for name in names if name not in ops.INCLUDES]
    if unknown:
        raise errors.BadRequest(
            f"Invalid query string parameters: unknown include value {unknown[0]!r} in "
            f"{value!r}: expected a comma-separated list of {', '.join(ops.INCLUDES)}."
        )
    return frozenset(names)


# Every read obeys its own rule (issue 28): each include= member embeds the
# body of one of the provider's own reads, so asking for it needs that read's
# rule, on top of placement:resource_providers:list (or :show):
#   inventories -> placement:resource_providers:inventories:list
#                  (GET /resource_providers/{uuid}/inventories)
#   traits      -> placement:resource_providers:traits:list
#                  (GET /resource_providers/{uuid}/traits)
#   aggregates  -> placement:resource_providers:aggregates:list
#                  (GET /resource_providers/{uuid}/aggregates)
#   usages      -> placement:resource_providers:usages
#                  (GET /resource_providers/{uuid}/usages)
INCLUDE_RULES = {
    "inventories": inventory_policies.LIST,
    "traits": trait_policies.RP_TRAIT_LIST,
    "aggregates": aggregate_policies.LIST,
    "usages": usage_policies.PROVIDER_USAGES,
}


def _can_include(req, include: frozenset[str] | None) -> None:
    """403, as the single read's, unless the caller may do the read of every
    member asked for; only those are checked, in ``ops.INCLUDES`` order, and
    before anything is read from the database."""
    for name in ops.INCLUDES:
        if include is not None and name in include:
            req.context.placement.can(INCLUDE_RULES[name])


def _filters(params: dict[str, list[str]], version) -> dict:
    """The query's filters as ``ops.list_filtered`` takes them; each
    parameter's last value counts, except the repeatable ones."""
    last = {key: values[-1] for key, values in params.items()}
    return {
        "name": last.get("name") or None,  # an empty name filters nothing, as upstream
        "uuid": last.get("uuid"),
        "in_tree": queryparams.in_tree(last["in_tree"]) if "in_tree" in last else None,
        "member_of": queryparams.member_of(params.get("member_of", []), version),
        "required": queryparams.required(params.get("required", []), version),
        "resources": queryparams.resources(last["resources"]) if "resources" in last else {},
    }


class ResourceProviders:
    def __init__(self, db):
        self.db = db

    def list(self, req, resp):
        reading.check_accept(req)
        reading.authorize(req)
        version = reading.version(req)
        params = reading.declared_query(req)
        include = _include(params)
        filters = _filters(params, version)
        _can_include(req, include)
        with answering.worded(_words, "list"):
            if include is None:
                found, embedded = self.db.read(partial(ops.list_filtered, **filters)), None
            else:
                work = partial(ops.list_including, include=include, **filters)
                found, embedded = self.db.read(work)
        answering.render_json(resp, list_json(req, found.providers, embedded))
        answering.cache_headers(req, resp, found.newest)

    def create(self, req, resp):
        reading.require_json(req)
        reading.authorize(req)
        version = reading.version(req)
        data = reading.read_body(req)
        uuid = str(uuidlib.UUID(data["uuid"])) if data.get("uuid") else str(uuidlib.uuid4())
        parent = data.get("parent_provider_uuid")
        with answering.worded(_words, "create", data["name"]):
            provider = self.db.write(
                partial(ops.create, name=data["name"], uuid=uuid, parent_uuid=parent)
            )
        resp.set_header("Location", answering.location(req, f"/resource_providers/{provider.uuid}"))
        if version >= mv.PROVIDER_POST_RETURNS_BODY:
            answering.render(resp, represent(req, provider))
            answering.cache_headers(req, resp, provider.modified)
        else:
            answering.no_content(resp, 201)

    def show(self, req, resp, uuid):
        reading.check_accept(req)
        reading.authorize(req)
        # Before 1.45 the query string is not read, as upstream's.
        include = None
        if reading.version(req) >= mv.PROVIDER_INCLUDE:
            include = _include(reading.query(req))
        _can_include(req, include)
        with answering.worded(_words, "show"):
            if include is None:
                provider, embedded = self.db.read(partial(ops.get, uuid=uuid)), None
            else:
                work = partial(ops.get_including, uuid=uuid, include=include)
                provider, embedded = self.db.read(work)
        answering.render(resp, represent(req, provider, embedded))
        answering.cache_headers(req, resp, provider.modified)

    def update(self, req, resp, uuid):
        reading.require_json(req)
        reading.authorize(req)
        data = reading.read_json(req)
        with answering.worded(_words, "update"):
            provider = self.db.write(
                partial(ops.update, uuid=uuid, data=data, version=reading.version(req))
            )
        answering.render(resp, represent(req, provider))
        answering.cache_headers(req, resp, provider.modified)

    def delete(self, req, resp, uuid):
        reading.authorize(req)
        with answering.worded(_words, "delete"):
            self.db.write(partial(ops.delete, uuid=uuid))
        answering.no_content(resp)
