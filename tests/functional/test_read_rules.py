"""Every read obeys its own rule (issue 28, item 4).

``include=`` on ``GET /resource_providers`` and ``GET
/resource_providers/{uuid}`` (1.45) embeds the bodies of a provider's own
reads, and the bulk ``GET /allocations`` (1.46) answers what single
allocation reads answer; so each asks for the rule of the single read it
stands for, and a caller refused that read is refused the embedded or bulk
one with the very same 403:

==========================  ==================================================
include=inventories         placement:resource_providers:inventories:list
include=traits              placement:resource_providers:traits:list
include=aggregates          placement:resource_providers:aggregates:list
include=usages              placement:resource_providers:usages
consumer_uuid=              placement:allocations:list
resource_provider_uuid=,    placement:allocations:list and
in_tree=                    placement:resource_providers:allocations:list
==========================  ==================================================

The policy file here gives each of those rules its own role (and the
provider reads the role ``reader``), so a caller's roles say exactly which
single reads it may do. A gabbi file would need a fixture of its own in
tests/support/fixtures.py for that policy file; these tests build the
application themselves, as test_provider_include_statements.py does.
"""

from __future__ import annotations

import uuid

import pytest
from sqlalchemy import event

from placement_svc import app
from placement_svc.api import resource_providers
from placement_svc.db.engine import Database, create_engine
from placement_svc.ops import providers as provider_ops
from tests.support import fixtures

# rule -> the role that passes it in this file's policy
ROLES = {
    "placement:resource_providers:inventories:list": "inventories",
    "placement:resource_providers:traits:list": "traits",
    "placement:resource_providers:aggregates:list": "aggregates",
    "placement:resource_providers:usages": "usages",
    "placement:allocations:list": "consumer_allocations",
    "placement:resource_providers:allocations:list": "provider_allocations",
}
POLICY = "".join(f'"{rule}": "role:{role}"\n' for rule, role in ROLES.items()) + (
    '"placement:resource_providers:list": "role:reader"\n'
    '"placement:resource_providers:show": "role:reader"\n'
)

# include= member -> (its single read under /resource_providers/{uuid}, its rule)
INCLUDED = {
    "inventories": ("inventories", "placement:resource_providers:inventories:list"),
    "traits": ("traits", "placement:resource_providers:traits:list"),
    "aggregates": ("aggregates", "placement:resource_providers:aggregates:list"),
    "usages": ("usages", "placement:resource_providers:usages"),
}
CONSUMER_RULE = "placement:allocations:list"
PROVIDER_RULE = "placement:resource_providers:allocations:list"

ROOT = "cc000001-0000-0000-0000-000000000000"
CHILD = "ee000001-0000-0000-0000-000000000000"
CONSUMER = "aa000001-0000-0000-0000-000000000000"
PROJECT = "5e000001-0000-0000-0000-000000000000"
USER = "5f000001-0000-0000-0000-000000000000"
AGGREGATE = "a9000001-0000-0000-0000-000000000000"

# GET /allocations, each form, and the single read the form stands for
# (besides GET /allocations/{consumer} for each consumer found).
BULK = {
    "consumer_uuid": (f"/allocations?consumer_uuid={CONSUMER}", f"/allocations/{CONSUMER}"),
    "resource_provider_uuid": (
        f"/allocations?resource_provider_uuid=in:{ROOT},{CHILD}",
        f"/resource_providers/{CHILD}/allocations",
    ),
    "in_tree": (f"/allocations?in_tree={ROOT}", f"/resource_providers/{ROOT}/allocations"),
}


def caller(*roles: str) -> dict[str, str]:
    """A project's user (noauth2) with ``roles``."""
    return {"x-auth-token": f"{USER}:{PROJECT}", "x-roles": ",".join(roles)}


def all_roles_but(*rules: str) -> list[str]:
    return ["reader"] + [role for rule, role in ROLES.items() if rule not in rules]


def refusal(answer) -> dict:
    """A 403's body without its request id (each request has its own)."""
    assert answer.status_code == 403, answer.text
    body = answer.json()
    for error in body["errors"]:
        error.pop("request_id", None)
    return body


def refused(rule: str) -> dict:
    return {
        "errors": [
            {
                "status": 403,
                "title": "Forbidden",
                "detail": f"Access was denied to this resource.\n\n "
                f"Policy does not allow {rule} to be performed.  ",
                "code": "placement.undefined_code",
            }
        ]
    }


