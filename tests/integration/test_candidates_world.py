"""The shape of the cloud a process keeps (candidates/world.py), the world
generation that says when to read it again (db/shape_changes.py: triggers,
here SQLite's; tests/functional/test_shape_changes.py has the others), and
the search of the first anchors only (rooms.window / rooms.found).

What is proven: which statements a transaction notes as changing the shape
(inventories, traits and aggregates of providers, providers created,
deleted or moved; not a claim's generation bump nor a rename); the
triggers move the generation in every statement that changes the shape,
written through SQLAlchemy or in SQL by hand, not for a rolled-back one nor
a claim nor a rename; a kept World is used while the generation stands,
read again when it moves, when it is older than MAX_AGE, and always
without the generation's rows; and, on random
hand-built worlds, a search of the first N anchors walks into a prefix of
the whole answer, its anchors a prefix of the whole search's, equal to it
once N covers every anchor.
"""

from __future__ import annotations

import random
from contextlib import nullcontext

import pytest
import sqlalchemy as sa

from placement_svc.candidates import merge, rooms, world
from placement_svc.candidates.model import Provider
from placement_svc.db import engine as db_engine
from placement_svc.db import shape_changes, tables
from tests.unit.test_candidates_merge import World, ask, random_room

RP = tables.resource_providers
INV = tables.inventories


@pytest.mark.parametrize(
    ("stmt", "changes"),
    [
        (sa.insert(INV), True),
        (sa.delete(tables.resource_provider_traits), True),
        (sa.update(tables.resource_provider_aggregates), True),
        (sa.insert(RP), True),
        (sa.delete(RP), True),
        (sa.update(RP).values(parent_provider_id=2), True),
        (sa.update(RP).values(root_provider_id=None), True),
        (sa.update(RP).values(generation=RP.c.generation + 1, updated_at=None), False),
        (sa.update(RP).values(name="renamed"), False),
        (sa.insert(tables.allocations), False),
        (sa.delete(tables.consumers), False),
        (sa.insert(tables.traits), True),  # a request's names are looked up in the shape
        (sa.delete(tables.resource_classes), True),
    ],
)
def test_which_statements_change_the_shape(stmt, changes):
    assert tables.changes_world(stmt) is changes


def test_an_update_of_providers_named_by_parameters_only_is_judged_by_them():
    assert not tables.changes_world(sa.update(RP), [{"generation": 2}])
    assert tables.changes_world(sa.update(RP), [{"generation": 2, "parent_provider_id": 1}])
    assert tables.changes_world(sa.update(RP))  # nothing said: count it
    # Parameters that bind the statement's own bindparams set no column.
    bump = (
        sa.update(RP)
        .where(RP.c.id == sa.bindparam("b_id"))
        .values(generation=RP.c.generation + 1, updated_at=sa.bindparam("b_now"))
    )
    assert not tables.changes_world(bump, [], {"b_id": 1, "b_now": None})
    assert tables.changes_world(bump, [], {"b_id": 1, "b_now": None, "parent_provider_id": 2})
    assert tables.changes_world(sa.update(RP).where(RP.c.id == sa.bindparam("b_id")), [{"b_id": 1}])


def shaped(path) -> sa.engine.Engine:
    """A database of our tables with the triggers that count shape changes
    (what revision 0003 makes, without running the migrations)."""
    engine = db_engine.create_engine(f"sqlite:///{path}")
    tables.metadata.create_all(engine)
    with engine.begin() as conn:
        conn.execute(sa.insert(tables.resource_classes).values(id=0, name="VCPU"))
        conn.execute(sa.insert(tables.world_changes), shape_changes.initial_rows())
        shape_changes.create(conn)
    return engine


@pytest.fixture
def engine(sqlite_file):
    engine = shaped(sqlite_file)
    yield engine
    engine.dispose()


def generation(engine) -> int:
    with engine.connect() as conn:
        return world.generation(conn)


