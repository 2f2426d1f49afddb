"""candidates.subtree on a hand-built tree: the subtree root of a set of
providers (same_subtree holds exactly when there is one) and whether a
negated group's provider keeps out of it (same_subtree=_P,!_N, 1.43).

    HOST
    +-- NUMA0 -- FPGA0
    +-- NUMA1 -- FPGA1
"""

from __future__ import annotations

from typing import NamedTuple

from placement_svc.candidates import subtree
from placement_svc.candidates.model import Found, Provider

HOST, NUMA0, NUMA1, FPGA0, FPGA1 = range(1, 6)
PARENT = {HOST: None, NUMA0: HOST, NUMA1: HOST, FPGA0: NUMA0, FPGA1: NUMA1}


def tree() -> Found:
    found = Found()
    for pid, parent in PARENT.items():
        found.providers[pid] = Provider(pid, f"uuid-{pid}", parent, HOST)
    return found


class Slot(NamedTuple):
    suffix: str


def test_the_root_is_the_member_above_all_the_others():
    assert subtree.root(tree(), {NUMA0, FPGA0}) == NUMA0
    assert subtree.root(tree(), {HOST, FPGA1}) == HOST
    assert subtree.root(tree(), {FPGA0}) == FPGA0


def test_members_on_two_branches_have_no_root_among_them():
    assert subtree.root(tree(), {FPGA0, FPGA1}) is None
    assert subtree.root(tree(), {NUMA0, NUMA1}) is None


def test_a_negated_group_may_sit_on_another_branch_or_above_but_not_below():
    slots = [Slot("_CPU"), Slot("_FPGA")]
    positive = frozenset({"_CPU"})

    def apart(cpu: int, fpga: int) -> bool:
        return subtree.apart(tree(), slots, [cpu, fpga], positive, "_FPGA")

    assert apart(NUMA0, FPGA1)  # another branch
    assert apart(NUMA0, HOST)  # an ancestor of the root
    assert not apart(NUMA0, FPGA0)  # below the root
    assert not apart(NUMA0, NUMA0)  # the root itself


def test_without_a_root_the_negated_rule_fails_too():
    slots = [Slot("_A"), Slot("_B"), Slot("_N")]
    assert not subtree.apart(tree(), slots, [FPGA0, FPGA1, HOST], frozenset({"_A", "_B"}), "_N")
