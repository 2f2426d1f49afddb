"""Whether an answer searched nested trees (the metrics' ``trees`` label):
worked out from the Found, once per kept world when it searched them all."""

from __future__ import annotations

from placement_svc.candidates import find, world
from placement_svc.candidates.model import Found, Provider


def providers(*pairs: tuple[int, int | None]) -> dict[int, Provider]:
    return {
        pid: Provider(pid, f"u-{pid}", parent, parent if parent else pid) for pid, parent in pairs
    }


def test_a_found_built_by_hand_is_nested_when_a_provider_has_a_parent():
    assert find._nested(Found(providers=providers((1, None), (2, None)))) is False
    assert find._nested(Found(providers=providers((1, None), (2, 1)))) is True


def test_a_tree_of_several_providers_is_nested():
    assert find._nested(Found(members={1: [1], 3: [3]})) is False
    assert find._nested(Found(members={1: [1], 3: [3, 4]})) is True


def test_a_search_of_the_whole_world_asks_it_once_per_world():
    shape = world.World(generation=1, members={1: [1], 3: [3, 4]})
    whole = Found(members=shape.members, world=shape)
    assert find._nested(whole) is True
    assert shape._memo["nested"] is True
    shape._memo["nested"] = False  # what the world remembered is the answer
    assert find._nested(whole) is False
    # A window of the world's trees is worked out each time.
    window = Found(members={3: [3, 4]}, world=shape)
    assert find._nested(window) is True
