"""The brute-force check of tests/unit/test_candidates_merge.py, extended to
root_member_of (1.40) and to group_policy left out (1.41), on random worlds.

isolate= and same_subtree with negated groups (1.42, 1.43) have their own
random checks in test_candidates_merge.py and test_candidates_prune.py.

root_member_of: the walk, on the trees ``eligibility.anchors`` keeps, finds
exactly what brute force finds on the trees an independent reading of the
rule keeps (every ``in:`` set meets the root's aggregates, no forbidden one
is among them). Sharing providers keep serving every tree they share with,
whatever their own aggregates. group_policy left out at 1.41 answers what
group_policy=none answers.
"""

from __future__ import annotations

import random
from collections import Counter

from microversion_parse import Version

from placement_svc.candidates import eligibility, merge
from tests.unit.test_candidates_merge import (
    ask,
    brute_force,
    normalised,
    random_query,
    random_world,
)

AGGREGATES = [f"aaaaaaaa-0000-4000-8000-00000000000{n}" for n in range(1, 4)]
ROOT_MEMBER_OF = Version(1, 40)
OPTIONAL_GROUP_POLICY = Version(1, 41)


def random_root_member_of(rng: random.Random) -> list[str]:
    """One to two root_member_of values in any of member_of's forms."""
    values = []
    for _ in range(rng.randint(1, 2)):
        pick = rng.sample(AGGREGATES, rng.randint(1, 2))
        values.append(
            rng.choice([pick[0], "in:" + ",".join(pick), "!" + pick[0], "!in:" + ",".join(pick)])
        )
    return values


def root_is_in(held: frozenset[str], values: list[str]) -> bool:
    """The rule read straight from the values, apart from the parser."""
    for value in values:
        negated = value.startswith("!")
        body = value[1:] if negated else value
        named = set(body[3:].split(",")) if body.startswith("in:") else {body}
        if negated and named & held:
            return False
        if not negated and not named & held:
            return False
    return True


def test_root_member_of_keeps_exactly_the_trees_whose_root_is_in_the_aggregates():
    rng = random.Random(40)
    compared = nonempty = filtered = 0
    for _ in range(300):
        world = random_world(rng)
        qs, version = random_query(rng)
        if version < Version(1, 29):  # root_member_of comes after nested candidates
            continue
        values = random_root_member_of(rng)
        qs += "".join(f"&root_member_of={v}" for v in values)
        try:
            req = ask(qs, ROOT_MEMBER_OF)
        except Exception:  # a combination parse refuses
            continue
        found = world.offer(req)
        every_root = list(found.roots)
        found.aggregates = {
            root: frozenset(rng.sample(AGGREGATES, rng.randint(0, 2))) for root in every_root
        }
        found.roots = [r for r in every_root if root_is_in(found.aggregates[r], values)]
        expected = brute_force(req, found)
        found.roots = eligibility.anchors(found, req)
        for strategy in ("depth-first", "breadth-first"):
            walked = Counter(normalised(c) for c in merge.generate(req, found, strategy))
            assert walked == Counter(expected), (qs, found.aggregates)
        compared += 1
        nonempty += bool(expected)
        filtered += len(found.roots) < len(every_root)
    assert compared > 150 and nonempty > 40 and filtered > 50


def test_group_policy_left_out_at_1_41_answers_what_none_answers():
    rng = random.Random(41)
    compared = 0
    for _ in range(300):
        world = random_world(rng)
        qs, version = random_query(rng)
        if version < Version(1, 29) or "group_policy=none" not in qs:
            continue
        without = qs.replace("&group_policy=none", "")
        try:
            with_none = ask(qs, OPTIONAL_GROUP_POLICY)
            left_out = ask(without, OPTIONAL_GROUP_POLICY)
        except Exception:
            continue
        found = world.offer(with_none)
        expected = [normalised(c) for c in merge.generate(with_none, found)]
        assert [normalised(c) for c in merge.generate(left_out, found)] == expected, without
        compared += 1
    assert compared > 80
