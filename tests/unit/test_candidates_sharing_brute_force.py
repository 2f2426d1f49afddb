"""Sharing providers under member_of and in_tree, eligibility and the walk
together, against brute force on random worlds.

test_candidates_merge.py checks the walk against brute force on options
given by hand; this checks what eligibility.py makes of aggregates and
in_tree for sharing providers as well, per provider *and* anchor tree, the
way upstream judges them (each rule read straight from the request, apart
from eligibility.py):

- a sharing provider serves the unsuffixed group in its own tree as every
  provider of that tree does: in_tree, member_of met by its own aggregates
  or by its root's, neither in a forbidden aggregate;
- it serves another tree it shares with only without in_tree on the group,
  with member_of met by its own aggregates, and with neither it nor that
  tree's root in a forbidden aggregate;
- a granular group's provider meets member_of itself, and if it shares,
  serves every tree it shares with.

The worlds have the shapes that once answered differently from upstream:
sharing providers that are nested in a tree (issue 26: a child that shares
kept counting only its own aggregates), in_tree naming a sharing provider
while another tree anchors the candidate, and nested trees plus sharing
providers before 1.29, where a candidate takes one provider per tree.
"""

from __future__ import annotations

import dataclasses
import random
from collections import Counter

from microversion_parse import Version

from placement_svc.candidates import eligibility, merge, rooms
from placement_svc.candidates.model import Found, Provider, Room
from tests.unit.test_candidates_merge import ask, brute_force, normalised

SHARING = "MISC_SHARES_VIA_AGGREGATE"
AGGREGATES = [f"aaaaaaaa-0000-4000-8000-00000000000{n}" for n in range(1, 5)]
CLASSES = ("VCPU", "DISK_GB")


def uuid_of(pid: int) -> str:
    return f"00000000-0000-4000-8000-{pid:012d}"


def random_found(rng: random.Random) -> Found:
    """One to three trees of up to four providers, one or two sharing
    providers (a root, or a child somewhere in a tree), aggregates on every
    kind of provider; each sharing provider shares with the trees of every
    provider in one of its aggregates."""
    found = Found()

    def add(parent: int | None, room: dict[str, int], traits=()) -> int:
        pid = len(found.providers) + 1
        root = pid if parent is None else found.providers[parent].root_id
        found.providers[pid] = Provider(pid, uuid_of(pid), parent, root)
        found.traits[pid] = frozenset(traits)
        found.aggregates[pid] = frozenset(rng.sample(AGGREGATES, rng.choice([0, 0, 1, 2])))
        for rc, free in room.items():
            found.room[(pid, rc)] = Room(free, 1, rng.choice([free, 2]), 1)
        return pid

    def room() -> dict[str, int]:
        return {rc: rng.randint(1, 4) for rc in CLASSES if rng.random() < 0.5}

    trees = []
    for _ in range(rng.randint(1, 3)):
        members = [add(None, room(), rng.sample(["CUSTOM_A"], rng.randint(0, 1)))]
        for _ in range(rng.randint(0, 3)):
            members.append(add(rng.choice(members), room()))
        trees.append(members)
    for _ in range(rng.randint(1, 2)):
        parent = rng.choice([None, rng.choice(rng.choice(trees))])
        traits = [SHARING, *rng.sample(["CUSTOM_A"], rng.randint(0, 1))]
        pid = add(parent, {"DISK_GB": rng.randint(1, 4)}, traits)
        found.aggregates[pid] = frozenset(rng.sample(AGGREGATES, rng.randint(1, 2)))
        found.sharing.add(pid)
    for pid in found.sharing:
        mine = found.aggregates[pid]
        found.shares_with[pid] = {found.providers[pid].root_id} | {
            p.root_id for q, p in found.providers.items() if found.aggregates[q] & mine
        }
    for (pid, rc), _room in sorted(found.room.items()):
        found.with_room.setdefault(rc, []).append(pid)
    found.roots = sorted({p.root_id for p in found.providers.values()})
    return found


