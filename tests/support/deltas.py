"""The plan of 100 allocation deltas on one consumer that the concurrency
tests send from 8 clients at once (tests/functional/
test_allocation_deltas_concurrency.py on each backend, tests/galera/
test_allocation_deltas.py on the cluster), and what the consumer holds once
every one applied, whatever their order."""

from __future__ import annotations

import collections
import random

INITIAL = {  # provider index -> class -> amount, given by the PUT
    0: {"VCPU": 50, "MEMORY_MB": 5000},
    1: {"VCPU": 50, "MEMORY_MB": 5000},
}
# (count, add, remove), each {provider index: {class: amount}}. Per provider and class
# the removes add up to less than INITIAL: never below zero, whatever the order.
PLAN = [
    (20, {0: {"VCPU": 1}}, {}),
    (20, {}, {0: {"VCPU": 1}}),
    (15, {1: {"MEMORY_MB": 256}}, {}),
    (15, {}, {1: {"MEMORY_MB": 128}}),
    (10, {2: {"VCPU": 2}}, {}),  # provider 2 has nothing until these
    (10, {0: {"MEMORY_MB": 64}}, {1: {"VCPU": 1}}),
    (10, {2: {"MEMORY_MB": 32}}, {0: {"MEMORY_MB": 16}}),
]
PATCHES = sum(count for count, _add, _remove in PLAN)


def named(amounts: dict[int, dict[str, int]], providers: list[str]) -> dict:
    """{provider index: amounts} as a body's {provider uuid: {"resources": amounts}}."""
    return {providers[i]: {"resources": dict(res)} for i, res in amounts.items()}


def expected_holdings(providers: list[str]) -> dict[str, dict[str, int]]:
    """What the consumer holds once the PUT and every PATCH of PLAN applied."""
    held: dict[str, collections.Counter] = collections.defaultdict(collections.Counter)
    for i, res in INITIAL.items():
        held[providers[i]].update(res)
    for count, add, remove in PLAN:
        for _ in range(count):
            for i, res in add.items():
                held[providers[i]].update(res)
            for i, res in remove.items():
                held[providers[i]].subtract(res)
    return {rp: {rc: n for rc, n in res.items() if n} for rp, res in held.items()}


def patch_bodies(providers: list[str], seed: int) -> list[dict]:
    """The PATCH bodies of PLAN, shuffled by ``seed``."""
    bodies = []
    for count, add, remove in PLAN:
        body = {}
        if add:
            body["add"] = named(add, providers)
        if remove:
            body["remove"] = named(remove, providers)
        bodies += [body] * count
    random.Random(seed).shuffle(bodies)
    return bodies
