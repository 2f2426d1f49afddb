"""Process-level tuning for serving processes (not for tests or libraries)."""

from __future__ import annotations

import ctypes
import ctypes.util
import gc
import os

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


# After an answer, a worker whose resident memory is this much above what it
# had after its first request hands its free memory back to the system.
GIVE_BACK_ABOVE = 32 * 1024 * 1024
_PAGE = os.sysconf("SC_PAGE_SIZE") if hasattr(os, "sysconf") else 4096
_settled: int | None = None


def _resident() -> int | None:
    """This process's resident memory, from /proc/self/statm: read again
    through a descriptor kept open by the process that opened it (one
    ``pread`` per answer, not an open, a read and a close: 30 µs of every
    request's time in a worker). A forked child opens its own."""
    global _statm
    try:
        if _statm is None or _statm[0] != os.getpid():
            if _statm is not None:
                os.close(_statm[1])  # the parent's, inherited
            _statm = (os.getpid(), os.open("/proc/self/statm", os.O_RDONLY | os.O_CLOEXEC))
        return int(os.pread(_statm[1], 128, 0).split()[1]) * _PAGE
    except (OSError, ValueError, IndexError):
        return None  # not Linux: nothing to measure


_statm: tuple[int, int] | None = None  # (the process that opened it, the descriptor)


def _malloc_trim():
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
        return libc.malloc_trim
    except (OSError, AttributeError):
        return None  # not glibc


_trim = _malloc_trim()


def give_back_memory() -> None:
    """Called after each answer: when the process holds much more memory
    than after its first answer (a huge answer, or a search ended by its
    budget, made and dropped millions of objects), collect and ask glibc to
    return its free pages, which it otherwise keeps for the process's life."""
    global _settled
    resident = _resident()
    if resident is None:
        return
    if _settled is None:
        _settled = resident
        return
    if resident - _settled > GIVE_BACK_ABOVE:
        gc.collect()
        if _trim is not None:
            _trim(0)
        # What the worker still holds after giving back is its own (the
        # shape of a large cloud, kept): the mark moves up to it, or every
        # answer after this one would collect and trim again, for nothing.
        after = _resident()
        if after is not None:
            _settled = max(_settled, after)
