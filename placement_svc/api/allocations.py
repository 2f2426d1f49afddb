"""/allocations, /allocations/{consumer_uuid} and /resource_providers/{uuid}/allocations."""

from __future__ import annotations

import datetime
import re
import uuid as uuidlib
from functools import partial

from placement_svc import errors
from placement_svc import microversion as mv
from placement_svc.api.allocation_writes import (
    CHANGED_WHILE_ALLOCATING,
    incomplete_ids,
    wanted_for,
    write_words,
)
from placement_svc.api.wording import no_provider
from placement_svc.db.exceptions import ConsumerMoved, ProviderNotFound, UnknownResourceClass
from placement_svc.http import answering, reading
from placement_svc.ops import allocations as ops
from placement_svc.ops.exceptions import HoldExpired, NoAllocations, OwnerMissing, RemovingTooMuch
from placement_svc.policies import allocations as policies
from placement_svc.uuidutil import is_uuid_like


def _words(fact: Exception, action: str, consumer_uuid: str = "") -> errors.PlacementError | None:
    """Upstream's answer to what the allocation units of work report."""
    match fact:
        case ProviderNotFound(uuid):
            return errors.NotFound(f"Resource provider '{uuid}' not found: {no_provider(uuid)}")
        case NoAllocations(uuid):
            return errors.NotFound(f"No allocations for consumer '{uuid}'")
        case RemovingTooMuch(uuid, rp_uuid, rc, removing, held):
            return errors.BadRequest(
                f"Unable to remove {removing} {rc} from resource provider {rp_uuid}: "
                f"consumer {uuid} holds {held}."
            )
        case HoldExpired(uuid):
            return errors.Conflict(
                f"The hold of consumer {uuid} expired before it was confirmed: its "
                "allocations are gone.",
                code=errors.HOLD_EXPIRED,
            )
        case OwnerMissing(uuid):
            return errors.BadRequest(
                f"Consumer {uuid} has no allocations yet: project_id and user_id are "
                "required to make it."
            )
        case ConsumerMoved(uuid):  # still, after the retries
            return errors.Conflict(
                f"{CHANGED_WHILE_ALLOCATING}: Another thread concurrently updated the "
                f"allocations of consumer {uuid}. Please retry your update",
                code=errors.CONCURRENT_UPDATE,
            )
        case UnknownResourceClass(names) if action in ("put", "patch"):
            return errors.BadRequest(
                f"Unable to allocate inventory for consumer {consumer_uuid}: "
                f"No such resource class {names[0]}."
            )
        case UnknownResourceClass(names):
            return errors.BadRequest(
                f"Unable to allocate inventory No such resource class {names[0]}."
            )
    return write_words(fact, CHANGED_WHILE_ALLOCATING)


def _rfc3339(microseconds: int) -> str:
    """A hold's expiry (microseconds since the epoch) as RFC 3339, in UTC."""
    moment = datetime.datetime.fromtimestamp(microseconds / 1e6, datetime.timezone.utc)
    return moment.strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def _amounts(by_provider: dict) -> dict[str, dict[str, int]]:
    """A delta's {provider: {"resources": {class: amount}}}, the provider
    uuids as written (as PUT takes them: one spelled otherwise than stored
    is a provider that does not exist)."""
    found: dict[str, dict[str, int]] = {}
    for rp_uuid, entry in by_provider.items():
        held = found.setdefault(rp_uuid, {})
        for name, amount in entry["resources"].items():
            held[name] = held.get(name, 0) + amount
    return found


def consumer_body(consumer, found, version) -> dict:
    """The body of GET /allocations/{consumer} at ``version``: ``{"allocations":
    {}}`` alone for a consumer without allocations."""
    by_provider: dict[str, dict] = {}
    for alloc in found:
        entry = by_provider.setdefault(alloc.provider_uuid, {"resources": {}})
        entry["resources"][alloc.resource_class] = alloc.used
        entry["generation"] = alloc.provider_generation
    body: dict = {"allocations": by_provider}
    if found and version >= mv.ALLOCATIONS_DICT:
        body["project_id"] = consumer.project_id
        body["user_id"] = consumer.user_id
        if version >= mv.CONSUMER_GENERATION:
            body["consumer_generation"] = consumer.generation
        if version >= mv.CONSUMER_TYPES:
            body["consumer_type"] = consumer.type_name
        if version >= mv.HOLDS:  # every allocation of a held consumer is held
            at = found[0].hold_expires_at
            body["hold"] = {"expires_at": _rfc3339(at)} if at is not None else None
    return body


