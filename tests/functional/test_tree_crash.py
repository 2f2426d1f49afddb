"""A tree PUT (1.49) is all or nothing, even when its worker is SIGKILLed.

``placement-svc serve --workers 1`` over the backend's database. A client
thread PUTs /resource_provider_trees/{root} again and again, each PUT taking
the tree from one of two full states to the other: a root and eight
children whose inventories, traits, aggregates and names differ between the
two (one child is the same in both), a child moved under another, one child
present only in the first state and another only in the second (so each PUT
deletes one provider and creates one). Meanwhile the test SIGKILLs the
gunicorn worker (never the master, which starts a new one) KILLS times: two
kills in three at a random moment while a PUT is in flight, the third as
soon as the tables show the PUT committed (to hit the moment between its
COMMIT and its answer; mostly the answer comes first).

After each PUT a kill broke off, once the new worker answers, the tree is
read back twice: GET at 1.49, and straight from the database's tables. Both must be exactly
the tree before the PUT in flight or exactly the tree after it (contents and
generations: a provider that changed is one generation up, one that did not
is where it was, a new one is at 0), never a mix of the two. Every PUT
answered is a 200 with the tree after it, and the database holds it. At the
end the tree the client last knew is what the API and the tables hold.

test_the_comparison_catches_a_mixed_tree proves the comparison would see a
mix: hand-made trees with one provider (or one generation, one trait) from
the other state are neither.
"""

from __future__ import annotations

import contextlib
import http.client
import json
import os
import random
import signal
import statistics
import subprocess
import threading
import time
import uuid
from dataclasses import dataclass, field

import pytest
import sqlalchemy as sa

from placement_svc.db import tables
from tests.support.servers import CLI, environment, free_port, write_conf

pytestmark = pytest.mark.slow

VERSION = "placement 1.49"
HEADERS = {"x-auth-token": "admin", "openstack-api-version": VERSION}
KILLS = 12
CHILDREN = 8  # in each state: children 0-6 in both, 7 in "a" only, 8 in "b" only
MAX_INT = 2147483647

# A provider, normalized: uuid -> this dict (its generation included).
Tree = dict[str, dict]


# The two states


@dataclass(frozen=True)
class Names:
    """The uuids one test's tree is made of."""

    root: str = field(default_factory=lambda: str(uuid.uuid4()))
    children: tuple[str, ...] = field(
        default_factory=lambda: tuple(str(uuid.uuid4()) for _ in range(CHILDREN + 1))
    )
    aggregates: tuple[str, ...] = field(
        default_factory=lambda: tuple(str(uuid.uuid4()) for _ in range(3))
    )
    tag: str = field(default_factory=lambda: uuid.uuid4().hex[:6])


def _inventory(total, reserved=0, min_unit=1, max_unit=None, step_size=1, ratio=1.0) -> dict:
    return {
        "total": total,
        "reserved": reserved,
        "min_unit": min_unit,
        "max_unit": total if max_unit is None else max_unit,
        "step_size": step_size,
        "allocation_ratio": ratio,
    }


def _provider(name, parent, inventories, traits, aggregates) -> dict:
    return {
        "name": name,
        "parent_provider_uuid": parent,
        "inventories": inventories,
        "traits": sorted(traits),
        "aggregates": sorted(aggregates),
    }


