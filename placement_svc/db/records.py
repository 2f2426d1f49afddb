"""Plain records the data-access modules return: no ORM objects leave db/."""

from __future__ import annotations

import datetime
from dataclasses import dataclass


@dataclass(frozen=True)
class Named:
    """A resource class or a trait: a name with timestamps."""

    id: int
    name: str
    created_at: datetime.datetime | None
    updated_at: datetime.datetime | None

    @property
    def modified(self) -> datetime.datetime | None:
        return self.updated_at or self.created_at
