"""/resource_classes (1.2+): standard classes read-only, custom ones CUSTOM_*."""

from __future__ import annotations

from placement_svc import errors, web
from placement_svc import microversion as mv
from placement_svc.db import resource_classes as store
from placement_svc.db import tables
from placement_svc.policies import resource_classes as policies
from placement_svc.schemas import resource_class as schema


def _is_standard(rc) -> bool:
    return rc.id < tables.MIN_CUSTOM_RESOURCE_CLASS_ID


def _link(req, name: str) -> str:
    return web.url(req, f"/resource_classes/{name}")


def _body(req, rc) -> dict:
    return {"name": rc.name, "links": [{"rel": "self", "href": _link(req, rc.name)}]}


def _not_found(name: str) -> errors.NotFound:
    return errors.NotFound(f"No such resource class {name}.")


def _retries_exceeded(name: str) -> errors.Conflict:
    return errors.Conflict(
        "Max retries of DB transaction exceeded attempting to create resource "
        f"class: {name}, please try again."
    )


def _require_version_and_name(req, name: str) -> None:
    """1.2+, and a name: ``/resource_classes/`` is no URL upstream serves."""
    web.require_version(req, mv.RESOURCE_CLASSES)
    if not name:
        raise errors.NotFound()


class ResourceClasses:
    def __init__(self, db):
        self.db = db

    def list(self, req, resp):
        web.require_version(req, mv.RESOURCE_CLASSES)
        web.check_accept(req)
        req.context.placement.can(policies.LIST)
        classes = self.db.read(store.list_all)
        web.render(resp, {"resource_classes": [_body(req, rc) for rc in classes]})
        web.cache_headers(req, resp, web.newest(classes))

    def create(self, req, resp):
        web.require_version(req, mv.RESOURCE_CLASSES)
        web.require_json(req)
        req.context.placement.can(policies.CREATE)
        name = web.read_json(req, schema.NAME_BODY)["name"]
        try:
            self.db.write(lambda conn: store.create(conn, name))
        except store.Exists:
            raise errors.Conflict(f"Conflicting resource class already exists: {name}") from None
        except store.IdsExhausted:
            raise _retries_exceeded(name) from None
        web.no_content(resp, 201)
        resp.set_header("Location", web.location(req, f"/resource_classes/{name}"))

    def show(self, req, resp, name):
        _require_version_and_name(req, name)
        web.check_accept(req)
        req.context.placement.can(policies.SHOW)
        rc = self._get(name)
        web.render(resp, _body(req, rc))
        web.cache_headers(req, resp, rc.modified)

    def update(self, req, resp, name):
        _require_version_and_name(req, name)
        ensure = web.version(req) >= mv.RESOURCE_CLASS_PUT_CREATES
        if not ensure:
            web.require_json(req)  # a rename has a body; from 1.7 there is none
        req.context.placement.can(policies.UPDATE)
        if ensure:
            return self._ensure(req, resp, name)
        new_name = web.read_json(req, schema.NAME_BODY)["name"]

        def rename(conn):
            rc = self._get(name, conn)
            if _is_standard(rc):
                raise errors.BadRequest(f"Cannot update standard resource class {name}")
            return store.rename(conn, rc, new_name)

        try:
            rc = self.db.write(rename)
        except store.Exists:
            raise errors.Conflict(f"Resource class already exists: {new_name}") from None
        web.render(resp, _body(req, rc))

    def _ensure(self, req, resp, name):
        """1.7+: a bodiless PUT creates the class (201) or confirms it (204)."""
        web.validate({"name": name}, schema.NAME_BODY)

        def ensure(conn):
            try:
                return store.get(conn, name), False
            except store.NotFound:
                try:
                    return store.create(conn, name), True
                except store.Exists:  # created meanwhile by another writer
                    return store.get(conn, name), False

        try:
            _rc, created = self.db.write(ensure)
        except store.IdsExhausted:
            raise _retries_exceeded(name) from None
        web.no_content(resp, 201 if created else 204)
        resp.set_header("Location", web.location(req, f"/resource_classes/{name}"))

    def delete(self, req, resp, name):
        _require_version_and_name(req, name)
        req.context.placement.can(policies.DELETE)

        def delete(conn):
            rc = self._get(name, conn)
            if _is_standard(rc):
                raise errors.BadRequest(
                    f"Error in delete resource class: Cannot delete standard resource class {name}."
                )
            store.delete(conn, rc)

        try:
            self.db.write(delete)
        except store.InUse:
            raise errors.Conflict(
                f"Error in delete resource class: Cannot delete resource class {name}. "
                "Class is in use in inventory."
            ) from None
        web.no_content(resp)

    def _get(self, name, conn=None):
        try:
            if conn is not None:
                return store.get(conn, name)
            return self.db.read(lambda c: store.get(c, name))
        except store.NotFound:
            raise _not_found(name) from None
