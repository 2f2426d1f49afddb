"""Plain data the search loads and the rules, the merge and render read:
providers, room, traits, aggregates, options per group."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, NamedTuple

# Provider and Room are built once per row the search reads (thousands per
# request): named tuples, which are several times cheaper to make than frozen
# dataclasses and just as immutable.


class Provider(NamedTuple):
    id: int
    uuid: str
    parent_id: int | None
    root_id: int


class Room(NamedTuple):
    """What is left of one class on one provider, and its unit rules."""

    free: float  # capacity - used
    min_unit: int
    max_unit: int
    step_size: int
    capacity: int = 0  # as provider summaries show it: int((total - reserved) * ratio)
    used: int = 0

    def fits(self, amount: int) -> bool:
        return (
            self.min_unit <= amount <= self.max_unit
            and amount % self.step_size == 0
            and amount <= self.free
        )

    def lacks(self, *amounts: int) -> tuple[str, ...]:
        """What keeps ``amounts`` (one group's, or several groups' on one
        provider) off this room: "capacity", "max_unit", "min_unit",
        "step_size", each that applies. As the walk has it: each amount on
        its own meets min_unit and step_size, their sum fits in the free
        room and max_unit. Empty, for one amount, exactly when ``fits``."""
        needs = sum(amounts)
        lacking = []
        if needs > self.free:
            lacking.append("capacity")
        if needs > self.max_unit:
            lacking.append("max_unit")
        if amounts and min(amounts) < self.min_unit:
            lacking.append("min_unit")
        step = self.step_size
        if step != 1 and any(amount % step for amount in amounts):
            lacking.append("step_size")
        return tuple(lacking)


class Fill:
    """One sort class's capacity and usage per tree (1.48, rank.py), read
    as ``rooms.fills``' dicts are: ``get(root)`` -> (capacity, used), or
    None for a tree without the class. Two dicts, not a tuple per tree:
    a ranked search makes one for every tree of the cloud."""

    __slots__ = ("capacity", "taken")

    def __init__(self, capacity: dict[int, float], taken: dict[int, int]) -> None:
        self.capacity, self.taken = capacity, taken

    def get(self, root: int, default: Any = None) -> Any:
        capacity = self.capacity.get(root)
        return default if capacity is None else (capacity, self.taken.get(root, 0))


class SearchBudgetExceeded(Exception):
    """The walks of one request took more steps than its budget allows."""

    def __init__(self, steps: int):
        super().__init__(f"the search took more than {steps} steps")
        self.steps = steps


class UnknownNames(Exception):
    """The request names traits or resource classes the database does not
    have (the traits first: the search looks them up first); ``parameter``
    the one that names the classes (``sort`` for 1.48's sort keys)."""

    def __init__(self, traits: list[str], classes: list[str], parameter: str = "resources"):
        super().__init__(f"no such traits {traits} or resource classes {classes}")
        self.traits, self.classes, self.parameter = traits, classes, parameter


# Budget.steps for a Found without a budget of its own: never reached.
UNBOUNDED = 2**62


@dataclass
class Budget:
    """The steps the walks of one request may take, all walks together (the
    answer's, and an explanation's): a step is one provider tried for one
    slot, and each candidate found costs a step per slot (what keeping and
    rendering it takes), so an answer too large to keep ends the walk too.
    Spent past zero, the walk raises SearchBudgetExceeded, so no request
    holds a worker without bound."""

    steps: int = UNBOUNDED
    left: int = field(init=False)

    def __post_init__(self) -> None:
        self.left = self.steps

    def spend(self, steps: int = 1) -> None:
        self.left -= steps
        if self.left < 0:
            raise SearchBudgetExceeded(self.steps)


@dataclass
class Found:
    """What the search loaded for one request, and what eligibility.py made of
    it (options, roots): everything merge.py and render.py need, as plain data.
    ``providers``, ``traits``, ``trait_ids`` and ``aggregates`` may be the
    process's kept world itself (world.py): read them, never change them.
    """

    providers: dict[int, Provider] = field(default_factory=dict)
    traits: dict[int, frozenset[str]] = field(default_factory=dict)
    # trait name -> trait id, for the traits the providers hold: summaries list
    # a provider's traits in id order (the order upstream's database gives)
    trait_ids: dict[str, int] = field(default_factory=dict)
    room: dict[tuple[int, str], Room] = field(default_factory=dict)
    # (provider, requested class) -> its room where that is too little for
    # the class's smallest requested amount: provider summaries show these
    # too, an explanation counts them. ``room`` and ``full`` together hold
    # every inventory of every requested class (of the trees searched).
    full: dict[tuple[int, str], Room] = field(default_factory=dict)
    # every requested class, as the request names it -> its id
    classes: dict[str, int] = field(default_factory=dict)
    # class -> providers with room for the class's smallest requested amount,
    # in id order: an index of ``room`` the search builds as it reads
    with_room: dict[str, list[int]] = field(default_factory=dict)
    # provider -> its aggregates' uuids (the shape's: every provider)
    aggregates: dict[int, frozenset[str]] = field(default_factory=dict)
    # suffix -> resource class (None for a granular group as a whole) -> provider ids
    options: dict[str, dict[str | None, list[int]]] = field(default_factory=dict)
    sharing: set[int] = field(default_factory=set)
    shares_with: dict[int, set[int]] = field(default_factory=dict)  # sharing id -> root ids
    # suffix -> sharing provider -> the trees it may serve for that group,
    # where the group's rules narrow them (eligibility.sharing_trees): its
    # own tree and every one in ``shares_with`` otherwise
    reach: dict[str, dict[int, frozenset[int]]] = field(default_factory=dict)
    roots: list[int] = field(default_factory=list)  # anchors, in id order
    # False when the search covered only the first anchors of the cloud (in
    # id order): a prefix of the whole answer's trees, see search.search.
    complete: bool = True
    # root -> the providers loaded of its tree, when the search knows them
    # (None for a Found built by hand): render reads a few trees' members
    # without a look at every provider loaded.
    members: dict[int, list[int]] | None = None
    # The shape of the cloud the search made this of (world.World; None for
    # a Found built by hand): the summaries read other classes' stock in it.
    world: Any = None
    # The request's budget of walk steps, shared by every walk of the request.
    budget: Budget = field(default_factory=Budget)
    # sort= classes (1.48) -> root -> (capacity, used) of the tree's
    # inventories of the class: a dict (rooms.fills) or a Fill
    # (rooms.kept_fills), read by ``get(root)`` alone
    fills: dict[str, Any] = field(default_factory=dict)
    # A ranked search of the best trees only (search.search's ``ranked_first``):
    # (bound, root) of the best tree it left out (rank.Bound), else None.
    next_bound: Any = None
    # ... and every anchor's (bound, root) and the sort classes' usage it
    # read, for a wider search of the same request to start from
    ranking_read: Any = None
