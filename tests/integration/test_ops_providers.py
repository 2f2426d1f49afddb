"""Provider units of work: creation, rename, (re/un)parenting and deletion, each
refusal a fact naming the provider, in upstream's check order."""

from __future__ import annotations

import sqlite3
from functools import partial

import jsonschema
import pytest
from microversion_parse import Version

from placement_svc import microversion as mv
from placement_svc.db import providers as providers_db
from placement_svc.db.exceptions import (
    ParentProviderNotFound,
    ProviderExists,
    ProviderHasChildren,
    ProviderNotFound,
    UnknownResourceClass,
    UnknownTrait,
)
from placement_svc.ops import providers as ops
from placement_svc.ops.exceptions import (
    ProviderIsOwnParent,
    ProviderNameMissing,
    ProviderTreeLoop,
    ReparentingNotAllowed,
    UnparentingNotAllowed,
)
from placement_svc.queryparams import TraitFilter
from tests.integration.conftest import new_uuid

BEFORE_REPARENTING = Version(1, 36)


def _create(db, name, parent_uuid=None, uuid=None):
    uuid = uuid or new_uuid()
    return db.write(partial(ops.create, name=name, uuid=uuid, parent_uuid=parent_uuid))


def test_create_makes_a_root_or_a_child(db):
    root = _create(db, "root")
    assert (root.root_uuid, root.parent_uuid, root.generation) == (root.uuid, None, 0)
    child = _create(db, "child", parent_uuid=root.uuid)
    assert (child.root_uuid, child.parent_uuid) == (root.uuid, root.uuid)


def test_create_refusals_name_the_new_provider(db):
    uuid = new_uuid()
    with pytest.raises(ProviderNameMissing):
        _create(db, "", uuid=uuid)
    with pytest.raises(ProviderIsOwnParent) as own:
        _create(db, "rp", parent_uuid=uuid, uuid=uuid)
    assert own.value.uuid == uuid
    missing = new_uuid()
    with pytest.raises(ParentProviderNotFound) as orphan:
        _create(db, "rp", parent_uuid=missing, uuid=uuid)
    assert (orphan.value.uuid, orphan.value.parent_uuid, orphan.value.vanished) == (
        uuid,
        missing,
        False,
    )


def test_create_reports_which_of_uuid_and_name_are_taken(db):
    first = _create(db, "taken")
    with pytest.raises(ProviderExists) as both:
        _create(db, "taken", uuid=first.uuid)
    assert (both.value.uuid, both.value.name) == (first.uuid, "taken")
    with pytest.raises(ProviderExists) as name_only:
        _create(db, "taken")
    assert (name_only.value.uuid, name_only.value.name) == (None, "taken")


def test_update_checks_the_provider_before_the_body(db):
    with pytest.raises(ProviderNotFound):
        db.write(partial(ops.update, uuid=new_uuid(), data={}, version=mv.MAX_VERSION))
    rp = _create(db, "rp")
    with pytest.raises(jsonschema.ValidationError) as invalid:
        db.write(partial(ops.update, uuid=rp.uuid, data={}, version=mv.MAX_VERSION))
    assert "'name' is a required property" in str(invalid.value)


def test_moving_a_child_needs_reparenting(db):
    root, other = _create(db, "root"), _create(db, "other")
    child = _create(db, "child", parent_uuid=root.uuid)
    body = {"name": "child", "parent_provider_uuid": other.uuid}
    with pytest.raises(ReparentingNotAllowed):
        db.write(partial(ops.update, uuid=child.uuid, data=body, version=BEFORE_REPARENTING))
    with pytest.raises(UnparentingNotAllowed):
        db.write(
            partial(
                ops.update,
                uuid=child.uuid,
                data={"name": "child", "parent_provider_uuid": None},
                version=BEFORE_REPARENTING,
            )
        )
    moved = db.write(partial(ops.update, uuid=child.uuid, data=body, version=mv.MAX_VERSION))
    assert (moved.parent_uuid, moved.root_uuid) == (other.uuid, other.uuid)


