"""Give the C heap's free pages back to the system (glibc's ``malloc_trim``) once idle memory was let go.

CPython frees its small-object arenas itself; what it asked of ``malloc`` for larger objects (message texts, parsed
bodies, token-count lists) goes back to glibc's heap when freed, and glibc hands whole free pages back only from the
heap's top. A heap whose top is in use keeps every free page below it resident: after the idle sweep let a few
thousand cached entries go, resident memory does not fall; a trim releases those pages (``madvise``), so memory
follows what is held. Where there is no glibc (musl, macOS) it does nothing and says so.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import threading
from collections.abc import Callable

_lock = threading.Lock()
_trim: Callable[[int], int] | None = None
_looked = False


def _malloc_trim() -> Callable[[int], int] | None:
    global _trim, _looked
    with _lock:
        if not _looked:
            _looked = True
            try:
                libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
                func = libc.malloc_trim
            except (OSError, AttributeError):
                return None
            func.argtypes, func.restype = [ctypes.c_size_t], ctypes.c_int
            _trim = func
        return _trim


def can_trim() -> bool:
    """Whether this process's C library has ``malloc_trim`` (glibc)."""
    return _malloc_trim() is not None


def trim() -> bool:
    """Release the heap's free pages to the system; True when some were released. Blocks the calling thread for the
    walk over the heap (milliseconds for a few hundred MB; other threads' allocations wait on the heap's lock meanwhile),
    so call it from a worker thread, not the event loop."""
    func = _malloc_trim()
    return bool(func(0)) if func is not None else False