def add_provider(conn, name: str) -> int:
    pid = conn.execute(sa.insert(RP).values(uuid=name, name=name, generation=0)).lastrowid
    conn.execute(sa.update(RP).where(RP.c.id == pid).values(root_provider_id=pid))
    conn.execute(
        sa.insert(INV).values(
            resource_provider_id=pid, resource_class_id=0, total=8, reserved=0,
            min_unit=1, max_unit=8, step_size=1, allocation_ratio=1.0,
        )
    )  # fmt: skip
    return pid


def test_the_generation_moves_with_every_change_of_the_shape_and_only_then(engine):
    with engine.begin() as conn:
        pid = add_provider(conn, "a")
        add_provider(conn, "b")
    seen = generation(engine)
    with engine.begin() as conn:  # a claim's generation bump, a rename
        conn.execute(sa.update(RP).where(RP.c.id == pid).values(generation=RP.c.generation + 1))
        conn.execute(sa.update(RP).where(RP.c.id == pid).values(name="renamed"))
        conn.execute(sa.update(RP).where(RP.c.id == pid).values(root_provider_id=pid))  # as it was
    assert generation(engine) == seen
    with pytest.raises(RuntimeError), engine.begin() as conn:
        conn.execute(sa.delete(INV).where(INV.c.resource_provider_id == pid))
        assert db_engine.changed_world(conn)
        raise RuntimeError("rolled back")
    assert generation(engine) == seen
    with engine.begin() as conn:
        with pytest.raises(sa.exc.IntegrityError), conn.begin_nested():
            conn.execute(sa.delete(INV).where(INV.c.resource_provider_id == pid))
            conn.execute(sa.insert(RP).values(uuid="a", name="dup", generation=0))
        assert generation(engine) == seen  # the savepoint took its step with it
        conn.execute(sa.update(INV).where(INV.c.resource_provider_id == pid).values(total=4))
    assert generation(engine) != seen
    seen = generation(engine)
    with engine.begin() as conn:  # SQL by hand, as an operator or upstream would write
        conn.exec_driver_sql("INSERT INTO traits (name) VALUES ('CUSTOM_BY_HAND')")
        assert not db_engine.changed_world(conn)
    assert generation(engine) != seen


def test_a_kept_world_is_used_until_the_generation_moves(engine, monkeypatch):
    worlds = world.Worlds()
    with engine.begin() as conn:
        pid = add_provider(conn, "a")
    for _ in range(3):
        with engine.connect() as conn:
            assert set(worlds.current(conn).providers) == {pid}
    assert worlds.loads == 1
    with engine.begin() as conn:
        other = add_provider(conn, "b")
    with engine.connect() as conn:
        assert set(worlds.current(conn).providers) == {pid, other}
        assert worlds.current(conn).stock[0][1] == world.stock(other, 8.0, 1, 8, 1)
    assert worlds.loads == 2
    monkeypatch.setattr(world, "MAX_AGE", 0.0)
    with engine.connect() as conn:
        worlds.current(conn)
    assert worlds.loads == 3


def test_the_generation_moves_by_a_random_step(engine):
    """Two databases that go through as many changes end at other values."""
    with engine.begin() as conn:
        pid = add_provider(conn, "a")
    steps = set()
    for total in range(10, 18):
        before = generation(engine)
        with engine.begin() as conn:  # one statement, one row
            conn.execute(
                sa.update(INV).where(INV.c.resource_provider_id == pid).values(total=total)
            )
        steps.add(generation(engine) - before)
    assert min(steps) >= 1 and max(steps) <= shape_changes.MAX_STEP
    assert len(steps) > 1


def test_a_database_made_again_with_as_many_changes_is_read_again(sqlite_file):
    """A process keeps the world of a database that is then dropped and made
    again: as many changes later, its generation is another value, so the
    process reads the new shape instead of keeping the old one."""
    worlds = world.Worlds()
    for name in ("first", "second"):
        engine = shaped(sqlite_file)
        with engine.begin() as conn:
            pid = add_provider(conn, name)
        with engine.connect() as conn:
            kept = worlds.current(conn)
        assert [p.uuid for p in kept.providers.values()] == [name]
        assert kept.providers[pid].uuid == name
        engine.dispose()
        sqlite_file.unlink()
    assert worlds.loads == 2


