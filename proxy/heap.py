"""Give the C heap's free memory back to the system (glibc): large blocks on pages of their own, a trim after sweeps.

CPython frees its small-object arenas itself; what it asks of ``malloc`` for larger objects (message texts, parsed
bodies, token-count lists) goes back to glibc's heap when freed, and glibc hands free pages back only from a heap's
top. Two things kept freed memory resident. glibc's thresholds move: once a large block (a 30 MB body) was freed, blocks
up to 32 MB no longer get pages of their own but come from a heap, and a worker thread's heap keeps up to 64 MB free at
its top, which no trim gives back (six 30 MB bodies rewritten at once left ~180 MB resident after their threads were
done): `fixed_thresholds`, at start-up, keeps blocks from ``LARGE_BYTES`` on pages of their own (returned when freed)
and a heap's free top under ``TOP_BYTES``. And free pages below a heap's top in use stay resident: `trim`, after each
idle sweep, releases them. Where there is no glibc (musl, macOS) both do nothing and say so.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import functools
from collections.abc import Callable

M_TRIM_THRESHOLD, M_MMAP_THRESHOLD = -1, -3  # mallopt's parameters (malloc.h)
LARGE_BYTES = 1 << 20
"""Blocks from this size get pages of their own (glibc's mmap threshold, fixed: 128 KiB and moving by default)."""
TOP_BYTES = 2 << 20
"""A heap's free top past this goes back to the system as it is freed (glibc's trim threshold, fixed)."""


@functools.cache
def _libc() -> ctypes.CDLL | None:
    try:
        return ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
    except OSError:
        return None


@functools.cache
def _malloc_trim() -> Callable[[int], int] | None:
    func = getattr(_libc(), "malloc_trim", None)
    if func is not None:
        func.argtypes, func.restype = [ctypes.c_size_t], ctypes.c_int
    return func


def fixed_thresholds(large_bytes: int = LARGE_BYTES, top_bytes: int = TOP_BYTES) -> bool:
    """Keep blocks from ``large_bytes`` on pages of their own and a heap's free top under ``top_bytes`` (fixed, so
    glibc no longer raises them after a large block is freed); True when set. At start-up, before worker threads."""
    mallopt = getattr(_libc(), "mallopt", None)
    if mallopt is None:
        return False
    mallopt.argtypes, mallopt.restype = [ctypes.c_int, ctypes.c_int], ctypes.c_int
    return bool(mallopt(M_MMAP_THRESHOLD, large_bytes)) and bool(mallopt(M_TRIM_THRESHOLD, top_bytes))


def can_trim() -> bool:
    """Whether this process's C library has ``malloc_trim`` (glibc)."""
    return _malloc_trim() is not None


def trim() -> bool:
    """Release the heap's free pages to the system; True when some were released. Blocks the calling thread for the
    walk over the heap (milliseconds for a few hundred MB; other threads' allocations wait on the heap's lock meanwhile),
    so call it from a worker thread, not the event loop."""
    func = _malloc_trim()
    return bool(func(0)) if func is not None else False
