"""GET /resource_providers in every form operators and nova's periodic
tasks ask runs a fixed number of statements, whatever the number of
providers (counted for 4 and 40, on every backend), and the amounts a
capacity filter asks are bound parameters, never written into the SQL."""

from __future__ import annotations

import uuid

from placement_svc import app
from placement_svc.db import providers as providers_db
from placement_svc.db.engine import Database, create_engine
from tests.support import fixtures, small_cloud
from tests.support.statements import Statements

AGGREGATE = str(uuid.uuid4())
ROOT = str(uuid.uuid4())
# The forms of the list, and the SELECTs each runs: one statement reads the
# providers (the tree's root, the classes' and the traits' ids are
# subqueries of it), but for a forbidden trait or an any-of list of several,
# whose ids are looked up first (an unknown one among them would not leave
# the list empty, and is a 400 all the same), and on PostgreSQL a trait
# (see db/providers.list_filtered).
FORMS = {
    "": 1,
    "?resources=VCPU:1,MEMORY_MB:512": 1,
    "?required=HW_CPU_X86_AVX2": 1,
    "?required=HW_CPU_X86_AVX2,!HW_CPU_X86_SSE": 2,
    "?required=in:HW_CPU_X86_AVX2,HW_CPU_X86_SSE": 2,
    f"?member_of=in:{AGGREGATE}": 1,
    f"?in_tree={ROOT}": 1,
}
ON_POSTGRESQL = {"?required=HW_CPU_X86_AVX2": 2}


def _forms(backend: str) -> dict[str, int]:
    return {**FORMS, **(ON_POSTGRESQL if backend == "postgresql" else {})}


def _served(test_db, providers: int):
    test_db.reset()
    engine = create_engine(test_db.url)
    client = fixtures.api_client(app.create_app(fixtures.make_conf(), Database(engine)))
    small_cloud.one_tree(client, providers, ROOT, AGGREGATE, {"VCPU": 8, "MEMORY_MB": 1024})
    return engine, client


def _counted(engine, client, query: str) -> tuple[list[str], int]:
    """The SELECTs the list ran (a backend's own BEGIN aside), and how many
    providers it answered."""
    with Statements(engine) as seen:
        answer = client.get(f"/resource_providers{query}")
    assert answer.status_code == 200, answer.text
    reads = [text for text in seen if text.lstrip().upper().startswith("SELECT")]
    return reads, len(answer.json()["resource_providers"])


def test_each_form_of_the_list_runs_as_many_statements_for_40_providers_as_for_4(test_db):
    counted = {}
    for providers in (4, 40):
        engine, client = _served(test_db, providers)
        client.get("/resource_providers")  # the first request's own reads
        for query in FORMS:
            seen, listed = _counted(engine, client, query)
            assert listed == providers, (query, listed)
            counted.setdefault(query, []).append(len(seen))
        engine.dispose()
    expected = _forms(test_db.backend)
    assert counted == {query: [count, count] for query, count in expected.items()}


def test_the_amounts_asked_are_bound_not_written_into_the_sql(test_db):
    engine, client = _served(test_db, 4)
    client.get("/resource_providers")
    one, listed_one = _counted(engine, client, "?resources=VCPU:1,MEMORY_MB:512")
    other, listed_other = _counted(engine, client, "?resources=VCPU:8,MEMORY_MB:1024")
    none, listed_none = _counted(engine, client, "?resources=VCPU:9")
    engine.dispose()
    assert (listed_one, listed_other, listed_none) == (4, 4, 0)
    assert one[-1] == other[-1]  # the same text: only the bound values differ
    assert "512" not in one[-1] and "1024" not in other[-1]


# The SELECTs of a list of children by a trait (their parents and roots not
# listed), the first time its form is read and the next: PostgreSQL looks
# the trait up first; it and PyMySQL read the uuids after the providers,
# once for all, the first time, and then the form is read with the uuids
# joined (see providers._JOINED_FORMS).
CHILDREN_APART = {"sqlite": [1, 1], "postgresql": [3, 2], "mysql": [2, 1]}


def _children(test_db, children: int, traits=("HW_CPU_X86_AVX2",)):
    test_db.reset()
    engine = create_engine(test_db.url)
    client = fixtures.api_client(app.create_app(fixtures.make_conf(), Database(engine)))
    root = small_cloud.api_provider(client, "root")
    for index in range(children):
        small_cloud.api_provider(client, f"child-{index}", parent=root, traits=list(traits))
    client.get("/resource_providers")  # the first request's own reads
    return engine, client, root


def _selects(seen) -> list[str]:
    return [text for text in seen if text.lstrip().upper().startswith("SELECT")]