def state(variant: str, names: Names) -> Tree:
    """The tree's contents in state ``variant`` ("a" or "b"), without generations."""
    a = variant == "a"
    agg = names.aggregates
    tree = {
        names.root: _provider(
            f"crash-root-{variant}-{names.tag}",
            None,
            {"VCPU": _inventory(64, ratio=16.0)} if a else {"VCPU": _inventory(96, 2, ratio=4.0)},
            ["HW_CPU_X86_AVX", "CUSTOM_CRASH_ROOT"] if a else ["HW_CPU_X86_AVX2"],
            [agg[0]] if a else [agg[1], agg[2]],
        )
    }
    present = [*range(7), 7 if a else 8]
    for i in present:
        if i == 0:  # the same in both states: its generation never moves
            tree[names.children[0]] = _provider(
                f"crash-0-{names.tag}",
                names.root,
                {"VCPU": _inventory(4)},
                ["HW_CPU_X86_SSE"],
                [agg[2]],
            )
            continue
        parent = names.root
        if i == 5 and not a:
            parent = names.children[4]  # moved
        elif i == 6:
            parent = names.children[1]  # a grandchild in both
        elif i == 7:
            parent = names.children[2]
        elif i == 8:
            parent = names.children[3]
        if a:
            inventories = {
                "VCPU": _inventory(8 + i, ratio=16.0),
                "MEMORY_MB": _inventory(4096 * i, reserved=512, ratio=1.5),
            }
            traits = ["HW_CPU_X86_AVX", "CUSTOM_CRASH_A"]
            aggregates = [agg[i % 2]]
        else:
            inventories = {
                "VCPU": _inventory(16 + i, reserved=1, max_unit=8, ratio=4.0),
                "DISK_GB": _inventory(100 * i, min_unit=10, step_size=10),
            }
            if i % 3 == 0:
                inventories["CUSTOM_CRASH_FPGA"] = _inventory(2)
            traits = ["HW_CPU_X86_AVX2", "CUSTOM_CRASH_B", f"CUSTOM_CRASH_N{i % 2}"]
            aggregates = [agg[2], agg[(i + 1) % 2]]
        name = f"crash-{i}-{names.tag}" if i % 2 else f"crash-{i}-{variant}-{names.tag}"
        tree[names.children[i]] = _provider(name, parent, inventories, traits, aggregates)
    return tree


def contents(provider: dict) -> dict:
    return {key: value for key, value in provider.items() if key != "generation"}


def after_put(before: Tree, target: Tree) -> Tree:
    """``target`` with the generations a PUT of it over ``before`` gives: one up for a
    provider that changed, the same for one that did not, 0 for a new one."""
    after = {}
    for rp, wanted in target.items():
        if rp not in before:
            generation = 0
        elif contents(before[rp]) == wanted:
            generation = before[rp]["generation"]
        else:
            generation = before[rp]["generation"] + 1
        after[rp] = {**wanted, "generation": generation}
    return after


def depth_first(tree: Tree, root: str) -> list[str]:
    """The providers' order in a GET answer: depth first from the root, siblings by name."""
    order = []

    def visit(rp):
        order.append(rp)
        kids = [k for k, p in tree.items() if p["parent_provider_uuid"] == rp]
        for kid in sorted(kids, key=lambda k: tree[k]["name"]):
            visit(kid)

    visit(root)
    return order


def put_body(root: str, target: Tree, known: Tree) -> dict:
    providers = []
    for rp in depth_first(target, root):
        provider = {"uuid": rp, **target[rp]}
        provider["generation"] = known[rp]["generation"] if rp in known else None
        providers.append(provider)
    return {"root": root, "providers": providers}


# Comparing a tree read back with the two it may be


def classify(seen: Tree, before: Tree, after: Tree) -> str | None:
    """ "before" or "after" when ``seen`` is exactly that tree, None for anything else."""
    if seen == before:
        return "before"
    if seen == after:
        return "after"
    return None


def describe_mix(seen: Tree, before: Tree, after: Tree) -> str:
    """Provider by provider, which of the two trees ``seen`` agrees with."""
    lines = []
    for rp in sorted(set(seen) | set(before) | set(after)):
        s, b, a = seen.get(rp), before.get(rp), after.get(rp)
        like = [side for side, other in (("before", b), ("after", a)) if s == other]
        if s is None:
            lines.append(f"  {rp}: absent, as {' and '.join(like) or 'in neither'}")
            continue
        if not like:
            like = [
                f"{side} but for {sorted(k for k in s if s[k] != other.get(k))}"
                for side, other in (("before", b), ("after", a))
                if other is not None
            ]
        lines.append(f"  {rp}: {' and '.join(like) or 'neither'}: {json.dumps(s, sort_keys=True)}")
    return "\n".join(lines)


