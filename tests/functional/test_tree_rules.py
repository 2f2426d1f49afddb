"""A tree read or write (1.49) obeys the rules of the single requests it
stands for, and an allocation delta (1.50) the rule of PUT /allocations.

GET /resource_provider_trees/{root} reads each provider with its
inventories, traits and aggregates: placement:resource_providers:show and
the three list rules. PUT asks, for what the body changes, the rule of the
single write that would make that change (creating, updating or deleting a
provider; its inventories, traits or aggregates; a new custom class or
trait); a PUT that changes nothing needs no write rule. Each rule has its
own role in this file's policy, so a caller's roles say exactly which
single requests it may make; a refused write writes nothing.
"""

from __future__ import annotations

import copy

import pytest

from placement_svc import app
from placement_svc.db.engine import Database, create_engine
from tests.support import fixtures

READ_RULES = {
    "placement:resource_providers:show": "show",
    "placement:resource_providers:inventories:list": "inventories_list",
    "placement:resource_providers:traits:list": "traits_list",
    "placement:resource_providers:aggregates:list": "aggregates_list",
}
WRITE_RULES = {
    "placement:resource_providers:create": "create",
    "placement:resource_providers:update": "update",
    "placement:resource_providers:delete": "delete",
    "placement:resource_providers:inventories:update": "inventories",
    "placement:resource_providers:traits:update": "traits",
    "placement:resource_providers:aggregates:update": "aggregates",
    "placement:resource_classes:update": "new_class",
    "placement:traits:update": "new_trait",
}
ALLOCATIONS_UPDATE = "placement:allocations:update"
POLICY = "".join(
    f'"{rule}": "role:{role}"\n'
    for rule, role in {**READ_RULES, **WRITE_RULES, ALLOCATIONS_UPDATE: "allocate"}.items()
)

ROOT = "cc000001-0000-0000-0000-000000000000"
CHILD = "ee000001-0000-0000-0000-000000000000"
NEW_CHILD = "ee000002-0000-0000-0000-000000000000"
AGGREGATE = "a9000001-0000-0000-0000-000000000000"
CONSUMER = "aa000001-0000-0000-0000-000000000000"
PROJECT = "5e000001-0000-0000-0000-000000000000"
USER = "5f000001-0000-0000-0000-000000000000"
V149 = {"openstack-api-version": "placement 1.49"}
V150 = {"openstack-api-version": "placement 1.50"}


def caller(*roles: str) -> dict[str, str]:
    return {"x-auth-token": f"{USER}:{PROJECT}", "x-roles": ",".join(roles)}


def refused_rule(answer) -> str:
    assert answer.status_code == 403, answer.text
    detail = answer.json()["errors"][0]["detail"]
    return detail.split("Policy does not allow ", 1)[1].split(" to be performed", 1)[0]


# What each kind of change does to the tree as built, and the write rules it needs.
def _create(tree):
    tree["providers"].append({"uuid": NEW_CHILD, "name": "new", "parent_provider_uuid": ROOT})


def _update(tree):
    tree["providers"][1]["name"] = "numa0-renamed"


def _delete(tree):
    del tree["providers"][1]


def _inventories(tree):
    tree["providers"][1]["inventories"]["VCPU"]["total"] = 16


def _traits(tree):
    tree["providers"][1]["traits"] = ["HW_CPU_X86_AVX2"]


def _aggregates(tree):
    tree["providers"][1]["aggregates"] = [AGGREGATE]


def _new_class(tree):
    tree["providers"][1]["inventories"]["CUSTOM_FPGA_SLOT"] = {"total": 2}


def _new_trait(tree):
    tree["providers"][1]["traits"] = ["CUSTOM_GOLD"]


CHANGES = {
    "create": (_create, ["placement:resource_providers:create"]),
    "update": (_update, ["placement:resource_providers:update"]),
    "delete": (_delete, ["placement:resource_providers:delete"]),
    "inventories": (_inventories, ["placement:resource_providers:inventories:update"]),
    "traits": (_traits, ["placement:resource_providers:traits:update"]),
    "aggregates": (_aggregates, ["placement:resource_providers:aggregates:update"]),
    "new class": (
        _new_class,
        ["placement:resource_providers:inventories:update", "placement:resource_classes:update"],
    ),
    "new trait": (
        _new_trait,
        ["placement:resource_providers:traits:update", "placement:traits:update"],
    ),
}