class World:
    """A tree with something of every kind, behind this file's policy."""

    def __init__(self, test_db, tmp_path):
        test_db.reset()
        path = tmp_path / "policy.yaml"
        path.write_text(POLICY, encoding="utf-8")
        self.engine = create_engine(test_db.url)
        conf = fixtures.make_conf(**{"oslo_policy.policy_file": str(path)})
        self.app = app.create_app(conf, Database(self.engine))
        self.admin = fixtures.api_client(self.app)
        self._build()

    def _build(self) -> None:
        admin = self.admin
        for body in (
            {"name": "host", "uuid": ROOT},
            {"name": "numa0", "uuid": CHILD, "parent_provider_uuid": ROOT},
        ):
            assert admin.post("/resource_providers", json=body).status_code == 200
        inventory = {"resource_provider_generation": 0, "inventories": {"VCPU": {"total": 8}}}
        for rp in (ROOT, CHILD):
            answer = admin.put(f"/resource_providers/{rp}/inventories", json=inventory)
            assert answer.status_code == 200, answer.text
        for path, payload in (
            ("traits", {"traits": ["HW_CPU_X86_AVX2"], "resource_provider_generation": 1}),
            ("aggregates", {"aggregates": [AGGREGATE], "resource_provider_generation": 2}),
        ):
            answer = admin.put(f"/resource_providers/{ROOT}/{path}", json=payload)
            assert answer.status_code == 200, answer.text
        claim = {
            "allocations": {CHILD: {"resources": {"VCPU": 2}}},
            "project_id": PROJECT,
            "user_id": USER,
            "consumer_generation": None,
            "consumer_type": "INSTANCE",
        }
        answer = admin.put(f"/allocations/{CONSUMER}", json=claim)
        assert answer.status_code == 204, answer.text

    def get(self, url: str, roles: list[str]):
        with fixtures.api_client(self.app, {**fixtures.ADMIN_HEADERS, **caller(*roles)}) as c:
            return c.get(url)

    def statements(self, url: str, roles: list[str]) -> tuple[object, int]:
        """The answer to ``url`` and the number of SQL statements it ran."""
        seen: list[str] = []

        def listener(*args):
            seen.append(args[2])

        event.listen(self.engine, "before_cursor_execute", listener)
        try:
            answer = self.get(url, roles)
        finally:
            event.remove(self.engine, "before_cursor_execute", listener)
        return answer, len(seen)

    def close(self) -> None:
        self.admin.close()
        self.engine.dispose()


@pytest.fixture
def world(test_db, tmp_path):
    built = World(test_db, tmp_path)
    yield built
    built.close()


def test_every_include_member_has_the_rule_of_its_read():
    assert set(resource_providers.INCLUDE_RULES) == set(provider_ops.INCLUDES) == set(INCLUDED)
    for name, (_path, rule) in INCLUDED.items():
        assert resource_providers.INCLUDE_RULES[name] == rule


@pytest.mark.parametrize("member", list(INCLUDED))
def test_include_needs_the_rule_of_the_read_it_embeds(world, member):
    path, rule = INCLUDED[member]
    denied = all_roles_but(rule)
    single = world.get(f"/resource_providers/{ROOT}/{path}", denied)
    assert refusal(single) == refused(rule)
    # The provider read itself is allowed, and so is every other member.
    others = ",".join(name for name in INCLUDED if name != member)
    assert world.get(f"/resource_providers/{ROOT}", denied).status_code == 200
    assert world.get(f"/resource_providers/{ROOT}?include={others}", denied).status_code == 200
    assert world.get(f"/resource_providers?include={others}", denied).status_code == 200
    for url in (
        f"/resource_providers/{ROOT}?include={member}",
        f"/resource_providers/{ROOT}?include={others},{member}",
        f"/resource_providers?include={member}",
        f"/resource_providers?in_tree={ROOT}&include={member},{others}",
    ):
        assert refusal(world.get(url, denied)) == refusal(single), url

    # The role of that one read lets the caller see what it shows, embedded or not.
    allowed = ["reader", ROLES[rule]]
    own = world.get(f"/resource_providers/{ROOT}/{path}", allowed)
    assert own.status_code == 200, own.text
    shown = world.get(f"/resource_providers/{ROOT}?include={member}", allowed)
    assert shown.status_code == 200, shown.text
    assert shown.json()[member] == own.json()
    listed = world.get(f"/resource_providers?in_tree={ROOT}&include={member}", allowed)
    assert listed.status_code == 200, listed.text
    assert [rp[member] for rp in listed.json()["resource_providers"]][0] == own.json()