# GET /allocations (1.46): the three ways to say whose allocations to read;
# and from 1.51 whether only the held ones, or only the others.
CONSUMERS, PROVIDERS, TREE = "consumer_uuid", "resource_provider_uuid", "in_tree"
HELD = "held"
MAX_BULK_UUIDS = 1000
# Every read obeys its own rule (issue 28). Each form stands for single reads,
# and needs the rules of all of them:
#   consumer_uuid=          GET /allocations/{consumer_uuid} for each
#                           -> placement:allocations:list
#   resource_provider_uuid= GET /resource_providers/{uuid}/allocations (which
#   in_tree=                consumers), then GET /allocations/{consumer_uuid}
#                           for each (all its allocations, project and user)
#                           -> placement:allocations:list and
#                              placement:resource_providers:allocations:list
# placement:allocations:list is checked first, before the query is read (as
# it always was); the provider rule once the query names the form, before
# anything is read from the database.
BY_PROVIDER = (PROVIDERS, TREE)
_DASHED_UUID = re.compile(r"^[0-9a-fA-F]{8}(-[0-9a-fA-F]{4}){3}-[0-9a-fA-F]{12}$")


def _bad_query(problem: str, code: str = errors.QUERYPARAM_BAD_VALUE) -> errors.BadRequest:
    return errors.BadRequest(f"Invalid query string parameters: {problem}", code=code)


def _held(params: dict[str, list[str]]) -> bool | None:
    """held=true or held=false (1.51), given once; None: not asked."""
    values = params.get(HELD)
    if values is None:
        return None
    if len(values) > 1:
        raise _bad_query(f"{HELD} is given {len(values)} times; give it once.",
                         errors.ILLEGAL_DUPLICATE_QUERYPARAM)  # fmt: skip
    if values[0] not in ("true", "false"):
        raise _bad_query(f"Expected '{HELD}' to be true or false. Got: {values[0]!r}")
    return values[0] == "true"


def bulk_query(params: dict[str, list[str]]) -> tuple[str, list[str]]:
    """(the form, its uuids): exactly one of consumer_uuid and
    resource_provider_uuid (a uuid, or in: and up to 1000 of them, duplicates
    counted once) or in_tree (one uuid), given once. Consumer uuids keep the
    client's spelling (the answer's keys); provider uuids are made canonical."""
    given = [name for name in (CONSUMERS, PROVIDERS, TREE) if name in params]
    if len(given) != 1:
        problem = "none" if not given else " and ".join(given)
        raise _bad_query(
            f"GET /allocations needs exactly one of {CONSUMERS}, {PROVIDERS} or {TREE}; "
            f"got {problem}.",
            errors.QUERYPARAM_MISSING_VALUE if not given else errors.QUERYPARAM_BAD_VALUE,
        )
    form = given[0]
    if len(params[form]) > 1:
        raise _bad_query(
            f"{form} is given {len(params[form])} times; give it once "
            f"(several uuids: {form}=in:UUID1,UUID2).",
            errors.ILLEGAL_DUPLICATE_QUERYPARAM,
        )
    value = params[form][0]
    if form == TREE:
        if not _DASHED_UUID.match(value.strip()):
            raise _bad_query(f"Expected '{TREE}' to be a uuid. Got: {value!r}")
        return form, [str(uuidlib.UUID(value.strip()))]
    items = [item.strip() for item in value.removeprefix("in:").split(",")]
    for item in items:
        if not _DASHED_UUID.match(item):
            raise _bad_query(
                f"Expected '{form}' to be a uuid or 'in:' and a comma-separated list of uuids. "
                f"Got {item!r} in {value!r}."
            )
    uuids = list(
        dict.fromkeys(items if form == CONSUMERS else [str(uuidlib.UUID(i)) for i in items])
    )
    if len(uuids) > MAX_BULK_UUIDS:
        raise _bad_query(
            f"'{form}' names {len(uuids)} uuids; at most {MAX_BULK_UUIDS} are allowed "
            "per request: split the read."
        )
    return form, uuids


