"""A whole provider tree read and written in one unit of work (1.49), on
every backend: what changes, which generations move, what each refusal
names, and that a refusal writes nothing."""

from __future__ import annotations

from functools import partial

import pytest

from placement_svc.db import inventories as inventory_store
from placement_svc.db.allocations import Wanted
from placement_svc.db.exceptions import (
    InventoryInUse,
    ProviderExists,
    ProviderInUse,
    ProviderNotFound,
    UnknownResourceClass,
    UnknownTrait,
)
from placement_svc.ops import allocations, providers
from placement_svc.ops import trees as ops
from placement_svc.ops.exceptions import (
    InAnotherTree,
    InvalidInventory,
    NotARoot,
    StaleProviders,
    TreeShape,
)
from tests.integration.conftest import new_uuid
from tests.support.races import ChangedAfterRead
from tests.support.statements import Statements

INCOMPLETE = ("incomplete-project", "incomplete-user")
AGG = "5b6e9a10-2c8d-4d5e-9f1a-3b7c8d9e0f12"


def _inv(total: int, **more) -> inventory_store.Inventory:
    return inventory_store.with_defaults("", {"total": total, **more})


def _node(uuid, name, parent, generation=None, inventories=None, traits=(), aggregates=()):
    return ops.Node(
        uuid=uuid,
        name=name,
        parent_uuid=parent,
        generation=generation,
        inventories={
            rc: inventory_store.with_defaults(rc, {"total": total})
            for rc, total in (inventories or {}).items()
        },
        traits=frozenset(traits),
        aggregates=frozenset(aggregates),
    )


class Permits:
    """Records the kinds of change each write asked for; refuses ``refused``."""

    def __init__(self, refused=frozenset()):
        self.asked: list[frozenset[str]] = []
        self.refused = refused

    def __call__(self, kinds):
        self.asked.append(kinds)
        if kinds & self.refused:
            raise PermissionError(sorted(kinds & self.refused))


def _put(db, root, nodes, permit=None):
    return db.write(partial(ops.replace, root_uuid=root, wanted=nodes, permit=permit or Permits()))


def _as_wanted(tree: ops.Tree) -> list[ops.Node]:
    return list(tree.nodes)


def _changed(node: ops.Node, **changes) -> ops.Node:
    fields = {**node.__dict__, **changes}
    return ops.Node(**fields)


@pytest.fixture
def compute(db):
    """A compute host: root (MEMORY_MB, an aggregate), numa0 and numa1 (VCPU),
    a NIC under numa0 with a custom trait."""
    root, numa0, numa1, nic = new_uuid(), new_uuid(), new_uuid(), new_uuid()
    tree = _put(
        db,
        root,
        [
            _node(root, "cn1", None, inventories={"MEMORY_MB": 4096}, aggregates=[AGG]),
            _node(numa0, "cn1-numa0", root, inventories={"VCPU": 8}),
            _node(numa1, "cn1-numa1", root, inventories={"VCPU": 8}, traits=["HW_CPU_X86_AVX"]),
            _node(nic, "cn1-nic0", numa0, traits=["CUSTOM_PHYSNET_A"]),
        ],
    )
    return {"root": root, "numa0": numa0, "numa1": numa1, "nic": nic, "tree": tree}


def test_a_new_tree_is_made_whole_and_read_back_parents_first(db, compute):
    tree = db.read(partial(ops.read, root_uuid=compute["root"]))
    assert [n.name for n in tree.nodes] == ["cn1", "cn1-numa0", "cn1-nic0", "cn1-numa1"]
    assert [n.generation for n in tree.nodes] == [0, 0, 0, 0]
    by_name = {n.name: n for n in tree.nodes}
    assert by_name["cn1-nic0"].parent_uuid == compute["numa0"]
    assert by_name["cn1-nic0"].traits == {"CUSTOM_PHYSNET_A"}  # the custom trait was made
    assert by_name["cn1"].aggregates == {AGG}
    assert by_name["cn1-numa1"].inventories["VCPU"].total == 8
    # The single reads see the same tree.
    assert db.read(partial(providers.get, uuid=compute["nic"])).root_uuid == compute["root"]


def test_sending_back_what_was_read_writes_nothing(db, compute):
    tree = db.read(partial(ops.read, root_uuid=compute["root"]))
    permits = Permits()
    with Statements(db.engine) as seen:
        again = _put(db, compute["root"], _as_wanted(tree), permits)
    assert again.nodes == tree.nodes
    assert permits.asked == [frozenset()]
    written = [s for s in seen if s.split()[0].upper() in ("INSERT", "UPDATE", "DELETE")]
    assert written == []


def test_only_the_changed_provider_moves_and_by_exactly_one(db, compute):
    tree = db.read(partial(ops.read, root_uuid=compute["root"]))
    wanted = [
        _changed(
            n,
            inventories={"VCPU": inventory_store.with_defaults("VCPU", {"total": 16})},
            traits=frozenset({"HW_CPU_X86_AVX2"}),
            aggregates=frozenset({AGG}),
        )
        if n.uuid == compute["numa1"]
        else n
        for n in tree.nodes
    ]
    permits = Permits()
    after = _put(db, compute["root"], wanted, permits)
    assert {n.name: n.generation for n in after.nodes} == {
        "cn1": 0,
        "cn1-numa0": 0,
        "cn1-nic0": 0,
        "cn1-numa1": 1,  # three parts changed, one step
    }
    assert permits.asked == [frozenset({ops.INVENTORIES, ops.TRAITS, ops.AGGREGATES})]