def random_query(
    rng: random.Random, found: Found, like: random.Random | None = None
) -> tuple[str, Version]:
    """Groups with resources, forbidden traits, member_of (any-of, repeated,
    forbidden) and in_tree (of any provider, sharing ones included), at
    1.39 or, before nested candidates, 1.28."""
    nested = rng.random() < 0.7
    # Aggregates of the sharing providers' roots, and not theirs: forbidding
    # one keeps a sharing provider from its own tree alone.
    roots_only = sorted(
        {
            agg
            for pid in found.sharing
            for agg in found.aggregates[found.providers[pid].root_id] - found.aggregates[pid]
        }
    )

    def rules(suffix: str) -> list[str]:
        parts = []
        if rng.random() < 0.6:
            for _ in range(rng.randint(1, 2)):
                pick = rng.sample(AGGREGATES, rng.randint(1, 2))
                forms = [pick[0], "in:" + ",".join(pick)]
                if nested:
                    forbidden = rng.choice(roots_only) if roots_only else pick[0]
                    forms += ["!" + pick[0], "!" + forbidden]
                parts.append(f"member_of{suffix}={rng.choice(forms)}")
        if nested and rng.random() < 0.3:  # in_tree and !aggregates come after 1.29
            parts.append(f"in_tree{suffix}={uuid_of(rng.choice(list(found.providers)))}")
        if rng.random() < 0.2:
            parts.append(f"required{suffix}=!CUSTOM_A")
        return parts

    parts = []
    if rng.random() < 0.8:
        classes = rng.sample(CLASSES, rng.randint(1, 2))
        parts.append("resources=" + ",".join(f"{rc}:{rng.randint(1, 2)}" for rc in classes))
        parts += rules("")
    first: list[str] = []
    for n in range(1, rng.randint(1 if parts else 2, 3)):
        asked = [f"resources{n}={rng.choice(CLASSES)}:{rng.randint(1, 2)}", *rules(str(n))]
        if first and like is not None and like.random() < 0.3:
            # A like group: the first's ask under another suffix (drawn
            # apart, so the worlds and other queries are those of the seed).
            asked = [part.replace("1=", f"{n}=", 1) for part in first]
        first = first or asked
        parts += asked
    parts.append("group_policy=" + rng.choice(["none", "isolate"]))
    return "&".join(parts), Version(1, 39) if nested else Version(1, 28)


def allowed(member_of, holders) -> bool:
    """Read straight from the parsed filter: one holder has an aggregate of
    every any-of list; no holder has a forbidden one."""
    meets = any(all(held & one for one in member_of.any_of) for held in holders)
    return (meets or not member_of.any_of) and not any(
        held & member_of.forbidden for held in holders
    )


def serves(found: Found, group, pid: int, anchor: int) -> bool:
    """Whether ``pid`` may serve ``group`` in a candidate anchored at
    ``anchor``, room aside: upstream's rules per provider and anchor."""
    provider = found.providers[pid]
    aggregates = found.aggregates
    if found.traits[pid] & group.required.forbidden:
        return False
    tree = None
    if group.in_tree is not None:
        named = [p for p in found.providers.values() if p.uuid == group.in_tree]
        tree = named[0].root_id if named else -1
    home = provider.root_id == anchor
    if not home and not (pid in found.sharing and anchor in found.shares_with[pid]):
        return False
    mine = aggregates[pid]
    if group.same_provider:
        return (tree is None or provider.root_id == tree) and allowed(group.member_of, [mine])
    if home:
        root = aggregates[provider.root_id]
        return (tree is None or provider.root_id == tree) and allowed(group.member_of, [mine, root])
    return (
        tree is None
        and allowed(group.member_of, [mine])
        and not (aggregates[anchor] & group.member_of.forbidden)
    )


def expected(req, found: Found) -> set:
    """Per anchor tree, the options that may serve there (room, then
    ``serves``), handed to test_candidates_merge's brute force of the walk's
    rules for that tree alone; the union of the trees' candidates."""
    keys = set()
    for anchor in found.roots:
        options = {}
        for suffix, group in req.groups.items():

            def fits(pid, rc, amount):
                room = found.room.get((pid, rc))
                return room is not None and room.fits(amount)

            ok = [p for p in sorted(found.providers) if serves(found, group, p, anchor)]
            if group.same_provider:
                options[suffix] = {
                    None: [
                        p for p in ok if all(fits(p, rc, a) for rc, a in group.resources.items())
                    ]
                }
            else:
                options[suffix] = {
                    rc: [p for p in ok if fits(p, rc, a)] for rc, a in group.resources.items()
                }
        keys |= brute_force(req, dataclasses.replace(found, options=options, roots=[anchor]))
    return keys


def test_the_walk_on_eligibility_finds_what_brute_force_finds_per_anchor():
    rng, like = random.Random(26), random.Random(2611)
    compared = nonempty = nested_sharing = in_tree_sharing = before_nested = 0
    narrowed = away_only = hopeless = likes = 0
    for _ in range(1500):
        found = random_found(rng)
        qs, version = random_query(rng, found, like)
        req = ask(qs, version)
        likes += len({g.asks() for g in req.groups.values()}) < len(req.groups)
        found.options, found.reach = {}, {}
        eligibility.apply(found, req)
        want = expected(req, found)
        for strategy in ("depth-first", "breadth-first"):
            walked = Counter(normalised(c) for c in merge.generate(req, found, strategy))
            assert walked == Counter(want), (qs, version, found)
        compared += 1
        nonempty += bool(want)
        # rooms.hopeless (the answer's search skips the rules of such a Found):
        # a class no provider has room for at its smallest amount (as
        # rooms.of_world weighs it: capacity and max_unit), no candidate.
        smallest: dict[str, int] = {}
        for group in req.groups.values():
            for rc, amount in group.resources.items():
                smallest[rc] = min(amount, smallest.get(rc, amount))
        holders = {
            rc: [
                p
                for (p, held), r in sorted(found.room.items())
                if held == rc and r.free >= a and r.max_unit >= a
            ]
            for rc, a in smallest.items()
        }
        weighed = dataclasses.replace(found, with_room={rc: p for rc, p in holders.items() if p})
        if rooms.hopeless(weighed, req):
            assert not want, (qs, version, found)
            hopeless += 1
        used = {p for key in want for p, _r in key[0]}
        nested_sharing += any(
            found.providers[p].parent_id is not None for p in used & found.sharing
        )
        named = {uuid_of(p) for p in found.sharing}
        in_tree_sharing += any(g.in_tree in named for g in req.groups.values()) and bool(want)
        before_nested += version < Version(1, 29) and bool(used & found.sharing)
        reach = [(p, trees) for by_pid in found.reach.values() for p, trees in by_pid.items()]
        narrowed += any(trees != found.shares_with[p] for p, trees in reach)
        # kept from its own tree, serving another: its root in a forbidden aggregate
        away_only += any(trees and found.providers[p].root_id not in trees for p, trees in reach)
    assert compared == 1500 and nonempty > 400 and hopeless > 50, (compared, nonempty, hopeless)
    assert nested_sharing > 50 and in_tree_sharing > 20, (nested_sharing, in_tree_sharing)
    assert before_nested > 30 and narrowed > 40 and away_only > 10, (
        before_nested,
        narrowed,
        away_only,
    )
    # Like groups (one ask under two suffixes) share their options
    # (eligibility.apply): the walk on those is checked too.
    assert likes > 100, likes