class Allocations:
    def __init__(self, db, conf):
        self.db = db
        self.incomplete = incomplete_ids(conf)

    def show(self, req, resp, consumer_uuid):
        """Never a 404: a consumer without allocations has ``{}``."""
        reading.check_accept(req)
        reading.authorize(req)
        version = reading.version(req)
        consumer, found = self.db.read(partial(ops.for_consumer, consumer_uuid=consumer_uuid))
        answering.render(resp, consumer_body(consumer, found, version))
        answering.cache_headers(req, resp, answering.newest(found))

    def list_many(self, req, resp):
        """GET /allocations (1.46): several consumers' bodies of
        GET /allocations/{consumer}, keyed by consumer uuid, in one read.
        Before 1.46 the URL has POST only, and GET is the 405 it always was
        (app.py's route says so)."""
        version = reading.version(req)
        reading.check_accept(req)
        reading.authorize(req)
        query = reading.declared_query(req)
        held = _held(query)
        form, uuids = bulk_query({k: v for k, v in query.items() if k != HELD})
        if form in BY_PROVIDER:
            req.context.placement.can(policies.RP_ALLOC_LIST)
        if form == CONSUMERS:
            work = partial(ops.for_consumers, consumer_uuids=uuids)
        elif form == PROVIDERS:
            work = partial(ops.for_providers, provider_uuids=uuids)
        else:
            work = partial(ops.for_providers, in_tree=uuids[0])
        holdings = self.db.read(work)
        if held is not None:  # 1.51: only those whose allocations are (or are not) held
            holdings = {
                uuid: (c, found)
                for uuid, (c, found) in holdings.items()
                if found and (found[0].hold_expires_at is not None) == held
            }
        body = {uuid: consumer_body(c, found, version) for uuid, (c, found) in holdings.items()}
        answering.render(resp, {"allocations": body})
        answering.cache_headers(
            req, resp, answering.newest(a for _c, found in holdings.values() for a in found)
        )

    def for_provider(self, req, resp, uuid):
        reading.check_accept(req)
        reading.authorize(req)
        version = reading.version(req)
        with answering.worded(_words, "for_provider"):
            provider, found = self.db.read(partial(ops.for_provider, uuid=uuid))
        by_consumer: dict[str, dict] = {}
        for alloc in found:
            entry = by_consumer.setdefault(alloc.consumer_uuid, {"resources": {}})
            entry["resources"][alloc.resource_class] = alloc.used
            if version >= mv.CONSUMER_GENERATION:
                entry["consumer_generation"] = alloc.consumer_generation
        body = {"allocations": by_consumer, "resource_provider_generation": provider.generation}
        answering.render(resp, body)
        answering.cache_headers(req, resp, answering.newest(found))

    def replace(self, req, resp, consumer_uuid):
        reading.require_json(req)
        reading.authorize(req)
        version = reading.version(req)
        if not is_uuid_like(consumer_uuid):
            raise errors.BadRequest(f"Malformed consumer_uuid: {consumer_uuid}")
        data = reading.read_body(req)
        consumer_uuid = str(uuidlib.UUID(consumer_uuid))
        with answering.worded(_words, "put", consumer_uuid):
            self._write([wanted_for(consumer_uuid, data)], version)
        answering.no_content(resp)

    def post_many(self, req, resp):
        reading.check_version(req)
        reading.require_json(req)
        reading.authorize(req)
        version = reading.version(req)
        data = reading.read_body(req)
        with answering.worded(_words, "post"):
            self._write([wanted_for(uuid, body) for uuid, body in data.items()], version)
        answering.no_content(resp)

    def _write(self, wanted, version) -> None:
        work = partial(
            ops.write,
            wanted=wanted,
            check_generation=version >= mv.CONSUMER_GENERATION,
            incomplete=self.incomplete,
        )
        self.db.write(work)

    def change(self, req, resp, consumer_uuid):
        """PATCH /allocations/{consumer_uuid} (1.50): amounts added and taken
        away against the consumer's allocations as they are; the answer is
        what GET /allocations/{consumer_uuid} would now answer."""
        reading.require_json(req)
        reading.authorize(req)
        version = reading.version(req)
        if not is_uuid_like(consumer_uuid):
            raise errors.BadRequest(f"Malformed consumer_uuid: {consumer_uuid}")
        data = reading.read_body(req)
        consumer_uuid = str(uuidlib.UUID(consumer_uuid))
        delta = ops.Delta(
            add=_amounts(data.get("add", {})),
            remove=_amounts(data.get("remove", {})),
            check_generation="consumer_generation" in data,
            generation=data.get("consumer_generation"),
            project_id=data.get("project_id"),
            user_id=data.get("user_id"),
            consumer_type=data.get("consumer_type"),
        )
        work = partial(
            ops.change, consumer_uuid=consumer_uuid, delta=delta, incomplete=self.incomplete
        )
        with answering.worded(_words, "patch", consumer_uuid):
            consumer, found = self.db.write(work)
        answering.render(resp, consumer_body(consumer, found, version))

    def confirm(self, req, resp, consumer_uuid):
        """POST /allocations/{consumer_uuid}/confirm (1.51): a held
        consumer's allocations made permanent."""
        if req.content_length:  # a body, optional, must be JSON
            reading.require_json(req)
        reading.authorize(req)
        if not is_uuid_like(consumer_uuid):
            raise errors.BadRequest(f"Malformed consumer_uuid: {consumer_uuid}")
        data = reading.read_body(req) if req.content_length else {}
        work = partial(
            ops.confirm,
            consumer_uuid=str(uuidlib.UUID(consumer_uuid)),
            check_generation="consumer_generation" in data,
            generation=data.get("consumer_generation"),
        )
        with answering.worded(_words, "confirm", consumer_uuid):
            self.db.write(work)
        answering.no_content(resp)

    def delete(self, req, resp, consumer_uuid):
        reading.authorize(req)
        with answering.worded(_words, "delete"):
            self.db.write(partial(ops.delete, consumer_uuid=consumer_uuid))
        answering.no_content(resp)
