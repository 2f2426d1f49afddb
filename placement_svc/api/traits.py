"""/traits (1.6+): standard traits from os-traits read-only, custom ones CUSTOM_*."""

from __future__ import annotations

import jsonschema

from placement_svc import errors, web
from placement_svc import microversion as mv
from placement_svc.db import traits as store
from placement_svc.policies import traits as policies
from placement_svc.schemas import trait as schema

_INVALID_TRAIT = (
    "The trait is invalid. A valid trait must be no longer than 255 characters, "
    'start with the prefix "CUSTOM_" and use following characters: "A"-"Z", "0"-"9" and "_"'
)


def _filters(params: dict[str, list[str]]) -> dict:
    filters: dict = {}
    if "name" in params:
        value = params["name"][-1]
        op, sep, arg = value.partition(":")
        if not sep:
            raise errors.BadRequest(
                "Badly formatted name parameter. Expected name query string parameter "
                f'in form: ?name=[in|startswith]:[name1,name2|prefix]. Got: "{value}"'
            )
        if op == "in":
            filters["names"] = arg.split(",")
        elif op == "startswith":
            filters["prefix"] = arg
        # Any other operator filters nothing, as upstream (which never refused it).
    if "associated" in params:
        value = params["associated"][-1].lower()
        if value not in ("true", "false"):
            raise errors.BadRequest(
                'The query parameter "associated" only accepts "true" or "false"'
            )
        filters["associated"] = value == "true"
    return filters


def _require_version_and_name(req, name: str) -> None:
    """1.6+, and a name: ``/traits/`` is no URL upstream serves."""
    web.require_version(req, mv.TRAITS)
    if not name:
        raise errors.NotFound()


class Traits:
    def __init__(self, db):
        self.db = db

    def list(self, req, resp):
        web.require_version(req, mv.TRAITS)
        web.check_accept(req)
        req.context.placement.can(policies.TRAITS_LIST)
        filters = _filters(web.query(req, schema.LIST_QUERY))
        found = self.db.read(lambda conn: store.list_filtered(conn, **filters))
        web.render(resp, {"traits": [t.name for t in found]})
        web.cache_headers(req, resp, web.newest(found))

    def show(self, req, resp, name):
        _require_version_and_name(req, name)
        req.context.placement.can(policies.TRAITS_SHOW)
        trait = self._get(name)
        web.no_content(resp)
        web.cache_headers(req, resp, trait.modified)

    def update(self, req, resp, name):
        _require_version_and_name(req, name)
        req.context.placement.can(policies.TRAITS_UPDATE)
        try:
            jsonschema.validate(name, schema.CUSTOM_TRAIT)
        except jsonschema.ValidationError:
            raise errors.BadRequest(_INVALID_TRAIT) from None
        trait, created = self.db.write(lambda conn: store.ensure(conn, name))
        web.no_content(resp, 201 if created else 204)
        resp.set_header("Location", web.location(req, f"/traits/{name}"))
        web.cache_headers(req, resp, trait.modified)

    def delete(self, req, resp, name):
        _require_version_and_name(req, name)
        req.context.placement.can(policies.TRAITS_DELETE)

        def delete(conn):
            trait = store.get(conn, name)
            if not name.startswith("CUSTOM_"):
                raise errors.BadRequest(f"Cannot delete standard trait {name}.")
            store.delete(conn, trait)

        try:
            self.db.write(delete)
        except store.NotFound:
            raise errors.NotFound(f"No such trait(s): {name}.") from None
        except store.InUse:
            raise errors.Conflict(f"The trait {name} is in use by a resource provider.") from None
        web.no_content(resp)

    def _get(self, name):
        try:
            return self.db.read(lambda conn: store.get(conn, name))
        except store.NotFound:
            raise errors.NotFound(f"No such trait(s): {name}.") from None