def test_a_provider_cannot_go_under_its_own_subtree(db):
    root = _create(db, "root")
    child = _create(db, "child", parent_uuid=root.uuid)
    body = {"name": "root", "parent_provider_uuid": child.uuid}
    with pytest.raises(ProviderTreeLoop) as loop:
        db.write(partial(ops.update, uuid=root.uuid, data=body, version=mv.MAX_VERSION))
    assert loop.value.uuid == root.uuid


def test_a_rename_to_a_taken_name_names_the_name(db):
    _create(db, "taken")
    rp = _create(db, "rp")
    with pytest.raises(ProviderExists) as taken:
        db.write(partial(ops.update, uuid=rp.uuid, data={"name": "taken"}, version=mv.BASE))
    assert (taken.value.uuid, taken.value.name) == (None, "taken")


def test_delete_refuses_a_parent(db):
    root = _create(db, "root")
    _create(db, "child", parent_uuid=root.uuid)
    with pytest.raises(ProviderHasChildren) as parent:
        db.write(partial(ops.delete, uuid=root.uuid))
    assert parent.value.uuid == root.uuid


def test_list_names_unknown_traits_sorted_and_unknown_classes_in_order(db):
    with pytest.raises(UnknownTrait) as traits:
        db.read(
            partial(
                ops.list_filtered, required=TraitFilter([frozenset({"CUSTOM_B"})], {"CUSTOM_A"})
            )
        )
    assert traits.value.names == ("CUSTOM_A", "CUSTOM_B")
    with pytest.raises(UnknownResourceClass) as classes:
        db.read(partial(ops.list_filtered, resources={"CUSTOM_Z": 1, "VCPU": 1, "CUSTOM_Y": 1}))
    assert classes.value.names == ("CUSTOM_Z", "CUSTOM_Y")


def test_a_list_carries_the_newest_change_of_its_providers(db):
    """The list keeps the newest of its providers' times alone, on every
    backend: the same time as the newest single read."""
    root = _create(db, "root")
    child = _create(db, "child", parent_uuid=root.uuid)
    _create(db, "other")
    latest = mv.Version(1, 39)
    db.write(partial(ops.update, uuid=child.uuid, data={"name": "renamed"}, version=latest))
    listed = db.read(ops.list_filtered)
    assert [p.name for p in listed.providers] == ["root", "renamed", "other"]
    singles = [db.read(partial(ops.get, uuid=p.uuids[:36])) for p in listed.providers]
    assert listed.newest is not None
    assert listed.newest == max(p.modified for p in singles)
    assert [_bodied(ops.ListedProvider._make(p)) for p in listed.providers] == [
        _bodied(p) for p in singles
    ]
    assert [p.uuids.split("|")[1:] for p in listed.providers] == [
        ["", root.uuid],
        [root.uuid, root.uuid],
        ["", singles[2].uuid],
    ]
    tree = db.read(partial(ops.list_filtered, in_tree=child.uuid))
    assert [p.name for p in tree.providers] == ["root", "renamed"]
    assert db.read(partial(ops.list_filtered, in_tree=new_uuid())) == ([], None)


def test_a_list_names_parents_and_roots_it_does_not_list(db):
    """A filtered list shows each provider's parent and root even when they
    are not among the providers listed (on PostgreSQL, read after the list
    itself, and once for all of them), as a single read shows them."""
    root = _create(db, "root")
    middle = _create(db, "middle", parent_uuid=root.uuid)
    leaves = [_create(db, f"leaf-{n}", parent_uuid=middle.uuid) for n in range(3)]
    _create(db, "alone")
    for leaf in leaves:
        found = db.read(partial(ops.list_filtered, name=leaf.name)).providers
        assert [_bodied(ops.ListedProvider._make(p)) for p in found] == [
            _bodied(db.read(partial(ops.get, uuid=leaf.uuid)))
        ]
        assert found[0].uuids == f"{leaf.uuid}|{middle.uuid}|{root.uuid}"
    found = db.read(partial(ops.list_filtered, in_tree=leaves[0].uuid)).providers
    assert [p.uuids.split("|")[1:] for p in found] == [["", root.uuid]] + [
        [parent.uuid, root.uuid] for parent in [root, middle, middle, middle]
    ]