def test_a_database_restored_to_a_lower_generation_is_kept_again(engine):
    worlds = world.Worlds()
    with engine.begin() as conn:
        add_provider(conn, "a")
    with engine.connect() as conn:
        worlds.current(conn)
    with engine.begin() as conn:  # as a backup taken before the change would have it
        conn.execute(sa.update(tables.world_changes).values(generation=0))
    for _ in range(3):
        with engine.connect() as conn:
            worlds.current(conn)
    assert worlds.loads == 2  # read once at the restored generation, then kept


def test_without_the_generation_rows_the_world_is_read_every_time(engine):
    with engine.begin() as conn:
        conn.execute(sa.delete(tables.world_changes))
    worlds = world.Worlds()
    for _ in range(2):
        with engine.connect() as conn:
            worlds.current(conn)
    assert worlds.loads == 2


# -- the first anchors only ---------------------------------------------------

CLASS_IDS = {"VCPU": 0, "DISK_GB": 1}


def as_world(built: World) -> world.World:
    """The shape a database holding ``built`` would give: each Room as an
    inventory of that capacity, nothing used."""
    found = built.found
    shape = world.World(1, providers=dict(sorted(found.providers.items())))
    shape.traits = found.traits
    shape.trait_ids = {"CUSTOM_A": 1, "CUSTOM_B": 2, "MISC_SHARES_VIA_AGGREGATE": 3}
    holders: dict[int, set[int]] = {}
    for (pid, rc), room in sorted(found.room.items()):
        stock = world.stock(pid, room.free, room.min_unit, room.max_unit, 1)
        shape.stock.setdefault(CLASS_IDS[rc], []).append(stock)
        holders.setdefault(CLASS_IDS[rc], set()).add(found.providers[pid].root_id)
    shape.holders = {rc_id: frozenset(roots) for rc_id, roots in holders.items()}
    shape.stock_ids = {rc_id: [s.provider for s in stock] for rc_id, stock in shape.stock.items()}
    shape.sharing = frozenset(found.sharing)
    shape.shares_with = {pid: frozenset(roots) for pid, roots in found.shares_with.items()}
    for provider in shape.providers.values():
        shape.members.setdefault(provider.root_id, []).append(provider.id)
    shape.roots = frozenset(shape.members)
    return shape


def random_cloud(rng: random.Random) -> World:
    built = World()
    classes = ("VCPU", "DISK_GB")
    for t in range(rng.randint(3, 9)):
        names = [f"T{t}"]
        traits = rng.sample(("CUSTOM_A", "CUSTOM_B"), rng.randint(0, 1))
        built.provider(names[0], room=random_room(rng, classes), traits=traits)
        for c in range(rng.randint(0, 2)):
            names.append(f"T{t}C{c}")
            built.provider(names[-1], rng.choice(names[:-1]), room=random_room(rng, classes))
    roots = [built.names[r] for r in built.found.roots]
    for s in range(rng.randint(0, 2)):
        built.sharing(f"S{s}", {"DISK_GB": rng.randint(1, 4)}, rng.sample(roots, 2))
    return built


def random_nova_query(rng: random.Random) -> str:
    parts = ["resources=" + rng.choice(["VCPU:1", "VCPU:1,DISK_GB:1", "DISK_GB:2"])]
    if rng.random() < 0.5:
        parts.append("resources_G=" + rng.choice(["VCPU:1", "DISK_GB:1"]))
    if rng.random() < 0.5:
        parts.append("root_required=" + rng.choice(["!CUSTOM_A", "CUSTOM_B", "!CUSTOM_B"]))
    parts.append("group_policy=" + rng.choice(["none", "isolate"]))
    return "&".join(parts)


def wanted_of(req) -> dict[int, tuple[str, int]]:
    smallest: dict[str, int] = {}
    for group in req.groups.values():
        for rc, amount in group.resources.items():
            smallest[rc] = min(amount, smallest.get(rc, amount))
    return {CLASS_IDS[rc]: (rc, amount) for rc, amount in smallest.items()}


