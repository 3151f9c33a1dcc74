"""The store's locks: per-session locks every process on one machine honours, and in-process locks that know their age.

Per-session: a POSIX record lock on one byte of a file beside the database. In-process: since when held, so that a
store stuck in the kernel shows.

SQLite's own waits are bounded (``busy_timeout``, ``store.deadline_ms``), but a read or write that the kernel holds (a
frozen or hung file system, a dead network disk) never returns, and the thread doing it keeps the lock it took. The
store's in-process locks are ``WatchedLock``s, so a caller can see that (``held_longest``) and stop waiting for the
store (``proxy/offload.py``): the request goes on without it."""

from __future__ import annotations

import errno
import fcntl
import hashlib
import os
import threading
import time
import weakref
from pathlib import Path
from types import TracebackType

SLOTS = 1 << 31
"""Bytes of the lock file a session may hash to (two sessions on one byte only wait for each other)."""


def slot_of(agent_id: str, session_id: str) -> int:
    """The byte of the lock file that stands for a session."""
    digest = hashlib.blake2b(f"{agent_id}\0{session_id}".encode("utf-8", "surrogatepass"), digest_size=8).digest()
    return int.from_bytes(digest, "big") % SLOTS


class FileSessionLocks:
    """Locks on sessions shared by the processes using one SQLite file (replicas on one machine, ``--workers``).

    A lock is an exclusive POSIX record lock (``fcntl.lockf``) on the session's byte of ``path``: the kernel gives it
    to one process at a time and takes it back when the process dies, SIGKILL included. Record locks belong to the
    process, not the thread, so threads of one process first take the byte's thread lock. The file stays open for
    the life of the process: closing any descriptor of it would drop every record lock the process holds."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._fd: int | None = None
        self._guard = threading.Lock()
        self._slots: dict[int, tuple[threading.Lock, int]] = {}
        """Per byte in use: its thread lock and how many threads hold or wait for it."""

    def lock(self, agent_id: str, session_id: str) -> SlotLock:
        return SlotLock(self, slot_of(agent_id, session_id))

    def _fd_of(self) -> int:
        with self._guard:
            if self._fd is None:
                self._fd = os.open(self.path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
            return self._fd

    def _enter(self, slot: int) -> threading.Lock:
        with self._guard:
            lock, users = self._slots.get(slot) or (threading.Lock(), 0)
            self._slots[slot] = (lock, users + 1)
        return lock

    def _leave(self, slot: int) -> None:
        with self._guard:
            lock, users = self._slots[slot]
            if users == 1:
                del self._slots[slot]
            else:
                self._slots[slot] = (lock, users - 1)

    def close(self) -> None:
        """Release every lock of this process and close the file (at shutdown)."""
        with self._guard:
            if self._fd is not None:
                os.close(self._fd)
                self._fd = None


class SlotLock:
    """One session's lock (`memory.store.base.SessionLock`): blocks until held; released from any thread."""

    def __init__(self, locks: FileSessionLocks, slot: int) -> None:
        self._locks, self.slot = locks, slot
        self._thread_lock: threading.Lock | None = None

    def acquire(self, timeout: float | None = None) -> bool:
        """Wait until held (at most ``timeout`` seconds: False when it was not)."""
        deadline = None if timeout is None else time.monotonic() + timeout
        fd = self._locks._fd_of()  # one object, split for the context-manager protocol
        lock = self._locks._enter(self.slot)
        held = False
        try:
            if not lock.acquire(timeout=-1 if timeout is None else timeout):
                self._giveup(lock, held)
                return False
            held = True
            pause = 0.001
            while True:  # non-blocking tries: a blocking lockf could not give up at the deadline
                try:
                    fcntl.lockf(fd, fcntl.LOCK_EX | fcntl.LOCK_NB, 1, self.slot, os.SEEK_SET)
                    break
                except OSError as exc:
                    if exc.errno not in (errno.EACCES, errno.EAGAIN):
                        raise
                if deadline is not None and time.monotonic() >= deadline:
                    self._giveup(lock, held)
                    return False
                time.sleep(pause)  # another process decides for the session (milliseconds, as a rule)
                pause = min(pause * 2, 0.05)
        except BaseException:
            self._giveup(lock, held)
            raise
        self._thread_lock = lock
        return True

    def _giveup(self, lock: threading.Lock, held: bool) -> None:
        if held:
            lock.release()
        self._locks._leave(self.slot)

    def release(self) -> None:
        lock, self._thread_lock = self._thread_lock, None
        if lock is None:
            return
        try:
            fd = self._locks._fd
            if fd is not None:
                fcntl.lockf(fd, fcntl.LOCK_UN, 1, self.slot, os.SEEK_SET)
        finally:
            lock.release()
            self._locks._leave(self.slot)

    def __enter__(self) -> SlotLock:
        self.acquire()
        return self

    def __exit__(self, *exc: object) -> None:
        self.release()


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