def test_every_stale_provider_is_named_at_once_and_nothing_is_written(db, compute):
    tree = db.read(partial(ops.read, root_uuid=compute["root"]))
    gone = new_uuid()
    wanted = [
        _changed(n, generation=7) if n.uuid in (compute["numa0"], compute["nic"]) else n
        for n in tree.nodes
    ] + [_node(gone, "was-deleted", compute["root"], generation=2)]
    wanted[0] = _changed(wanted[0], name="renamed")
    with pytest.raises(StaleProviders) as caught:
        _put(db, compute["root"], wanted)
    assert sorted(caught.value.stale) == sorted(
        [(compute["numa0"], 0, 7), (compute["nic"], 0, 7), (gone, None, 2)]
    )
    assert db.read(partial(ops.read, root_uuid=compute["root"])).nodes == tree.nodes


def test_an_existing_provider_without_its_generation_is_stale(db, compute):
    tree = db.read(partial(ops.read, root_uuid=compute["root"]))
    wanted = [_changed(n, generation=None) if n.name == "cn1" else n for n in tree.nodes]
    with pytest.raises(StaleProviders) as caught:
        _put(db, compute["root"], wanted)
    assert caught.value.stale == ((compute["root"], 0, None),)


def test_children_swap_names_move_and_a_parent_goes_while_its_child_stays(db, compute):
    tree = db.read(partial(ops.read, root_uuid=compute["root"]))
    by_uuid = {n.uuid: n for n in tree.nodes}
    wanted = [
        by_uuid[compute["root"]],
        _changed(by_uuid[compute["numa1"]], name="cn1-numa0"),  # takes numa0's name
        _changed(by_uuid[compute["nic"]], parent_uuid=compute["numa1"]),  # numa0 goes
        _node(None, "cn1-numa0-new-name-holder", compute["numa1"], inventories={"VGPU": 2}),
    ]
    permits = Permits()
    after = _put(db, compute["root"], wanted, permits)
    names = {n.name: n for n in after.nodes}
    assert sorted(names) == ["cn1", "cn1-nic0", "cn1-numa0", "cn1-numa0-new-name-holder"]
    assert names["cn1-numa0"].uuid == compute["numa1"]
    assert names["cn1-nic0"].parent_uuid == compute["numa1"]
    assert names["cn1-numa0-new-name-holder"].generation == 0
    with pytest.raises(ProviderNotFound):
        db.read(partial(providers.get, uuid=compute["numa0"]))
    assert permits.asked == [frozenset({ops.CREATE, ops.UPDATE, ops.DELETE, ops.INVENTORIES})]
    assert names["cn1-numa0"].generation == 1 and names["cn1-nic0"].generation == 1


def test_deleting_a_provider_with_allocations_is_refused_and_nothing_is_written(db, compute):
    db.write(
        partial(
            allocations.write,
            wanted=[Wanted(new_uuid(), {compute["numa0"]: {"VCPU": 1}}, "p", "u", None)],
            check_generation=True,
            incomplete=INCOMPLETE,
        )
    )
    tree = db.read(partial(ops.read, root_uuid=compute["root"]))
    wanted = [n for n in tree.nodes if n.uuid not in (compute["numa0"], compute["nic"])]
    wanted[0] = _changed(wanted[0], name="renamed first")
    with pytest.raises(ProviderInUse) as caught:
        _put(db, compute["root"], wanted)
    assert caught.value.uuid == compute["numa0"]
    assert db.read(partial(ops.read, root_uuid=compute["root"])).nodes == tree.nodes


def test_removing_an_inventory_in_use_is_refused_shrinking_is_not(db, compute):
    db.write(
        partial(
            allocations.write,
            wanted=[Wanted(new_uuid(), {compute["numa1"]: {"VCPU": 6}}, "p", "u", None)],
            check_generation=True,
            incomplete=INCOMPLETE,
        )
    )
    tree = db.read(partial(ops.read, root_uuid=compute["root"]))
    emptied = [_changed(n, inventories={}) if n.uuid == compute["numa1"] else n for n in tree.nodes]
    with pytest.raises(InventoryInUse) as caught:
        _put(db, compute["root"], emptied)
    assert (caught.value.uuid, caught.value.resource_classes) == (compute["numa1"], ("VCPU",))
    shrunk = [
        _changed(n, inventories={"VCPU": inventory_store.with_defaults("VCPU", {"total": 4})})
        if n.uuid == compute["numa1"]
        else n
        for n in tree.nodes
    ]
    after = _put(db, compute["root"], shrunk)  # as PUT .../inventories allows, with a warning
    assert {n.uuid: n for n in after.nodes}[compute["numa1"]].inventories["VCPU"].total == 4