def test_a_search_of_the_first_anchors_walks_into_a_prefix_of_the_whole_answer():
    rng = random.Random(4242)
    windowed = reached_all = 0
    for _ in range(300):
        shape = as_world(random_cloud(rng))
        req = ask(random_nova_query(rng))
        wanted = wanted_of(req)
        whole = rooms.found(shape, req, wanted, {})
        answer = [c.key() for c in merge.generate(req, whole)]
        for first in range(1, len(shape.roots) + 2):
            cut = rooms.window(shape, req, wanted, first)
            part = rooms.found(shape, req, wanted, {}, cut)
            walked = [c.key() for c in merge.generate(req, part)]
            assert part.roots == whole.roots[: len(part.roots)]
            assert walked == answer[: len(walked)]
            if cut is None:
                assert part.complete and walked == answer
                reached_all += 1
                break
            windowed += 1
            assert not part.complete and len(part.roots) in (0, first)  # 0: no room at all
            # Only the window's trees (and the sharing providers') are read.
            assert {p.root_id for p in part.providers.values()} == cut[0]
    assert windowed > 300 and reached_all == 300


def test_of_world_reads_the_room_of_the_wanted_classes_against_fresh_usage():
    shape = world.World(1, providers={n: Provider(n, f"u{n}", None, n) for n in (1, 2, 3)})
    shape.traits = {n: frozenset() for n in (1, 2, 3)}
    shape.stock = {
        0: [
            world.stock(1, 8.0, 1, 8, 1),
            world.stock(2, 4.0, 2, 4, 2),
            world.stock(3, 2.0, 1, 2, 1),
        ]
    }
    shape.holders = {0: frozenset({1, 2, 3})}
    shape.members, shape.roots = {1: [1], 2: [2], 3: [3]}, frozenset({1, 2, 3})
    found = rooms.of_world(shape, {0: ("VCPU", 2)}, {0: {1: 7, 2: 1}})
    assert found.with_room == {"VCPU": [2, 3]}
    assert found.full == {(1, "VCPU"): (1.0, 1, 8, 1, 8, 7)}  # its room, too small
    assert found.room[(2, "VCPU")] == (3.0, 2, 4, 2, 4, 1)
    assert found.room[(3, "VCPU")] == (2.0, 1, 2, 1, 2, 0)  # nothing used on it
    assert rooms.of_world(shape, {0: ("VCPU", 3)}, {0: {}}).full[(3, "VCPU")] == (
        2.0,
        1,
        2,
        1,
        2,
        0,
    )
    # A class asked beyond what any inventory holds chooses no tree, but
    # its inventories are in full, with their used amounts.
    beyond = rooms.of_world(shape, {}, {0: {1: 7}}, beyond={0: ("VCPU", 2**31)})
    assert beyond.with_room == {} and beyond.providers == {} and beyond.classes == {"VCPU": 0}
    assert sorted(beyond.full) == [(1, "VCPU"), (2, "VCPU"), (3, "VCPU")]
    assert beyond.full[(1, "VCPU")] == (1.0, 1, 8, 1, 8, 7)
    assert found.providers is shape.providers  # every tree: the world's own, shared


def test_a_transaction_reads_its_own_changes_and_keeps_them_to_itself(engine):
    worlds = world.Worlds()
    with engine.begin() as conn:
        add_provider(conn, "a")
    for name in ("rolled back", "committed"):  # the same generation, twice
        with pytest.raises(RuntimeError) if name == "rolled back" else nullcontext():
            with engine.begin() as conn:
                pid = add_provider(conn, name)
                assert pid in worlds.current(conn).providers
                if name == "rolled back":
                    raise RuntimeError(name)
        with engine.connect() as conn:
            seen = {p.uuid for p in worlds.current(conn).providers.values()}
        assert seen == ({"a"} if name == "rolled back" else {"a", "committed"})
