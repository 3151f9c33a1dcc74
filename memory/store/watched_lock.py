"""Locks that know since when they are held: a store stuck in the kernel (a frozen file system) shows as a lock held too long.

SQLite's own waits are bounded (``busy_timeout``, ``store.deadline_ms``), but a read or write that the kernel holds (a
frozen or hung file system, a dead network disk) never returns, and the thread doing it keeps the lock it took. The
store's locks are these, so a caller can see that (``held_longest``) and stop waiting for the store
(``proxy/offload.py``): the request goes on without it."""

from __future__ import annotations

import threading
import time
import weakref
from types import TracebackType

_WATCHED: weakref.WeakSet[WatchedLock] = weakref.WeakSet()
_GUARD = threading.Lock()


class WatchedLock:
    """A re-entrant lock (``threading.RLock``'s interface) that records when its holder took it."""

    def __init__(self) -> None:
        self._lock = threading.RLock()
        self._depth = 0
        self._since = 0.0
        """``time.monotonic()`` when the holder took it; 0.0 while free (written only by the holder)."""
        with _GUARD:
            _WATCHED.add(self)

    def acquire(self, blocking: bool = True, timeout: float = -1) -> bool:
        if not self._lock.acquire(blocking, timeout):
            return False
        self._depth += 1
        if self._depth == 1:
            self._since = time.monotonic()
        return True

    def release(self) -> None:
        self._depth -= 1
        if self._depth == 0:
            self._since = 0.0
        self._lock.release()

    def __enter__(self) -> bool:
        return self.acquire()

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None) -> None:
        self.release()

    def held_for(self, now: float | None = None) -> float:
        """Seconds its current holder has held it (0.0 when free)."""
        since = self._since
        return max(0.0, (now if now is not None else time.monotonic()) - since) if since else 0.0


def held_longest() -> float:
    """The longest any store lock in this process has been held, in seconds, now."""
    now = time.monotonic()
    with _GUARD:
        locks = list(_WATCHED)
    return max((lock.held_for(now) for lock in locks), default=0.0)
