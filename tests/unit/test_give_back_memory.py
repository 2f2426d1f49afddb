"""runtime.give_back_memory: after an answer, a serve worker that holds much
more memory than after its first answer collects and trims (issue 28,
item 3: a worker's memory returns after a large answer)."""

from __future__ import annotations

import os

import pytest

from placement_svc.cmd import runtime

MB = 1024 * 1024


@pytest.fixture
def process(monkeypatch):
    state = {"resident": 100 * MB, "trims": 0, "collections": 0}
    monkeypatch.setattr(runtime, "_settled", None)
    monkeypatch.setattr(runtime, "_resident", lambda: state["resident"])

    def trim(_pad):
        state["trims"] += 1

    def collect():
        state["collections"] += 1

    monkeypatch.setattr(runtime, "_trim", trim)
    monkeypatch.setattr(runtime.gc, "collect", collect)
    return state


def test_the_first_answer_sets_the_mark_and_small_growth_is_left_alone(process):
    runtime.give_back_memory()  # the first answer: what a settled worker holds
    process["resident"] += 30 * MB
    runtime.give_back_memory()
    assert (process["trims"], process["collections"]) == (0, 0)


def test_growth_past_the_mark_is_collected_and_trimmed(process):
    runtime.give_back_memory()
    process["resident"] += runtime.GIVE_BACK_ABOVE + MB
    runtime.give_back_memory()
    assert (process["trims"], process["collections"]) == (1, 1)


def test_what_is_still_held_after_giving_back_is_the_new_mark(process):
    runtime.give_back_memory()
    process["resident"] += runtime.GIVE_BACK_ABOVE + 10 * MB  # a large cloud's shape, kept
    runtime.give_back_memory()
    assert (process["trims"], process["collections"]) == (1, 1)
    for _ in range(5):  # the answers after it hold as much: nothing to give back
        runtime.give_back_memory()
    assert (process["trims"], process["collections"]) == (1, 1)
    process["resident"] += runtime.GIVE_BACK_ABOVE + MB  # grown past the new mark
    runtime.give_back_memory()
    assert (process["trims"], process["collections"]) == (2, 2)


def test_a_mark_does_not_come_down_when_giving_back_frees_more(process, monkeypatch):
    runtime.give_back_memory()
    process["resident"] += runtime.GIVE_BACK_ABOVE + MB
    state = process

    def trim(_pad):
        state["trims"] += 1
        state["resident"] = 90 * MB  # below the first mark

    monkeypatch.setattr(runtime, "_trim", trim)
    runtime.give_back_memory()
    assert runtime._settled == 100 * MB


def test_without_proc_nothing_is_done(process, monkeypatch):
    monkeypatch.setattr(runtime, "_resident", lambda: None)
    runtime.give_back_memory()
    runtime.give_back_memory()
    assert (process["trims"], process["collections"]) == (0, 0)


def test_this_process_can_measure_and_trim():
    assert runtime._resident() > 10 * MB  # Linux: /proc/self/statm
    assert runtime._trim is not None  # glibc: malloc_trim


@pytest.mark.skipif(not os.path.exists("/proc/self/statm"), reason="Linux's /proc")
def test_the_resident_size_is_read_again_each_time_and_by_each_process():
    """The kept descriptor reads the size as it is now, and a forked child
    reads its own, not the parent's (the descriptor is the opener's)."""
    before = runtime._resident()
    grown = bytearray(64 * MB)
    grown[:: os.sysconf("SC_PAGE_SIZE")] = b"x" * len(grown[:: os.sysconf("SC_PAGE_SIZE")])
    after = runtime._resident()
    assert after - before >= 60 * MB
    reader, writer = os.pipe()
    child = os.fork()
    if child == 0:  # pragma: no cover - the child's answer goes through the pipe
        os.close(reader)
        del grown
        mine = runtime._resident()
        os.write(writer, f"{runtime._statm[0] == os.getpid()} {mine}".encode())
        os._exit(0)
    os.close(writer)
    os.waitpid(child, 0)
    own, seen = os.read(reader, 100).decode().split()
    os.close(reader)
    assert own == "True"
    assert int(seen) > 0
    assert runtime._statm[0] == os.getpid()  # the parent's own, still
