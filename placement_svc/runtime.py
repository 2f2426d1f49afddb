"""Process-level tuning for serving processes (not for tests or libraries)."""

from __future__ import annotations

import gc

# A candidates request allocates tens of thousands of short-lived objects; with
# the default thresholds the collector runs full passes over every long-lived
# object (modules, SQLAlchemy's caches) many times per request, about a third of
# the flat 1000-host query's time (bench/candidates.py).
GC_THRESHOLDS = (20000, 50, 100)


def tune_gc() -> None:
    """Freeze what start-up allocated and collect the young generation less often."""
    gc.collect()
    gc.freeze()
    gc.set_threshold(*GC_THRESHOLDS)
