"""The capacity rules every allocation write is checked against.

Per provider and class: the inventory must exist; each amount must respect
min_unit, max_unit and step_size; and the provider's usage after the write
must fit (total - reserved) * allocation_ratio, unless the provider was
already over capacity and the write leaves it no worse (upstream lets such a
write through, so that shrinking an inventory never traps its consumers).

Plain data in, a fact raised for the first claim that does not fit: the
figures are read by ``db/capacity.py`` (two statements for all the touched
providers and classes, whatever their number).
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass
from typing import Any

from placement_svc.db.exceptions import (
    AmountViolatesInventory,
    CapacityExceeded,
    InventoryMissing,
)
from placement_svc.db.providers import Provider

# (provider id, class id): how capacity, usage and what was removed are keyed.
Key = tuple[int, int]


@dataclass(frozen=True)
class Claim:
    """An amount of a class a consumer is to hold on a provider (0: to remove)."""

    consumer_uuid: str
    provider: Provider
    resource_class: str
    amount: int


def check(
    claims: list[Claim],
    rc_ids: dict[str, int],
    inventories: dict[Key, Any],
    used_now: dict[Key, int],
    removed: dict[Key, int],
) -> None:
    """Raise for the first claim (in request order) that does not fit:
    InventoryMissing, AmountViolatesInventory or CapacityExceeded.

    ``rc_ids`` holds every claim's class; ``inventories`` the providers'
    inventory rows of those classes (total, reserved, min_unit, max_unit,
    step_size, allocation_ratio); ``used_now`` the usage with the consumers'
    old allocations removed, and ``removed`` what those held.
    """
    if not claims:
        return
    class_ids = {rc_ids[c.resource_class] for c in claims}
    with_inventory = {provider_id for provider_id, _rc in inventories}
    missing = list(
        dict.fromkeys(c.provider.uuid for c in claims if c.provider.id not in with_inventory)
    )
    if missing:
        # Upstream names every class of the write, in the order a Python set
        # of their ids iterates: ids are upstream's, so the order is too.
        by_id = {rc_ids[c.resource_class]: c.resource_class for c in claims}
        raise InventoryMissing(tuple(by_id[rc_id] for rc_id in class_ids), tuple(missing))

    wanted: dict[Key, int] = defaultdict(int)
    for claim in claims:
        provider, name = claim.provider, claim.resource_class
        key = (provider.id, rc_ids[name])
        wanted[key] += claim.amount
        if claim.amount == 0:
            continue
        inv = inventories.get(key)
        if inv is None:
            raise InventoryMissing((name,), (provider.uuid,))
        if (
            claim.amount < inv.min_unit
            or claim.amount > inv.max_unit
            or claim.amount % inv.step_size != 0
        ):
            raise AmountViolatesInventory(provider.uuid, name)
        used = used_now.get(key, 0)
        capacity = (inv.total - inv.reserved) * inv.allocation_ratio
        if capacity < used + claim.amount or capacity < used + wanted[key]:
            if key in removed or key in used_now:
                previous = used + removed.get(key, 0)
                if used + wanted[key] <= previous:
                    continue  # over capacity already, and no worse than before
            raise CapacityExceeded(provider.uuid, name)