# Reading the tree: the API and the tables


def call(
    base: str, method: str, path: str, body=None, timeout: float = 30, headers=HEADERS
) -> tuple[int, dict]:
    """One request on a connection of its own. Raises OSError or HTTPException when
    the connection breaks (the worker was killed)."""
    host, port = base.removeprefix("http://").split(":")
    connection = http.client.HTTPConnection(host, int(port), timeout=timeout)
    try:
        headers = dict(headers)
        data = None
        if body is not None:
            data = json.dumps(body).encode()
            headers["content-type"] = "application/json"
        connection.request(method, path, body=data, headers=headers)
        response = connection.getresponse()
        raw = response.read()
        try:
            parsed = json.loads(raw) if raw else {}
        except ValueError:
            parsed = {"raw": raw[:500].decode(errors="replace")}
        return response.status, parsed
    finally:
        connection.close()


def from_answer(body: dict) -> Tree:
    tree = {}
    for p in body["providers"]:
        tree[p["uuid"]] = {
            "name": p["name"],
            "parent_provider_uuid": p["parent_provider_uuid"],
            "generation": p["generation"],
            "inventories": {
                rc: {k: (float(v) if k == "allocation_ratio" else v) for k, v in inv.items()}
                for rc, inv in p["inventories"].items()
            },
            "traits": list(p["traits"]),
            "aggregates": list(p["aggregates"]),
        }
    return tree


def from_tables(engine: sa.Engine, root: str) -> Tree:
    """The tree under ``root`` as the tables hold it, read in one transaction."""
    rp, parent = tables.resource_providers, tables.resource_providers.alias("parent")
    root_row = tables.resource_providers.alias("root")
    inv, rc = tables.inventories, tables.resource_classes
    rpt, tr = tables.resource_provider_traits, tables.traits
    rpa, agg = tables.resource_provider_aggregates, tables.placement_aggregates
    with engine.connect() as conn:
        rows = conn.execute(
            sa.select(rp.c.id, rp.c.uuid, rp.c.name, rp.c.generation, parent.c.uuid.label("parent"))
            .join(root_row, root_row.c.id == rp.c.root_provider_id)
            .outerjoin(parent, parent.c.id == rp.c.parent_provider_id)
            .where(root_row.c.uuid == root)
        ).all()
        ids = {row.id: row.uuid for row in rows}
        tree = {
            row.uuid: {
                "name": row.name,
                "parent_provider_uuid": row.parent,
                "generation": row.generation,
                "inventories": {},
                "traits": [],
                "aggregates": [],
            }
            for row in rows
        }
        if not ids:
            return tree
        for row in conn.execute(
            sa.select(inv, rc.c.name.label("rc_name"))
            .join(rc, rc.c.id == inv.c.resource_class_id)
            .where(inv.c.resource_provider_id.in_(ids))
        ):
            tree[ids[row.resource_provider_id]]["inventories"][row.rc_name] = {
                "total": row.total,
                "reserved": row.reserved,
                "min_unit": row.min_unit,
                "max_unit": row.max_unit,
                "step_size": row.step_size,
                "allocation_ratio": float(row.allocation_ratio),
            }
        for provider_id, name in conn.execute(
            sa.select(rpt.c.resource_provider_id, tr.c.name)
            .join(tr, tr.c.id == rpt.c.trait_id)
            .where(rpt.c.resource_provider_id.in_(ids))
        ):
            tree[ids[provider_id]]["traits"].append(name)
        for provider_id, agg_uuid in conn.execute(
            sa.select(rpa.c.resource_provider_id, agg.c.uuid)
            .join(agg, agg.c.id == rpa.c.aggregate_id)
            .where(rpa.c.resource_provider_id.in_(ids))
        ):
            tree[ids[provider_id]]["aggregates"].append(agg_uuid)
    for provider in tree.values():
        provider["traits"].sort()
        provider["aggregates"].sort()
    return tree


