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
