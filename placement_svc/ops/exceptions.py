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