# The server and its worker


def worker_pids(master: int) -> set[int]:
    """The processes whose parent is ``master``: gunicorn's workers."""
    found = set()
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as stat:
                fields = stat.read().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(fields[1]) == master and fields[0] != "Z":
            found.add(int(entry))
    return found


def answering(base: str) -> bool:
    with contextlib.suppress(OSError, http.client.HTTPException):
        return call(base, "GET", "/", timeout=5, headers={})[0] == 200
    return False


@contextlib.contextmanager
def started(tmp_path, connection: str):
    """``placement-svc serve --workers 1`` answering: (the master process, its base URL,
    its log file). It must exit 0 on SIGTERM at the end."""
    conf = write_conf(tmp_path, connection)
    port = free_port()
    argv = [*CLI, "serve", "--config-file", conf, "--bind", f"127.0.0.1:{port}", "--workers", "1"]
    log = tmp_path / "serve.log"
    with open(log, "w") as stderr:
        server = subprocess.Popen(
            argv, cwd=tmp_path, env=environment(tmp_path), stdout=subprocess.DEVNULL, stderr=stderr
        )
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 30
        while not answering(base):
            assert server.poll() is None, log.read_text()[-5000:]
            assert time.monotonic() < deadline, log.read_text()[-5000:]
            time.sleep(0.1)
        yield server, base, log
        server.terminate()
        assert server.wait(timeout=30) == 0, log.read_text()[-5000:]
    finally:
        if server.poll() is None:
            server.kill()
            server.wait()


# The client


@dataclass
class Run:
    names: Names
    base: str
    engine: sa.Engine
    known: Tree  # the tree as it is now, generations included
    variant: str = "a"  # the state ``known`` is in
    in_flight: threading.Event = field(default_factory=threading.Event)
    root_generation: int = 0  # the root's, before the PUT in flight
    stop: threading.Event = field(default_factory=threading.Event)
    puts: int = 0
    answered: int = 0  # PUTs answered 200
    interrupted: int = 0  # PUTs whose connection broke (their worker killed)
    resolved: dict[str, int] = field(default_factory=lambda: {"before": 0, "after": 0})
    durations: list[float] = field(default_factory=list)
    failures: list[str] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def fail(self, message: str) -> None:
        with self.lock:
            self.failures.append(message)

    def read_back(self) -> tuple[Tree, Tree]:
        """(GET's tree, the tables' tree), once the server answers again."""
        deadline = time.monotonic() + 30
        while True:
            try:
                status, body = call(self.base, "GET", f"/resource_provider_trees/{self.names.root}")
                break
            except (OSError, http.client.HTTPException):
                assert time.monotonic() < deadline, "the server did not come back"
                time.sleep(0.05)
        assert status == 200, body
        return from_answer(body), from_tables(self.engine, self.names.root)

    def put_once(self) -> None:
        """PUT the other state; check what it left, whatever happened to it."""
        other = "b" if self.variant == "a" else "a"
        target = state(other, self.names)
        before = self.known
        after = after_put(before, target)
        body = put_body(self.names.root, target, before)
        path = f"/resource_provider_trees/{self.names.root}"
        self.puts += 1
        began = time.monotonic()
        self.root_generation = before[self.names.root]["generation"]
        self.in_flight.set()
        try:
            status, answer = call(self.base, "PUT", path, body)
        except (OSError, http.client.HTTPException) as exc:
            self.in_flight.clear()
            self.interrupted += 1
            self.settle(before, after, other, f"PUT {self.puts} broke off ({exc!r})")
            return
        self.in_flight.clear()
        self.durations.append(time.monotonic() - began)
        if status != 200:
            self.fail(f"PUT {self.puts}: {status} {json.dumps(answer)[:1000]}")
            # Nothing may have been written: the tree must still be ``before``.
            self.settle(before, before, self.variant, f"PUT {self.puts} answered {status}")
            return
        self.answered += 1
        if from_answer(answer) != after:
            self.fail(
                f"PUT {self.puts}: the answer is not the tree after it:\n"
                + describe_mix(from_answer(answer), before, after)
            )
        in_tables = from_tables(self.engine, self.names.root)
        if in_tables != after:
            self.fail(
                f"PUT {self.puts} answered 200, the tables hold:\n"
                + describe_mix(in_tables, before, after)
            )
        self.known, self.variant = after, other

    def settle(self, before: Tree, after: Tree, other: str, what: str) -> None:
        seen_api, seen_db = self.read_back()
        verdict = classify(seen_db, before, after)
        if verdict is None:
            self.fail(f"{what}: the tables hold a mix:\n{describe_mix(seen_db, before, after)}")
        if seen_api != seen_db:
            self.fail(
                f"{what}: GET differs from the tables:\n{describe_mix(seen_api, seen_db, seen_db)}"
            )
        if verdict is None:
            self.stop.set()  # nothing sensible to PUT next
            return
        with self.lock:
            self.resolved[verdict] += 1
        if verdict == "after":
            self.known, self.variant = after, other
        else:
            self.known = before

    def run(self) -> None:
        try:
            while not self.stop.is_set():
                self.put_once()
        except Exception as exc:  # noqa: BLE001 - reported by the test
            self.fail(f"client: {exc!r}")
            self.stop.set()
        finally:
            self.in_flight.clear()