def test_a_provider_of_another_tree_is_refused(db, compute):
    other = new_uuid()
    _put(db, other, [_node(other, "cn2", None)])
    tree = db.read(partial(ops.read, root_uuid=compute["root"]))
    wanted = [*tree.nodes, _node(other, "cn2", compute["root"], generation=0)]
    with pytest.raises(InAnotherTree) as caught:
        _put(db, compute["root"], wanted)
    assert (caught.value.uuid, caught.value.its_root) == (other, other)


def test_the_url_of_a_child_is_not_a_tree(db, compute):
    with pytest.raises(NotARoot) as caught:
        db.read(partial(ops.read, root_uuid=compute["numa0"]))
    assert caught.value.root_uuid == compute["root"]
    with pytest.raises(NotARoot):
        _put(db, compute["numa0"], [_node(compute["numa0"], "x", None, generation=0)])
    with pytest.raises(ProviderNotFound):
        db.read(partial(ops.read, root_uuid=new_uuid()))


def test_a_name_another_tree_has_is_refused(db, compute):
    root = new_uuid()
    with pytest.raises(ProviderExists) as caught:
        _put(db, root, [_node(root, "cn2", None), _node(None, "cn1-numa0", root)])
    assert caught.value.name == "cn1-numa0"
    with pytest.raises(ProviderNotFound):
        db.read(partial(ops.read, root_uuid=root))  # the root made first is gone with it


@pytest.mark.parametrize(
    ("inventories", "traits", "refused"),
    [
        ({"NO_SUCH_CLASS": 1}, (), UnknownResourceClass),
        ({}, ("NO_SUCH_TRAIT",), UnknownTrait),
        ({}, ("CUSTOM_lower",), UnknownTrait),
    ],
)
def test_names_not_custom_must_exist(db, inventories, traits, refused):
    root = new_uuid()
    with pytest.raises(refused):
        _put(db, root, [_node(root, "cn", None, inventories=inventories, traits=traits)])


def test_an_inventory_without_capacity_is_refused(db):
    root = new_uuid()
    node = _node(root, "cn", None)
    node = _changed(
        node,
        inventories={"VCPU": inventory_store.with_defaults("VCPU", {"total": 1, "reserved": 2})},
    )
    with pytest.raises(InvalidInventory):
        _put(db, root, [node])


def test_a_refused_permit_writes_nothing(db, compute):
    tree = db.read(partial(ops.read, root_uuid=compute["root"]))
    wanted = [*tree.nodes, _node(None, "cn1-gpu0", compute["root"])]
    with pytest.raises(PermissionError):
        _put(db, compute["root"], wanted, Permits(refused={ops.CREATE}))
    assert db.read(partial(ops.read, root_uuid=compute["root"])).nodes == tree.nodes


@pytest.mark.parametrize(
    "body_problem",
    ["two roots", "root not the url", "parent outside", "uuid twice", "name twice", "loop"],
)
def test_a_body_that_is_not_one_tree_is_refused_before_any_read(body_problem):
    root, a, b = new_uuid(), new_uuid(), new_uuid()
    nodes = {
        "two roots": [_node(root, "r", None), _node(a, "a", None)],
        "root not the url": [_node(a, "a", None)],
        "parent outside": [_node(root, "r", None), _node(a, "a", b)],
        "uuid twice": [_node(root, "r", None), _node(a, "a", root), _node(a, "b", root)],
        "name twice": [_node(root, "r", None), _node(a, "a", root), _node(b, "a", root)],
        "loop": [_node(root, "r", None), _node(a, "a", b), _node(b, "b", a)],
    }[body_problem]
    with pytest.raises(TreeShape):
        ops.check_shape(root, nodes)


def test_a_writer_between_our_read_and_write_makes_the_client_stale(db, compute, monkeypatch):
    """Another writer moves the providers' generations right after the tree
    is read: the conditional bump fails, the unit of work runs again, and
    the client's generations, now stale, are named."""
    tree = db.read(partial(ops.read, root_uuid=compute["root"]))
    wanted = [_changed(n, name=n.name + "-renamed") for n in tree.nodes]
    race = ChangedAfterRead(monkeypatch, times=1, reader="query")
    with pytest.raises(StaleProviders) as caught:
        _put(db, compute["root"], wanted)
    assert race.reads >= 2  # run again after the conflict
    assert {uuid for uuid, _now, _given in caught.value.stale} == {n.uuid for n in tree.nodes}


def test_reading_a_tree_costs_the_same_statements_for_3_or_30_children(db):
    counts = []
    for children in (3, 30):
        root = new_uuid()
        _put(
            db,
            root,
            [_node(root, f"host-{children}", None)]
            + [
                _node(
                    None, f"host-{children}-{i}", root, inventories={"VGPU": 1}, traits=["CUSTOM_T"]
                )
                for i in range(children)
            ],
        )
        with Statements(db.engine) as seen:
            tree = db.read(partial(ops.read, root_uuid=root))
        assert len(tree.nodes) == children + 1
        counts.append(len(seen))
    assert counts[0] == counts[1] <= 6