def test_a_lists_newest_time_is_right_whatever_the_sessions_date_style(db):
    """PostgreSQL writes a time cast to text in the session's DateStyle; the
    list reads its times as times there, never as such text."""
    root = _create(db, "root")
    single = db.read(partial(ops.get, uuid=root.uuid))

    def listed_in_another_style(conn):
        if conn.dialect.name != "postgresql":
            return ops.list_filtered(conn)
        # The session's (a read runs outside a transaction, where SET LOCAL is void).
        conn.exec_driver_sql("SET DateStyle = 'SQL, DMY'")
        try:
            shown = conn.exec_driver_sql("SELECT CAST(TIMESTAMP '2026-11-27 01:02:03' AS text)")
            assert shown.scalar() == "27/11/2026 01:02:03"  # the style is in force
            return ops.list_filtered(conn)
        finally:
            conn.exec_driver_sql("RESET DateStyle")

    assert db.read(listed_in_another_style).newest == single.modified


def _bodied(p) -> tuple:
    """What a provider's body shows of it (a list's row or a single read)."""
    return (p.id, p.uuid, p.name, p.generation, p.parent_uuid, p.root_uuid)


HOSTILE_NAMES = ["a|b|c", "=starts with =", "|", "ünïcödé ☃ 😀", "back\\slash %s '\"", "   "]
# A name holding what separates the records of a chunk (PyMySQL's lists).
SEPARATED = f"holds{providers_db.RECORDS}the records' separator"


def test_a_list_reads_any_name_whole_on_every_backend(db):
    """Through PyMySQL a list reads each provider as one text (its parts
    joined by ``|``, the name last); names holding ``|``, starting with
    ``=`` or outside the BMP come back whole, as a single read has them,
    with their parents and roots."""
    root = _create(db, HOSTILE_NAMES[0])
    for name in HOSTILE_NAMES[1:]:
        _create(db, name, parent_uuid=root.uuid)
    listed = db.read(ops.list_filtered)
    singles = [db.read(partial(ops.get, uuid=p.uuids[:36])) for p in listed.providers]
    assert [p.name for p in listed.providers] == HOSTILE_NAMES
    assert [_bodied(ops.ListedProvider._make(p)) for p in listed.providers] == [
        _bodied(p) for p in singles
    ]
    assert listed.newest == max(p.modified for p in singles)


def test_the_chunked_read_is_the_plain_read(db):
    """The chunks of MariaDB's lists (GROUP_CONCAT: MySQL's only) read as
    the plain rows do, hostile names, parents and roots and all; a name
    holding the records' separator makes them read as nothing (and the
    list is read again by rows)."""
    root = _create(db, HOSTILE_NAMES[0])
    for name in HOSTILE_NAMES[1:]:
        _create(db, name, parent_uuid=root.uuid)

    def both(conn):
        if conn.dialect.name != "mysql":
            return None, None
        plain = conn.execute(providers_db._LIST_SELECT.order_by(providers_db.RP.c.id)).all()
        rows = providers_db._unchunked(conn.execute(providers_db._CHUNKED_SELECT).all())
        made, _apart = providers_db._with_uuids(conn, rows)
        return sorted(made), plain

    def chunks(conn):
        return providers_db._unchunked(conn.execute(providers_db._CHUNKED_SELECT).all())

    made, plain = db.read(both)
    if made is not None:
        assert made == [tuple(row) for row in plain]
    _create(db, SEPARATED, parent_uuid=root.uuid)
    if made is not None:
        assert db.read(chunks) is None
    listed = db.read(ops.list_filtered)
    assert sorted(p.name for p in listed.providers) == sorted([*HOSTILE_NAMES, SEPARATED])