def first_put(run_: Run) -> None:
    """The tree in state "a", from nothing: every provider new, at generation 0."""
    target = state("a", run_.names)
    status, answer = call(
        run_.base,
        "PUT",
        f"/resource_provider_trees/{run_.names.root}",
        put_body(run_.names.root, target, {}),
    )
    assert status == 200, answer
    run_.known = after_put({}, target)
    assert from_answer(answer) == run_.known
    assert from_tables(run_.engine, run_.names.root) == run_.known


def kill_worker(master: int, base: str) -> int:
    """SIGKILL the worker; wait until the master has started another that answers.
    The seconds that took."""
    [worker] = worker_pids(master)
    began = time.monotonic()
    os.kill(worker, signal.SIGKILL)
    deadline = began + 30
    while True:
        workers = worker_pids(master)
        if workers and worker not in workers and answering(base):
            return time.monotonic() - began
        assert time.monotonic() < deadline, f"no new worker after killing {worker}: {workers}"
        time.sleep(0.02)


def put_in_flight(run_: Run, timeout: float = 30) -> bool:
    """Wait for the client's next PUT; False when the client stopped instead."""
    deadline = time.monotonic() + timeout
    while not run_.stop.is_set():
        if run_.in_flight.wait(timeout=0.1):
            return True
        assert time.monotonic() < deadline, "no PUT in flight"
    return False


def until_committed(run_: Run, limit: float) -> None:
    """Return as soon as the tables show the PUT in flight committed (the root's generation
    moved), or its answer came, or ``limit`` seconds passed: to kill its worker between its
    COMMIT and its answer."""
    root = tables.resource_providers
    query = sa.select(root.c.generation).where(root.c.uuid == run_.names.root)
    deadline = time.monotonic() + limit
    while run_.in_flight.is_set() and time.monotonic() < deadline:
        with run_.engine.connect() as conn:
            if conn.execute(query).scalar() != run_.root_generation:
                return


# The tests


