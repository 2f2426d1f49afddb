"""/resource_classes (1.2+): standard classes read-only, custom ones CUSTOM_*."""

from __future__ import annotations

from functools import partial

from placement_svc import errors
from placement_svc import microversion as mv
from placement_svc.db.exceptions import (
    ResourceClassExists,
    ResourceClassIdsExhausted,
    ResourceClassInUse,
    ResourceClassNotFound,
)
from placement_svc.http import answering, reading
from placement_svc.ops import resource_classes as ops
from placement_svc.ops.exceptions import StandardResourceClass
from placement_svc.schemas import resource_class as schema


def _words(fact: Exception, action: str) -> errors.PlacementError | None:
    """Upstream's answer to what the resource class units of work report."""
    match fact:
        case ResourceClassNotFound(name):
            return errors.NotFound(f"No such resource class {name}.")
        case ResourceClassExists(name) if action == "create":
            return errors.Conflict(f"Conflicting resource class already exists: {name}")
        case ResourceClassExists(name):
            return errors.Conflict(f"Resource class already exists: {name}")
        case ResourceClassIdsExhausted(name):
            return errors.Conflict(
                "Max retries of DB transaction exceeded attempting to create resource "
                f"class: {name}, please try again."
            )
        case StandardResourceClass(name) if action == "delete":
            return errors.BadRequest(
                f"Error in delete resource class: Cannot delete standard resource class {name}."
            )
        case StandardResourceClass(name):
            return errors.BadRequest(f"Cannot update standard resource class {name}")
        case ResourceClassInUse(name):
            return errors.Conflict(
                f"Error in delete resource class: Cannot delete resource class {name}. "
                "Class is in use in inventory."
            )
    return None


def _link(req, name: str) -> str:
    return answering.url(req, f"/resource_classes/{name}")


def _body(req, rc) -> dict:
    return {"name": rc.name, "links": [{"rel": "self", "href": _link(req, rc.name)}]}


def _require_version_and_name(req, name: str) -> None:
    """1.2+, and a name: ``/resource_classes/`` is no URL upstream serves."""
    reading.check_version(req)
    if not name:
        raise errors.NotFound()


class ResourceClasses:
    def __init__(self, db):
        self.db = db

    def list(self, req, resp):
        reading.check_version(req)
        reading.check_accept(req)
        reading.authorize(req)
        classes = self.db.read(ops.list_all)
        answering.render(resp, {"resource_classes": [_body(req, rc) for rc in classes]})
        answering.cache_headers(req, resp, answering.newest(classes))

    def create(self, req, resp):
        reading.check_version(req)
        reading.require_json(req)
        reading.authorize(req)
        name = reading.read_body(req)["name"]
        with answering.worded(_words, "create"):
            self.db.write(partial(ops.create, name=name))
        answering.no_content(resp, 201)
        resp.set_header("Location", answering.location(req, f"/resource_classes/{name}"))

    def show(self, req, resp, name):
        _require_version_and_name(req, name)
        reading.check_accept(req)
        reading.authorize(req)
        with answering.worded(_words, "show"):
            rc = self.db.read(partial(ops.get, name=name))
        answering.render(resp, _body(req, rc))
        answering.cache_headers(req, resp, rc.modified)

    def update(self, req, resp, name):
        _require_version_and_name(req, name)
        if reading.version(req) >= mv.RESOURCE_CLASS_PUT_CREATES:
            return self._ensure(req, resp, name)
        reading.require_json(req)  # a rename has a body; from 1.7 there is none
        reading.authorize(req)
        new_name = reading.read_body(req)["name"]
        with answering.worded(_words, "update"):
            rc = self.db.write(partial(ops.rename, name=name, new_name=new_name))
        answering.render(resp, _body(req, rc))

    def _ensure(self, req, resp, name):
        """1.7+: a bodiless PUT creates the class (201) or confirms it (204)."""
        reading.authorize(req)
        reading.validate({"name": name}, schema.for_version(reading.version(req)))
        with answering.worded(_words, "create"):
            _rc, created = self.db.write(partial(ops.ensure, name=name))
        answering.no_content(resp, 201 if created else 204)
        resp.set_header("Location", answering.location(req, f"/resource_classes/{name}"))

    def delete(self, req, resp, name):
        _require_version_and_name(req, name)
        reading.authorize(req)
        with answering.worded(_words, "delete"):
            self.db.write(partial(ops.delete, name=name))
        answering.no_content(resp)