class World:
    def __init__(self, test_db, tmp_path):
        test_db.reset()
        path = tmp_path / "policy.yaml"
        path.write_text(POLICY, encoding="utf-8")
        self.engine = create_engine(test_db.url)
        conf = fixtures.make_conf(**{"oslo_policy.policy_file": str(path)})
        self.app = app.create_app(conf, Database(self.engine))
        everything = [*READ_RULES.values(), *WRITE_RULES.values()]
        self.admin = fixtures.api_client(
            self.app, {**fixtures.ADMIN_HEADERS, **caller(*everything)}
        )
        tree = {
            "root": ROOT,
            "providers": [
                {"uuid": ROOT, "name": "host", "parent_provider_uuid": None},
                {
                    "uuid": CHILD,
                    "name": "numa0",
                    "parent_provider_uuid": ROOT,
                    "inventories": {"VCPU": {"total": 8}},
                },
            ],
        }
        answer = self.admin.put(f"/resource_provider_trees/{ROOT}", json=tree, headers=V149)
        assert answer.status_code == 200, answer.text
        self.tree = answer.json()

    def client(self, *roles: str):
        return fixtures.api_client(self.app, {**fixtures.ADMIN_HEADERS, **caller(*roles)})

    def read(self) -> dict:
        answer = self.admin.get(f"/resource_provider_trees/{ROOT}", headers=V149)
        assert answer.status_code == 200, answer.text
        return answer.json()

    def close(self) -> None:
        self.admin.close()
        self.engine.dispose()


@pytest.fixture
def world(test_db, tmp_path):
    built = World(test_db, tmp_path)
    yield built
    built.close()


@pytest.mark.parametrize("rule", list(READ_RULES))
def test_reading_a_tree_needs_every_single_read_rule(world, rule):
    roles = [role for r, role in READ_RULES.items() if r != rule]
    with world.client(*roles) as client:
        assert refused_rule(client.get(f"/resource_provider_trees/{ROOT}", headers=V149)) == rule
    with world.client(*READ_RULES.values()) as client:
        assert client.get(f"/resource_provider_trees/{ROOT}", headers=V149).status_code == 200


def test_a_put_that_changes_nothing_needs_no_write_rule(world):
    with world.client(*READ_RULES.values()) as client:
        answer = client.put(f"/resource_provider_trees/{ROOT}", json=world.tree, headers=V149)
    assert answer.status_code == 200, answer.text
    assert answer.json() == world.tree


@pytest.mark.parametrize("change", list(CHANGES))
def test_each_change_needs_its_single_write_rule_and_a_refusal_writes_nothing(world, change):
    edit, rules = CHANGES[change]
    body = copy.deepcopy(world.tree)
    edit(body)
    for missing in rules:
        roles = [*READ_RULES.values(), *(WRITE_RULES[r] for r in rules if r != missing)]
        with world.client(*roles) as client:
            answer = client.put(f"/resource_provider_trees/{ROOT}", json=body, headers=V149)
        assert refused_rule(answer) == missing
        assert world.read() == world.tree
    with world.client(*READ_RULES.values(), *(WRITE_RULES[r] for r in rules)) as client:
        answer = client.put(f"/resource_provider_trees/{ROOT}", json=body, headers=V149)
    assert answer.status_code == 200, answer.text


def test_an_allocation_delta_needs_the_rule_of_put_allocations(world):
    delta = {
        "add": {CHILD: {"resources": {"VCPU": 1}}},
        "project_id": PROJECT,
        "user_id": USER,
    }
    with world.client(*READ_RULES.values(), *WRITE_RULES.values()) as client:
        answer = client.patch(f"/allocations/{CONSUMER}", json=delta, headers=V150)
    assert refused_rule(answer) == ALLOCATIONS_UPDATE
    with world.client("allocate") as client:
        answer = client.patch(f"/allocations/{CONSUMER}", json=delta, headers=V150)
    assert answer.status_code == 200, answer.text
    assert answer.json()["allocations"][CHILD]["resources"] == {"VCPU": 1}