def test_the_comparison_catches_a_mixed_tree():
    names = Names()
    before = after_put({}, state("a", names))
    after = after_put(before, state("b", names))
    assert classify(before, before, after) == "before"
    assert classify(after, before, after) == "after"

    # Every provider but child 0 changes; child 7 goes, child 8 comes.
    unchanged = names.children[0]
    assert after[unchanged]["generation"] == before[unchanged]["generation"] == 0
    assert all(after[rp]["generation"] == 1 for rp in before if rp in after and rp != unchanged)
    assert names.children[7] not in after and after[names.children[8]]["generation"] == 0

    # One provider of the other state.
    mixed = dict(before)
    mixed[names.children[3]] = after[names.children[3]]
    assert classify(mixed, before, after) is None
    assert "after" in describe_mix(mixed, before, after)
    # The new child created, the old one not deleted.
    assert classify({**after, names.children[7]: before[names.children[7]]}, before, after) is None
    # The old child deleted, nothing else done.
    partial = {rp: p for rp, p in before.items() if rp != names.children[7]}
    assert classify(partial, before, after) is None
    # The contents after, a generation before.
    stale = {rp: dict(p) for rp, p in after.items()}
    stale[names.root]["generation"] -= 1
    assert classify(stale, before, after) is None
    # One trait of the other state.
    one_trait = {rp: dict(p) for rp, p in before.items()}
    one_trait[names.children[2]]["traits"] = after[names.children[2]]["traits"]
    assert classify(one_trait, before, after) is None
    # An inventory of the other state.
    one_class = {rp: dict(p) for rp, p in after.items()}
    one_class[names.root]["inventories"] = before[names.root]["inventories"]
    assert classify(one_class, before, after) is None

    # The body a PUT sends: parents first, generations of what exists.
    body = put_body(names.root, state("b", names), before)
    order = [p["uuid"] for p in body["providers"]]
    assert order[0] == names.root
    for p in body["providers"]:
        if p["parent_provider_uuid"] is not None:
            assert order.index(p["parent_provider_uuid"]) < order.index(p["uuid"])
    assert (
        next(p for p in body["providers"] if p["uuid"] == names.children[8])["generation"] is None
    )


def test_a_tree_put_is_all_or_nothing_when_its_worker_is_killed(backend, test_db, tmp_path):
    rng = random.Random(49)
    names = Names()
    with started(tmp_path, test_db.url) as (server, base, log):
        run_ = Run(names, base, test_db.engine, known={})
        first_put(run_)
        # A few PUTs undisturbed: how long one takes, for the moments to kill at.
        for _ in range(4):
            run_.put_once()
        assert not run_.failures, run_.failures
        window = statistics.median(run_.durations)

        client = threading.Thread(target=run_.run, daemon=True)
        client.start()
        respawns = []
        try:
            for kill in range(KILLS):
                if not put_in_flight(run_):
                    break  # the client stopped: its failures say why
                if kill % 3 == 2:
                    until_committed(run_, 3 * window)  # right after its COMMIT
                else:
                    time.sleep(rng.uniform(0, 1.2 * window))  # anywhere in it
                respawns.append(kill_worker(server.pid, base))
                time.sleep(rng.uniform(0, 0.1))
        finally:
            run_.stop.set()
            client.join(timeout=60)
        assert not client.is_alive(), "the client did not stop"

        final_api, final_db = run_.read_back()
        text = log.read_text()

    figures = {
        "backend": backend,
        "kills": len(respawns),
        "puts": run_.puts,
        "answered_200": run_.answered,
        "interrupted": run_.interrupted,
        "interrupted_then_found": run_.resolved,
        "put_median_ms": round(1000 * window, 1),
        "respawn_max_s": round(max(respawns, default=0), 2),
    }
    print(f"\ntree crash figures: {json.dumps(figures)}")
    assert not run_.failures, "\n".join(run_.failures[:5]) + f"\n{figures}"
    assert len(respawns) == KILLS, figures
    assert text.count("Booting worker") == KILLS + 1, figures
    # Most kills land while a PUT is in flight (the others just after it answered).
    assert run_.interrupted >= KILLS // 3, figures
    assert final_db == final_api == run_.known, describe_mix(final_db, run_.known, run_.known)
    # What was read back is in the order the spec gives: parents first, siblings by name.
    assert list(final_api) == depth_first(run_.known, names.root)
