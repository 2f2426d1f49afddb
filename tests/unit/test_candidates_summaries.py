"""Which providers the summaries of GET /allocation_candidates hold, on
hand-built data: render.summary_providers and merge.choose.

Before 1.29 the summaries are the providers the candidates name, except when
``limit`` cut the answer: then upstream keeps every provider the whole answer
names whose root is the root of a provider of a kept candidate. From 1.29 they
are every provider of the kept candidates' trees.
"""

from __future__ import annotations

import random

from microversion_parse import Version

from placement_svc.candidates import merge, render
from placement_svc.candidates.merge import Candidate
from placement_svc.candidates.model import Found, Provider

BEFORE_NESTED = Version(1, 28)
NESTED = Version(1, 29)

# R1 with child C1; R2 (nothing of its own) with children A and B; S alone.
R1, C1, R2, A, B, S = range(1, 7)
ROOT = {R1: R1, C1: R1, R2: R2, A: R2, B: R2, S: S}


def found() -> Found:
    data = Found()
    for pid, root in ROOT.items():
        parent = None if pid == root else root
        data.providers[pid] = Provider(pid, f"uuid-{pid}", parent, root)
    return data


def on(*pids) -> Candidate:
    return Candidate({pid: {"VCPU": 1} for pid in pids}, {"": tuple(pids)})


WHOLE = [on(R1), on(C1), on(A), on(B), on(S)]


def test_before_1_29_without_a_cut_the_named_providers():
    assert render.summary_providers(found(), WHOLE[:2], BEFORE_NESTED) == {R1, C1}


def test_before_1_29_a_cut_keeps_the_whole_answers_providers_of_the_kept_roots():
    assert render.summary_providers(found(), [on(R1)], BEFORE_NESTED, WHOLE) == {R1, C1}
    assert render.summary_providers(found(), [on(A)], BEFORE_NESTED, WHOLE) == {A, B}


def test_before_1_29_a_root_no_candidate_names_is_left_out():
    """R2 serves nothing: it is in no candidate of the whole answer."""
    chosen = [on(A), on(S)]
    assert render.summary_providers(found(), chosen, BEFORE_NESTED, WHOLE) == {A, B, S}


def test_before_1_29_a_provider_of_a_dropped_tree_is_left_out():
    assert render.summary_providers(found(), [on(S)], BEFORE_NESTED, WHOLE) == {S}


def test_from_1_29_every_provider_of_the_kept_trees():
    assert render.summary_providers(found(), [on(A)], NESTED) == {R2, A, B}
    assert render.summary_providers(found(), [on(R1), on(S)], NESTED) == {R1, C1, S}


def test_choose_keeps_the_whole_answer_only_when_the_limit_cuts_it():
    chosen, whole = merge.choose(iter(WHOLE), 2, None, keep_whole=True)
    assert (chosen, whole) == (WHOLE[:2], WHOLE)
    chosen, whole = merge.choose(iter(WHOLE), 5, None, keep_whole=True)
    assert (chosen, whole) == (WHOLE, None)
    chosen, whole = merge.choose(iter(WHOLE), None, None, keep_whole=True)
    assert (chosen, whole) == (WHOLE, None)


def test_choose_without_keep_whole_stops_at_the_limit():
    pulled = []

    def stream():
        for candidate in WHOLE:
            pulled.append(candidate)
            yield candidate

    chosen, whole = merge.choose(stream(), 2, None)
    assert (chosen, whole, len(pulled)) == (WHOLE[:2], None, 2)


def test_choose_caps_the_whole_answer_at_max_allocation_candidates():
    chosen, whole = merge.choose(iter(WHOLE), 1, 3, keep_whole=True)
    assert (chosen, whole) == (WHOLE[:1], WHOLE[:3])


def test_choose_samples_as_take_does():
    for seed in range(20):
        expected = merge.take(iter(WHOLE), 2, None, random.Random(seed))
        chosen, whole = merge.choose(iter(WHOLE), 2, None, random.Random(seed), keep_whole=True)
        assert (chosen, whole) == (expected, WHOLE)