def test_the_three_shapes_of_issue_26():
    """The repros, on hand-built data: the brute force and the walk agree
    with upstream's answers (gabbits/candidates-sharing-and-trees.yaml has
    them over HTTP)."""
    # 1. A nested provider that shares still counts its root's aggregates.
    found = Found()
    found.providers = {1: Provider(1, uuid_of(1), None, 1), 2: Provider(2, uuid_of(2), 1, 1)}
    found.traits = {1: frozenset(), 2: frozenset([SHARING])}
    found.aggregates = {1: frozenset(AGGREGATES[:1]), 2: frozenset()}
    found.room = {(2, "VGPU"): Room(4, 1, 4, 1)}
    found.with_room = {"VGPU": [2]}
    found.sharing, found.shares_with, found.roots = {2}, {2: {1}}, [1]
    req = ask(f"resources=VGPU:1&member_of={AGGREGATES[0]}", Version(1, 34))
    eligibility.apply(found, req)
    assert [c.allocations for c in merge.generate(req, found)] == [{2: {"VGPU": 1}}]
    # 2. in_tree naming a sharing provider keeps the unsuffixed group in its
    # tree: r3 (1) cannot anchor it.
    found = Found()
    found.providers = {1: Provider(1, uuid_of(1), None, 1), 2: Provider(2, uuid_of(2), None, 2)}
    found.traits = {1: frozenset(), 2: frozenset([SHARING])}
    found.aggregates = {1: frozenset(AGGREGATES[:1]), 2: frozenset(AGGREGATES[:2])}
    found.room = {(1, "DISK_GB"): Room(100, 1, 100, 1), (2, "VGPU"): Room(4, 1, 4, 1)}
    found.with_room = {"DISK_GB": [1], "VGPU": [2]}
    found.sharing, found.shares_with, found.roots = {2}, {2: {1, 2}}, [1, 2]
    req = ask(f"resourcesA=DISK_GB:40&in_tree={uuid_of(2)}&resources=VGPU:1", Version(1, 36))
    eligibility.apply(found, req)
    assert found.reach == {"": {2: frozenset({2})}}
    assert list(merge.generate(req, found)) == []
    assert expected(req, found) == set()
    # 3. Before 1.29, a nested tree and a sharing provider: the child serves
    # MEMORY_MB, the sharing provider both DISK_GB groups (see the gabbi
    # file: upstream's answer there depends on the order the providers
    # were created in).
    found = Found()
    found.providers = {
        1: Provider(1, uuid_of(1), None, 1),
        2: Provider(2, uuid_of(2), 1, 1),
        3: Provider(3, uuid_of(3), None, 3),
    }
    found.traits = {1: frozenset(), 2: frozenset(), 3: frozenset([SHARING])}
    found.aggregates = {1: frozenset(AGGREGATES[:1]), 2: frozenset(), 3: frozenset(AGGREGATES[:1])}
    found.room = {(2, "MEMORY_MB"): Room(512, 1, 512, 1), (3, "DISK_GB"): Room(100, 1, 100, 1)}
    found.with_room = {"MEMORY_MB": [2], "DISK_GB": [3]}
    found.sharing, found.shares_with, found.roots = {3}, {3: {1, 3}}, [1, 3]
    qs = "resources=DISK_GB:48&resources4=MEMORY_MB:512&resources1=DISK_GB:1&group_policy=none"
    req = ask(qs, Version(1, 25))
    eligibility.apply(found, req)
    walked = [c.allocations for c in merge.generate(req, found)]
    assert walked == [{3: {"DISK_GB": 49}, 2: {"MEMORY_MB": 512}}]
    assert {normalised(c) for c in merge.generate(req, found)} == expected(req, found)
