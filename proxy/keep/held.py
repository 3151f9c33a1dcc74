"""What the request path reads of an agent's memory (notebook, anchors, sub-agent snapshots), held in memory between the keeper's own writes."""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Awaitable, Callable
from typing import Any

import structlog

from memory.lru import LRU

log = structlog.get_logger(__name__)

AGENTS_HELD = 4096
"""Agents (and sessions' snapshots) whose reads are held (the oldest forgotten first), and agents whose writes are
counted (the least recently written forgotten first: forgetting one moves the epoch, so no read in flight is kept)."""
READS = frozenset({"current", "versions", "version", "pending", "get", "list", "counts", "full", "snapshot", "facts", "results", "task_calls"})
"""Methods of the keeper's stores that only read; any other call may write and drops what is held for its agent."""
HELD_S = 2.0
"""How long a read is held at most: ``ruyi memo`` and ``ruyi anchors`` write the store's file directly, from another
process, while Ruyi runs; the next request after this long reads again (in a worker) and sees what they wrote."""


class Held:
    """Reads held per key; a write through a ``Watched`` store drops the keys of its agent (all keys when the call names
    none). A read that raced a write is not kept (the agent's generation moved meanwhile). Off (``on`` False) with
    replicas sharing the store: another process writes too, and the request path reads in a worker anyway."""

    def __init__(self, on: bool = True, held_s: float = HELD_S, clock: Callable[[], float] = time.monotonic) -> None:
        self.on = on
        self.held_s = held_s
        self._clock = clock
        self._values: dict[tuple[str, ...], tuple[float, Any]] = {}
        self._generation: LRU[str, int] = LRU(AGENTS_HELD, evicted=self._forgotten)
        """Writes per agent, bounded: a read compares its agent's count (and the epoch) before and after."""
        self._epoch = 0
        self._lock = threading.Lock()
        self._reading: set[str] = set()
        """Agents whose held reads are being read again ahead (``read_ahead``)."""

    def _forgotten(self, agent_id: str, generation: int) -> None:
        """An agent's write count is dropped (under the lock): its next count restarts at 0 and could equal what a read
        in flight saw, so the epoch moves and every read in flight now is not kept (read again next time)."""
        self._epoch += 1

    def has(self, key: tuple[str, ...]) -> bool:
        with self._lock:
            return self.on and self._fresh(key)

    def _fresh(self, key: tuple[str, ...]) -> bool:
        kept = self._values.get(key)
        return kept is not None and self._clock() - kept[0] < self.held_s

    def ageing(self, key: tuple[str, ...]) -> bool:
        """Whether ``key`` is held but half its ``held_s`` has gone: read it again ahead (``refresh``), off the request
        path, so an agent that sends more often than every ``held_s`` keeps finding it held."""
        with self._lock:
            kept = self._values.get(key)
            return self.on and kept is not None and self._clock() - kept[0] >= self.held_s / 2

    def read_ahead(
        self, agent_id: str, reads: dict[tuple[str, ...], Callable[[], Any]], run: Callable[..., Awaitable[Any]], tasks: set[asyncio.Task[Any]]
    ) -> None:
        """When one of ``reads``' keys is ageing, read them all again with ``run`` (a worker), one such read per agent
        at a time (its task in ``tasks``): the agent's next request finds them held, while the request that asked
        goes on with what is held (younger than ``held_s``). Only on the event loop."""
        if agent_id in self._reading or not any(self.ageing(key) for key in reads):
            return
        try:
            task = asyncio.get_running_loop().create_task(self._read_again(reads, run))
        except RuntimeError:  # not on the event loop: the next request reads in a worker, as without this
            return
        self._reading.add(agent_id)
        tasks.add(task)
        task.add_done_callback(tasks.discard)
        task.add_done_callback(lambda _t: self._reading.discard(agent_id))

    async def _read_again(self, reads: dict[tuple[str, ...], Callable[[], Any]], run: Callable[..., Awaitable[Any]]) -> None:
        try:
            await run(lambda: [self.refresh(key, read) for key, read in reads.items()])
        except Exception:  # a read ahead that fails changes nothing: the next request reads in a worker
            log.debug("held_read_ahead_failed", exc_info=True)

    def get(self, key: tuple[str, ...], read: Callable[[], Any]) -> Any:
        """The value held for ``key`` (its first item the agent), else ``read()``, held unless a write came meanwhile."""
        if not self.on:
            return read()
        with self._lock:
            if self._fresh(key):
                return self._values[key][1]
        return self.refresh(key, read)

    def refresh(self, key: tuple[str, ...], read: Callable[[], Any]) -> Any:
        """``read()`` whether held or not, held anew (its age from now) unless a write came meanwhile."""
        with self._lock:
            before = (self._epoch, self._generation.peek(key[0], 0))
        value = read()
        with self._lock:
            if self.on and (self._epoch, self._generation.peek(key[0], 0)) == before:
                self._keep(key, value)
        return value

    def put(self, key: tuple[str, ...], value: Any) -> None:
        """Held after the keeper wrote it itself (a snapshot, immutable once made)."""
        if self.on:
            with self._lock:
                self._keep(key, value)

    def _keep(self, key: tuple[str, ...], value: Any) -> None:
        self._values.pop(key, None)  # the newest last: the oldest is forgotten first
        self._values[key] = (self._clock(), value)
        if len(self._values) > AGENTS_HELD:
            self._values.pop(next(iter(self._values)))

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
