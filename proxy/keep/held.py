"""What the request path reads of an agent's memory (notebook, anchors, sub-agent snapshots), held in memory between the keeper's own writes."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Any

import structlog

from memory.lru import LRU

log = structlog.get_logger()

AGENTS_HELD = 4096
"""Agents (and sessions' snapshots) whose reads are held (the oldest forgotten first), and agents whose writes are
counted (the least recently written forgotten first: forgetting one moves the epoch, so no read in flight is kept)."""
READS = frozenset({"current", "versions", "version", "pending", "get", "list", "counts", "full", "snapshot", "facts", "results", "task_calls"})
"""Methods of the keeper's stores that only read; any other call may write and drops what is held for its agent."""
HELD_S = 2.0
"""How long a read is held as it is: ``ruyi memo`` and ``ruyi anchors`` write the store's file directly, from another
process, while Ruyi runs. The first use past this reads again in the background (``refresh``), the use after it sees
what they wrote; without a way to read in the background, the next request after this long reads again itself."""
STALE_S = 30.0
"""How long a read past ``held_s`` may still be used while it is read again in the background; older, a request reads
the store again itself (in a worker). An agent sending at least every ``STALE_S`` never waits on a read of its memory."""
HAS_MARGIN_S = 1.0
"""``has`` (asked on the loop before a request's rewrite is planned there) stops this much before ``get`` would read:
a read ``has`` promised is never made on the loop (``get`` comes a few milliseconds later)."""
REFRESHING_MAX = 4
"""Background reads in flight at most (a stalled store must not take every worker thread); past it a stale read waits
for the next use to be read again."""


class Held:
    """Reads held per key; a write through a ``Watched`` store drops the keys of its agent (all keys when the call names
    none). A read that raced a write is not kept (the agent's generation moved meanwhile). Off (``on`` False) with
    replicas sharing the store: another process writes too, and the request path reads in a worker anyway.

    A read is used as it is for ``held_s``; then, while ``refresh`` can run it in the background, for up to
    ``stale_s`` more, each use past ``held_s`` reading it again there once (stale while it is read again)."""

    def __init__(
        self,
        on: bool = True,
        held_s: float = HELD_S,
        clock: Callable[[], float] = time.monotonic,
        stale_s: float = STALE_S,
        refresh: Callable[[Callable[[], None]], Any] | None = None,
    ) -> None:
        self.on = on
        self.held_s = held_s
        self.stale_s = stale_s
        self.refresh = refresh
        """Runs a callable off the loop without waiting for it (the app's worker pool); None: a stale read is read again
        by the request that finds it (``held_s`` is then all a read is held)."""
        self._clock = clock
        self._values: dict[tuple[str, ...], tuple[float, Any, Callable[[], Any] | None]] = {}
        self._generation: LRU[str, int] = LRU(AGENTS_HELD, evicted=self._forgotten)
        """Writes per agent, bounded: a read compares its agent's count (and the epoch) before and after."""
        self._epoch = 0
        self._refreshing: set[tuple[str, ...]] = set()
        self._lock = threading.RLock()  # a ``refresh`` that runs its callable at once reads again under it
        self.refreshed = 0
        """Reads made again in the background (a held read used past ``held_s``)."""

    def _forgotten(self, agent_id: str, generation: int) -> None:
        """An agent's write count is dropped (under the lock): its next count restarts at 0 and could equal what a read
        in flight saw, so the epoch moves and every read in flight now is not kept (read again next time)."""
        self._epoch += 1

    def has(self, key: tuple[str, ...]) -> bool:
        """Whether ``get(key)`` will answer from memory (asked on the loop: then no read is made there)."""
        with self._lock:
            return self.on and self._usable(key, HAS_MARGIN_S)

    def _usable(self, key: tuple[str, ...], margin: float = 0.0) -> bool:
        """Under the lock: ``key`` is held and young enough to use; a use past ``held_s`` reads it again in the background."""
        kept = self._values.get(key)
        if kept is None:
            return False
        age = self._clock() - kept[0]
        if age < self.held_s:
            return True
        if self.refresh is None or kept[2] is None or age >= self.stale_s - margin:
            return False
        self._read_again(key, kept[2])
        return True

    def _read_again(self, key: tuple[str, ...], read: Callable[[], Any]) -> None:
        """Under the lock: ``key`` read again in the background, once at a time, at most ``REFRESHING_MAX`` at once."""
        if key in self._refreshing or len(self._refreshing) >= REFRESHING_MAX or self.refresh is None:
            return
        self._refreshing.add(key)
        try:
            self.refresh(lambda: self._reread(key, read))
        except RuntimeError:  # the pool is shut down: the next use past ``stale_s`` reads again itself
            self._refreshing.discard(key)

    def _reread(self, key: tuple[str, ...], read: Callable[[], Any]) -> None:
        try:
            self._read(key, read, again=True)
        except Exception:  # the store failed: the held read stays until ``stale_s``, then a request reads again
            log.warning("held_read_again_failed", what=key[1], exc_info=True)
        finally:
            with self._lock:
                self._refreshing.discard(key)

    def _read(self, key: tuple[str, ...], read: Callable[[], Any], again: bool = False) -> Any:
        """``read()``, kept unless a write for the agent came meanwhile (``again``: and only while ``key`` is still held,
        in place of what is)."""
        with self._lock:
            before = (self._epoch, self._generation.peek(key[0], 0))
        value = read()
        with self._lock:
            if (self._epoch, self._generation.peek(key[0], 0)) == before and (not again or key in self._values):
                self._keep(key, value, read)
                self.refreshed += again
        return value

    def get(self, key: tuple[str, ...], read: Callable[[], Any]) -> Any:
        """The value held for ``key`` (its first item the agent), else ``read()``, held unless a write came meanwhile."""
        if not self.on:
            return read()
        with self._lock:
            if self._usable(key):
                return self._values[key][1]
        return self._read(key, read)

    def put(self, key: tuple[str, ...], value: Any) -> None:
        """Held after the keeper wrote it itself (a snapshot, immutable once made)."""
        if self.on:
            with self._lock:
                self._keep(key, value, None)

    def _keep(self, key: tuple[str, ...], value: Any, read: Callable[[], Any] | None) -> None:
        self._values.pop(key, None)  # the newest last: the oldest is forgotten first
        self._values[key] = (self._clock(), value, read)
        if len(self._values) > AGENTS_HELD:
            self._values.pop(next(iter(self._values)))

    def forget_idle(self, _now: float, _idle_s: float, limit: int) -> int:
        """Forget up to ``limit`` reads that no use can take any more (past ``stale_s``; past ``held_s`` when they
        cannot be read again in the background), oldest first; returns how many went. Its own clock and times: the
        app calls it beside the caches `Measurer.forget_idle_forever` sweeps (a session's snapshot was kept until
        ``AGENTS_HELD`` newer reads pushed it out)."""
        gone: list[tuple[str, ...]] = []
        with self._lock:
            now = self._clock()
            for key, (at, _, read) in self._values.items():  # oldest first
                age = now - at
                if age < self.held_s or len(gone) == limit:
                    break
                if age >= self.stale_s or read is None or self.refresh is None:
                    gone.append(key)
            for key in gone:
                del self._values[key]
        return len(gone)

    def drop(self, agent_id: str | None) -> None:
        with self._lock:
            if agent_id is None:
                self._values.clear()
                self._epoch += 1
                return
            self._generation[agent_id] = self._generation.peek(agent_id, 0) + 1
            for key in [k for k in self._values if k[0] == agent_id]:
                del self._values[key]


class Watched:
    """A keeper store whose every call but a read (``READS``) drops what ``held`` holds for the agent it names first."""

    def __init__(self, store: Any, held: Held) -> None:
        self._store = store
        self._held = held

    def __getattr__(self, name: str) -> Any:
        attr = getattr(self._store, name)
        if name in READS or name.startswith("_") or not callable(attr):
            return attr

        def written(*args: Any, **kwargs: Any) -> Any:
            agent = args[0] if args and isinstance(args[0], str) else kwargs.get("agent_id")
            try:
                return attr(*args, **kwargs)
            finally:
                self._held.drop(agent if isinstance(agent, str) else None)

        return written