def test_a_list_in_chunks_cut_short_is_read_again_whole(db, test_db):
    """A chunk MariaDB cut at a group_concat_max_len shorter than a chunk's
    records (a server's own setting) holds fewer records than it counts:
    the list is read again by rows, and is whole. 300 providers, a tree
    of them: more than one chunk, parents and roots among them."""
    root = _create(db, "root")
    for index in range(299):
        _create(db, f"child-{index}", parent_uuid=root.uuid)
    whole = db.read(ops.list_filtered)

    def cut_short(conn):
        if conn.dialect.name == "mysql":
            conn.exec_driver_sql("SET SESSION group_concat_max_len = 4")
        try:
            return ops.list_filtered(conn)
        finally:
            if conn.dialect.name == "mysql":
                conn.exec_driver_sql("SET SESSION group_concat_max_len = 1048576")

    assert len(whole.providers) == 300
    assert db.read(cut_short) == whole


def test_the_packed_read_is_the_plain_read(db):
    """The one-text-per-row statement (PyMySQL's) answers what the plain one
    does, on each backend that has CONCAT (SQLite 3.44 and later only)."""
    root = _create(db, HOSTILE_NAMES[0])
    for name in HOSTILE_NAMES[1:]:
        _create(db, name, parent_uuid=root.uuid)

    def both(conn):
        ordered = providers_db.RP.c.id
        plain = conn.execute(providers_db._LIST_SELECT.order_by(ordered)).all()
        if conn.dialect.name == "sqlite" and sqlite3.sqlite_version_info < (3, 44):
            return None, plain
        packed = conn.execute(providers_db._PACKED_SELECT.order_by(ordered)).all()
        return providers_db._unpacked(packed), plain

    unpacked, plain = db.read(both)
    assert len(plain) == len(HOSTILE_NAMES)
    if unpacked is not None:
        # PostgreSQL's plain rows hold their times as times, the packed as text.
        def timed(rows):
            return [(*row[:-1], providers_db._time(row[-1])) for row in rows]

        assert timed(unpacked.providers) == timed(plain)
        assert unpacked.newest == max(row[-1] for row in timed(plain))


def test_chunks_read_as_rows_or_not_at_all():
    """A chunk's records are _IDS_SELECT's rows (no parent: None; a NULL name:
    None); a chunk that holds fewer or more records than it counts, or a
    name shorter than its length, makes no rows at all."""
    sep = providers_db.RECORDS
    whole = [(2, f"7|3||u-7||7||{sep}8|0|2026-11-26 13:21:21.994069|u-8|7|7|2|=|x")]
    assert providers_db._unchunked(whole) == [
        (7, "u-7", None, 7, None, 3, None),
        (8, "u-8", 7, 7, "|x", 0, "2026-11-26 13:21:21.994069"),
    ]
    assert providers_db._unchunked([(3, whole[0][1])]) is None  # cut short
    assert providers_db._unchunked([(1, "7|3||u-7||7||")]) == [(7, "u-7", None, 7, None, 3, None)]
    assert providers_db._unchunked([(1, "7|3||u-7||7|2|=a")]) is None  # a name cut at RECORDS
    assert providers_db._unchunked([(1, "7|3||u-7")]) is None  # a record cut short
    assert providers_db._unchunked([(1, f"7|3||u-7||7|3|=a{sep}b")]) is None


def test_a_packed_row_without_a_name_or_times_reads_as_none():
    """A NULL name (upstream's column allows one) is packed as nothing at
    all, a name as ``=`` and the name; a provider never changed has no time."""
    read = providers_db._unpacked(
        [
            ("7|3||u-7||u-7|",),
            ("8|0|2026-11-26 13:21:21.994069|u-8|u-7|u-7|=|x",),
        ]
    )
    assert read.providers == [
        providers_db.ListedProvider(7, "u-7||u-7", None, 3, None),
        providers_db.ListedProvider(8, "u-8|u-7|u-7", "|x", 0, "2026-11-26 13:21:21.994069"),
    ]
    assert str(read.newest) == "2026-11-26 13:21:21.994069"
