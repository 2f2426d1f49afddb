"""Facts the data layer reports: plain exceptions carrying data, no HTTP words.

Each handler family in ``api/`` words these as upstream does (status, error
code, message); the same fact may be worded differently by two handlers, as
upstream's are. ``str()`` of one is its repr, for the log.
"""

from __future__ import annotations

from dataclasses import dataclass


class DomainError(Exception):
    """A refusal by the data layer or a unit of work, as data."""

    def __post_init__(self) -> None:
        # The fields as the exception's args, so it pickles and compares like one.
        super().__init__(*vars(self).values())

    def __str__(self) -> str:
        return repr(self)


# Resource classes


@dataclass(eq=False)
class ResourceClassNotFound(DomainError):
    name: str


@dataclass(eq=False)
class ResourceClassExists(DomainError):
    name: str


@dataclass(eq=False)
class ResourceClassInUse(DomainError):
    """Inventories or allocations still name the class."""

    name: str


@dataclass(eq=False)
class ResourceClassIdsExhausted(DomainError):
    """Concurrent creators kept taking the id this one picked."""

    name: str


# Traits


@dataclass(eq=False)
class TraitNotFound(DomainError):
    name: str


@dataclass(eq=False)
class TraitInUse(DomainError):
    """A provider still has the trait."""

    name: str


@dataclass(eq=False)
class UnknownTrait(DomainError):
    """Names no trait has (sorted, as upstream lists them)."""

    names: tuple[str, ...]


@dataclass(eq=False)
class UnknownResourceClass(DomainError):
    """Names no resource class has, in the order met (upstream names the first)."""

    names: tuple[str, ...]


# Providers


@dataclass(eq=False)
class ProviderNotFound(DomainError):
    uuid: str


@dataclass(eq=False)
class ProviderExists(DomainError):
    """Another provider has the uuid or the name (None: that one is free)."""

    uuid: str | None
    name: str | None


@dataclass(eq=False)
class ParentProviderNotFound(DomainError):
    """The parent named for provider ``uuid`` does not exist; ``vanished``:
    it did when read, and was deleted before the write."""

    uuid: str
    parent_uuid: str | None
    vanished: bool = False


@dataclass(eq=False)
class ProviderHasChildren(DomainError):
    uuid: str


@dataclass(eq=False)
class ProviderInUse(DomainError):
    """The provider holds allocations."""

    uuid: str


@dataclass(eq=False)
class ConcurrentUpdate(DomainError):
    """Another writer changed the provider (its generation) first."""

    uuid: str


@dataclass(eq=False)
class ProviderChanged(ConcurrentUpdate):
    """Another writer changed the provider between the unit of work's own
    read of it and its write, with no generation the client gave at stake
    (an allocation write bumps the generations it read itself): the whole
    unit of work is worth running again (db/retries.py). Past
    ``[placement] allocation_conflict_retry_count`` retries it is answered as
    the ConcurrentUpdate it is."""


# Inventories


@dataclass(eq=False)
class InventoryInUse(DomainError):
    """Allocations hold the classes whose inventory a write would remove
    (in class id order, as upstream lists them)."""

    uuid: str
    resource_classes: tuple[str, ...]


# Allocations and consumers


@dataclass(eq=False)
class AllocationProviderNotFound(DomainError):
    """An allocation names a provider that does not exist."""

    uuid: str


@dataclass(eq=False)
class InventoryMissing(DomainError):
    """Allocations against providers (or a class of one) without inventory.
    Upstream names every class of the write when whole providers lack it."""

    resource_classes: tuple[str, ...]
    provider_uuids: tuple[str, ...]


@dataclass(eq=False)
class AmountViolatesInventory(DomainError):
    """The amount breaks the inventory's min_unit, max_unit or step_size."""

    uuid: str
    resource_class: str


@dataclass(eq=False)
class CapacityExceeded(DomainError):
    uuid: str
    resource_class: str


@dataclass(eq=False)
class ConsumerGenerationConflict(DomainError):
    """The client gave another consumer generation than the consumer has
    (``expected`` None: the consumer does not exist yet)."""

    consumer_uuid: str
    expected: int | None
    given: int | None


@dataclass(eq=False)
class ConsumerChanged(DomainError):
    """Another writer changed a consumer's allocations first (never retried)."""


@dataclass(eq=False)
class ConsumerMoved(DomainError):
    """Another writer changed a consumer between the unit of work's own read
    of it and its write, with no generation the client gave at stake (an
    allocation delta without consumer_generation reads the consumer itself):
    the whole unit of work is worth running again (db/retries.py), as for
    ProviderChanged."""

    consumer_uuid: str


# The unit of work itself (db/engine.py)


@dataclass(eq=False)
class UnstorableValue(DomainError):
    """The database refused a value (a NUL in a string, a number out of
    range): the client's input, not the service's fault."""

    reason: str


@dataclass(eq=False)
class DatabaseUnavailable(DomainError):
    """Retryable failures (deadlocks, lock timeouts, lost connections) went
    on past the configured number of retries; or, ``unreachable``, the
    database is out of reach: no connection could be made, a Galera node is
    not ready, the connection was lost with no retry left, or no pooled
    connection came free in time. ``reason`` says which (db/engine.py's
    retry reasons, or ``pool_timeout``; None: not said)."""

    attempts: int
    unreachable: bool = False
    reason: str | None = None
