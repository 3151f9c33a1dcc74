"""The session registry shared by threads: every call holds one lock (the registry and its store are single-threaded)."""

from __future__ import annotations

from typing import Any

from memory.sessions import SessionRegistry
from memory.store.locks import WatchedLock


class SerializedRegistry:
    """A SessionRegistry whose methods run one at a time, whichever thread calls them. ``lock`` is the same lock,
    for callers that must do several things at once (resolve a request and take its session's turn) or use the
    store directly (the background writer, the sweep). Call it from worker threads, never from the event loop:
    a call may wait for another thread's durable write."""

    def __init__(self, registry: SessionRegistry, lock: WatchedLock | None = None) -> None:
        self.registry = registry
        self.lock = lock if lock is not None else WatchedLock()

    def __getattr__(self, name: str) -> Any:
        attr = getattr(self.registry, name)
        if not callable(attr):
            return attr
        lock = self.lock

        def locked(*args: Any, **kwargs: Any) -> Any:
            with lock:
                return attr(*args, **kwargs)

        return locked

    def __len__(self) -> int:
        with self.lock:
            return len(self.registry)
