"""Facts the units of work report beyond the data layer's: rules refused.

Like ``db.exceptions`` they carry data and no HTTP words; ``api/`` words them.
"""

from __future__ import annotations

from dataclasses import dataclass

from placement_svc.db.exceptions import DomainError


@dataclass(eq=False)
class StandardResourceClass(DomainError):
    """Standard resource classes (os-resource-classes) are read-only."""

    name: str


@dataclass(eq=False)
class StandardTrait(DomainError):
    """Standard traits (os-traits) are read-only."""

    name: str


@dataclass(eq=False)
class ProviderNameMissing(DomainError):
    """A provider needs a name (the schema lets an empty one through)."""

    uuid: str


@dataclass(eq=False)
class ProviderIsOwnParent(DomainError):
    uuid: str


@dataclass(eq=False)
class ReparentingNotAllowed(DomainError):
    """Before 1.37 a child keeps its parent."""

    uuid: str


@dataclass(eq=False)
class UnparentingNotAllowed(DomainError):
    """Before 1.37 a child cannot become a root."""

    uuid: str


@dataclass(eq=False)
class ProviderTreeLoop(DomainError):
    """The new parent is the provider itself or one of its descendants."""

    uuid: str


@dataclass(eq=False)
class ProviderGenerationMismatch(DomainError):
    """The client saw the provider at another generation than it is now."""

    uuid: str
    actual: int
    given: int | None


@dataclass(eq=False)
class InvalidInventory(DomainError):
    """The inventory leaves no capacity: (total - reserved) * allocation_ratio
    must be positive, or from 1.26 may be zero (``zero_allowed``)."""

    uuid: str
    resource_class: str
    zero_allowed: bool


@dataclass(eq=False)
class InventoryExists(DomainError):
    uuid: str
    resource_class: str


@dataclass(eq=False)
class InventoryNotFound(DomainError):
    uuid: str
    resource_class: str


@dataclass(eq=False)
class NoAllocations(DomainError):
    """DELETE /allocations/{consumer} of a consumer that holds none."""

    consumer_uuid: str


@dataclass(eq=False)
class TreeShape(DomainError):
    """A tree write's body is not one tree rooted at its URL's provider."""

    problem: str


@dataclass(eq=False)
class NotARoot(DomainError):
    """The provider a tree's URL names has a parent: ``root_uuid`` is its root."""

    uuid: str
    root_uuid: str


@dataclass(eq=False)
class InAnotherTree(DomainError):
    """A tree write names a provider of another tree: it moves nothing between trees."""

    uuid: str
    its_root: str
    root_uuid: str


@dataclass(eq=False)
class StaleProviders(DomainError):
    """Providers of a tree write the client saw at another generation:
    (uuid, generation now or None when there is no such provider, given)."""

    stale: tuple[tuple[str, int | None, int | None], ...]


@dataclass(eq=False)
class RemovingTooMuch(DomainError):
    """An allocation delta takes away more than the consumer holds."""

    consumer_uuid: str
    provider_uuid: str
    resource_class: str
    removing: int
    held: int


@dataclass(eq=False)
class HoldExpired(DomainError):
    """The consumer's hold expired before it was confirmed: its allocations are gone."""

    consumer_uuid: str


@dataclass(eq=False)
class OwnerMissing(DomainError):
    """A new consumer needs a project and a user."""

    consumer_uuid: str
