"""Placement's policy defaults: the base rules and one rule per API operation.

The names are upstream Placement's (``placement:resource_providers:list``,
...), so an operator's policy.yaml keeps its meaning. The operations each
API rule guards are routes.py's: ``placement_svc.policy.list_rules`` (the
``oslo.policy.policies`` entry point, namespace ``placement``, that
oslopolicy-sample-generator and friends read) documents them with those.
"""

from __future__ import annotations

import itertools

from placement_svc.policies import (
    aggregates,
    allocation_candidates,
    allocations,
    base,
    inventories,
    operating,
    reshaper,
    resource_classes,
    resource_providers,
    traits,
    usages,
)

FAMILIES = (
    base,
    resource_providers,
    resource_classes,
    inventories,
    aggregates,
    usages,
    traits,
    allocations,
    allocation_candidates,
    reshaper,
    operating,
)


def list_rules():
    return list(itertools.chain.from_iterable(family.list_rules() for family in FAMILIES))
