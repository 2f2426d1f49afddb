"""/traits (1.6+): standard traits from os-traits read-only, custom ones CUSTOM_*."""

from __future__ import annotations

from functools import partial

import jsonschema

from placement_svc import errors
from placement_svc.db.exceptions import TraitInUse, TraitNotFound
from placement_svc.http import answering, reading
from placement_svc.ops import traits as ops
from placement_svc.ops.exceptions import StandardTrait
from placement_svc.schemas import trait as schema

_INVALID_TRAIT = (
    "The trait is invalid. A valid trait must be no longer than 255 characters, "
    'start with the prefix "CUSTOM_" and use following characters: "A"-"Z", "0"-"9" and "_"'
)


def _words(fact: Exception) -> errors.PlacementError | None:
    """Upstream's answer to what the trait units of work report."""
    match fact:
        case TraitNotFound(name):
            return errors.NotFound(f"No such trait(s): {name}.")
        case StandardTrait(name):
            return errors.BadRequest(f"Cannot delete standard trait {name}.")
        case TraitInUse(name):
            return errors.Conflict(f"The trait {name} is in use by a resource provider.")
    return None


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
    reading.check_version(req)
    if not name:
        raise errors.NotFound()


class Traits:
    def __init__(self, db):
        self.db = db

    def list(self, req, resp):
        reading.check_version(req)
        reading.check_accept(req)
        reading.authorize(req)
        filters = _filters(reading.declared_query(req))
        found = self.db.read(partial(ops.list_filtered, **filters))
        answering.render(resp, {"traits": [t.name for t in found]})
        answering.cache_headers(req, resp, answering.newest(found))

    def show(self, req, resp, name):
        _require_version_and_name(req, name)
        reading.authorize(req)
        with answering.worded(_words):
            trait = self.db.read(partial(ops.get, name=name))
        answering.no_content(resp)
        answering.cache_headers(req, resp, trait.modified)

    def update(self, req, resp, name):
        _require_version_and_name(req, name)
        reading.authorize(req)
        try:
            schema.for_version(reading.version(req)).custom_trait.check(name)
        except jsonschema.ValidationError:
            raise errors.BadRequest(_INVALID_TRAIT) from None
        trait, created = self.db.write(partial(ops.ensure, name=name))
        answering.no_content(resp, 201 if created else 204)
        resp.set_header("Location", answering.location(req, f"/traits/{name}"))
        answering.cache_headers(req, resp, trait.modified)

    def delete(self, req, resp, name):
        _require_version_and_name(req, name)
        reading.authorize(req)
        with answering.worded(_words):
            self.db.write(partial(ops.delete, name=name))
        answering.no_content(resp)