def test_parents_and_roots_not_listed_cost_no_statement_per_provider(test_db):
    """A list of children whose root it does not list runs as many
    statements for 40 children as for 4, and names the root."""
    counted = []
    for children in (4, 40):
        engine, client, root = _children(test_db, children)
        providers_db._JOINED_FORMS.clear()
        counted.append([])
        for _ in range(2):
            with Statements(engine) as seen:
                answer = client.get("/resource_providers?required=HW_CPU_X86_AVX2")
            assert answer.status_code == 200, answer.text
            listed = answer.json()["resource_providers"]
            assert len(listed) == children
            assert {(p["parent_provider_uuid"], p["root_provider_uuid"]) for p in listed} == {
                (root, root)
            }
            counted[-1].append(len(_selects(seen)))
        engine.dispose()
    assert counted == [CHILDREN_APART[test_db.backend]] * 2


# Whether a list of the form read the parents' and roots' uuids joined:
# before the root has the trait and after, on each backend.
JOINED_BEFORE = {"sqlite": [True, True], "postgresql": [False, True], "mysql": [False, True]}


def test_a_form_read_with_joins_goes_back_once_it_lists_parents(test_db):
    """Once the lists of a form hold their children's parents and roots
    again, within _LOOK_AGAIN lists, PostgreSQL and PyMySQL read it as
    they read one that does (the uuids found among the providers, no
    joins: PyMySQL in chunks, GROUP_CONCAT); SQLite always joins."""
    engine, client, root = _children(test_db, 3)
    providers_db._JOINED_FORMS.clear()
    query = "/resource_providers?required=HW_CPU_X86_AVX2"

    def read(listed: int) -> tuple[bool, bool]:
        with Statements(engine) as seen:
            answer = client.get(query)
        assert answer.status_code == 200, answer.text
        assert len(answer.json()["resource_providers"]) == listed
        providers = [s for s in _selects(seen) if "FROM resource_providers" in s]
        return "AS parent" in providers[0], "GROUP_CONCAT" in providers[0].upper()

    before = [read(3), read(3)]
    generation = client.get(f"/resource_providers/{root}").json()["generation"]
    answer = client.put(
        f"/resource_providers/{root}/traits",
        json={"traits": ["HW_CPU_X86_AVX2"], "resource_provider_generation": generation},
    )
    assert answer.status_code == 200, answer.text
    after = [read(4) for _ in range(providers_db._LOOK_AGAIN + 1)]
    engine.dispose()
    chunks = test_db.backend == "mysql"
    assert [joined for joined, _chunks in before] == JOINED_BEFORE[test_db.backend]
    assert [chunked for _joined, chunked in before] == [chunks, False]
    if test_db.backend == "sqlite":
        assert after == [(True, False)] * len(after)
        return
    # joined until looked at, then not
    back = [joined for joined, _chunks in after].index(False)
    assert 0 < back <= providers_db._LOOK_AGAIN
    assert after == [(True, False)] * back + [(False, chunks)] * (len(after) - back)


def test_an_empty_list_by_name_looks_the_names_up_to_tell_an_unknown_one(test_db):
    """A list whose classes or traits are looked up in its statement looks
    them up on their own only when it comes back empty: an unknown name is
    a 400 (upstream's), a known one an empty list."""
    engine, client = _served(test_db, 4)
    client.get("/resource_providers")
    client.put("/traits/CUSTOM_NOBODY_HAS")
    # query: status, SELECTs, SELECTs on PostgreSQL (which looks a trait up first)
    cases = {
        "?resources=VCPU:9": (200, 2, 2),  # known, nobody has room: one look-up more
        "?required=CUSTOM_NOBODY_HAS": (200, 2, 2),
        "?resources=CUSTOM_NO_SUCH:1": (400, 2, 2),
        "?required=CUSTOM_NO_SUCH": (400, 2, 1),
        "?required=CUSTOM_NO_SUCH&resources=VCPU:1": (400, 2, 1),
        # Looked up first, exactly: an upstream-made MariaDB database's
        # collation takes these for HW_CPU_X86_AVX2 and VCPU.
        "?required=hw_cpu_x86_avx2": (400, 1, 1),
        "?resources=vcpu:1": (400, 1, 1),
        # An amount no inventory can hold answers empty without the list,
        # after the traits are looked up.
        "?required=CUSTOM_NO_SUCH&resources=VCPU:2147483648": (400, 1, 1),
        "?required=HW_CPU_X86_AVX2&resources=VCPU:2147483648": (200, 1, 1),
    }
    on_postgresql = test_db.backend == "postgresql"
    for query, (status, selects, on_pg) in cases.items():
        with Statements(engine) as seen:
            answer = client.get(f"/resource_providers{query}")
        assert answer.status_code == status, (query, answer.text)
        if status == 200:
            assert answer.json() == {"resource_providers": []}, query
        reads = [text for text in seen if text.lstrip().upper().startswith("SELECT")]
        assert len(reads) == (on_pg if on_postgresql else selects), (query, reads)
    engine.dispose()