def test_only_the_members_asked_for_are_checked(world):
    """No sub-read role at all: the provider reads alone are still allowed."""
    shown = world.get(f"/resource_providers/{ROOT}", ["reader"])
    assert shown.status_code == 200, shown.text
    listed = world.get(f"/resource_providers?in_tree={ROOT}", ["reader"])
    assert listed.status_code == 200, listed.text
    for provider in [shown.json(), *listed.json()["resource_providers"]]:
        assert not set(INCLUDED) & set(provider)
    everything = ",".join(INCLUDED)
    answer = world.get(f"/resource_providers/{ROOT}?include={everything}", all_roles_but())
    assert answer.status_code == 200, answer.text
    assert set(INCLUDED) <= set(answer.json())


def test_the_provider_rule_comes_first(world):
    """A caller refused the provider read is refused it, whatever it includes."""
    for url, rule in (
        (f"/resource_providers/{ROOT}?include=usages", "placement:resource_providers:show"),
        ("/resource_providers?include=usages", "placement:resource_providers:list"),
    ):
        assert refusal(world.get(url, all_roles_but()[1:])) == refused(rule)


def test_a_refused_include_reads_nothing_from_the_database(world):
    """The member rule is checked before any statement, as the single read's:
    an unknown provider is a 403 too, not a 404."""
    rule = "placement:resource_providers:usages"
    denied = all_roles_but(rule)
    unknown = str(uuid.uuid4())
    single, _count = world.statements(f"/resource_providers/{unknown}/usages", denied)
    for url in (
        f"/resource_providers/{unknown}?include=usages",
        f"/resource_providers/{ROOT}?include=traits,usages",
        "/resource_providers?include=usages",
    ):
        answer, count = world.statements(url, denied)
        assert refusal(answer) == refusal(single) == refused(rule)
        assert count == 0, url


@pytest.mark.parametrize("form", list(BULK))
def test_bulk_allocations_need_the_rules_of_the_reads_they_stand_for(world, form):
    bulk, single = BULK[form]
    per_consumer = f"/allocations/{CONSUMER}"
    by_provider = form != "consumer_uuid"

    # Refused the consumer read: refused every form, as before issue 28.
    denied = all_roles_but(CONSUMER_RULE)
    assert refusal(world.get(per_consumer, denied)) == refused(CONSUMER_RULE)
    assert refusal(world.get(bulk, denied)) == refused(CONSUMER_RULE)

    # Refused the provider read: refused the forms that find consumers by
    # provider or tree, allowed the one that names them.
    denied = all_roles_but(PROVIDER_RULE)
    provider_read = world.get(f"/resource_providers/{CHILD}/allocations", denied)
    assert refusal(provider_read) == refused(PROVIDER_RULE)
    answer = world.get(bulk, denied)
    if by_provider:
        assert refusal(answer) == refusal(world.get(single, denied))
    else:
        assert answer.status_code == 200, answer.text

    # The roles of the reads the form stands for are enough.
    roles = ["consumer_allocations"] + (["provider_allocations"] if by_provider else [])
    answer = world.get(bulk, roles)
    assert answer.status_code == 200, answer.text
    own = world.get(per_consumer, roles)
    assert own.status_code == 200, own.text
    assert answer.json() == {"allocations": {CONSUMER: own.json()}}
    assert own.json()["project_id"] == PROJECT and own.json()["user_id"] == USER


@pytest.mark.parametrize("form", ["resource_provider_uuid", "in_tree"])
def test_a_refused_bulk_read_reads_nothing_from_the_database(world, form):
    """Checked before any statement: an unknown tree or provider is a 403 too."""
    unknown = str(uuid.uuid4())
    answer, count = world.statements(f"/allocations?{form}={unknown}", ["consumer_allocations"])
    assert refusal(answer) == refused(PROVIDER_RULE)
    assert count == 0


def test_the_consumer_rule_is_still_checked_before_the_query_is_read(world):
    """As gabbits/allocations-bulk.yaml has it: a bad query from a caller
    refused placement:allocations:list is a 403, not a 400; one allowed it
    but refused the provider read gets the 400 (the form is not known yet)."""
    assert refusal(world.get("/allocations?in_tree=nope", [])) == refused(CONSUMER_RULE)
    answer = world.get("/allocations?in_tree=nope", ["consumer_allocations"])
    assert answer.status_code == 400, answer.text
