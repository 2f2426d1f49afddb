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


def _libc_function(name: str):
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
        return getattr(libc, name)
    except (OSError, AttributeError):
        return None  # not glibc


_trim = _libc_function("malloc_trim")
_mallopt = _libc_function("mallopt")

# glibc's mallopt parameters (malloc.h).
M_TRIM_THRESHOLD, M_MMAP_THRESHOLD = -1, -3
# A block this large or larger is mapped on its own, and unmapped when freed.
KEEP_BLOCKS_UNDER = 16 * 1024 * 1024
# Free memory at the top of the heap is handed back past this much. The
# same as GIVE_BACK_ABOVE: more than that is give_back_memory's to return.
KEEP_FREE_UP_TO = 32 * 1024 * 1024


def tune_malloc() -> bool:
    """Keep the memory of one answer for the next: a list of 1,000
    providers makes a few strings of 750 KB (its body, then the copies the
    HTTP layer writes out). By default glibc maps each block over 128 KB
    on its own, and later gives the top of its heap back once 256 KB of it
    are free, so every such answer touched fresh pages: 525 page faults a
    list, a sixth of its time over HTTP. With these thresholds the blocks
    of an answer up to 16 MB come from the heap and stay there for the next
    answer, and what a worker keeps free is bounded by KEEP_FREE_UP_TO
    (give_back_memory returns more after an unusually large answer). True
    when glibc took both settings; elsewhere nothing is changed."""
    if _mallopt is None:
        return False
    kept = _mallopt(M_MMAP_THRESHOLD, KEEP_BLOCKS_UNDER)
    trimmed = _mallopt(M_TRIM_THRESHOLD, KEEP_FREE_UP_TO)
    return bool(kept) and bool(trimmed)


def tune() -> None:
    """What every serving process does once its application is built: the
    collector's thresholds (tune_gc) and the allocator's (tune_malloc)."""
    tune_gc()
    tune_malloc()


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
