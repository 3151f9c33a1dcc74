"""Expiry: sessions and refs unseen for ``sessions.ttl_days`` go, by a daily sweep and by ``ruyi store vacuum``."""

from __future__ import annotations

import asyncio
import time

import structlog

from memory.serialized import SerializedRegistry

log = structlog.get_logger(__name__)

CHUNK = 20
"""Sessions removed per transaction, under the registry's lock (requests get the lock and the database between two:
a step is tens of milliseconds now that a session's recall rows are deleted by their rowid range)."""
PAGES = 256
"""Pages given back to the file system per step (one short transaction each)."""
PAUSE_S = 0.12
"""Both sweeps rest this long between steps, so requests (and a running Ruyi's writes) get their turn: longer than
SQLite's busy handler sleeps between two tries (up to 100 ms), or a writer waiting for the database never gets it."""


def _compact_step(registry: SerializedRegistry) -> int:
    """One small incremental vacuum; returns the free pages left."""
    with registry.lock:
        return int(registry.store.compact(PAGES))


def sweep(registry: SerializedRegistry) -> int:
    """Remove every expired session now, then give the space back, in small steps (for the command line, which may
    run beside a live Ruyi on the same database). Returns how many sessions the store removed."""
    removed = 0
    while (n := registry.expire(CHUNK)) == CHUNK:
        removed += n
        time.sleep(PAUSE_S)
    removed += n
    before, left = None, _compact_step(registry) if registry.store is not None else 0
    while left and (before is None or left < before):  # stops too when nothing more can be given (no incremental vacuum)
        time.sleep(PAUSE_S)
        before, left = left, _compact_step(registry)
    return removed


SIZE_EVERY_S = 30.0
"""How often the store's size is checked against ``store.max_bytes`` (and at start-up)."""


def _shrink_step(registry: SerializedRegistry) -> str | None:
    with registry.lock:
        return registry.store.shrink_step()


def shrink(registry: SerializedRegistry) -> int:
    """Bring the store under ``store.max_bytes`` now, in small steps (SQLite; nothing without a limit). Returns the steps."""
    steps = 0
    while getattr(registry.store, "max_bytes", 0) and _shrink_step(registry) is not None:
        steps += 1
        time.sleep(PAUSE_S)
    return steps


async def keep_size_forever(registry: SerializedRegistry, every_s: float = SIZE_EVERY_S) -> None:
    """At start-up, then every ``every_s``: while the store is over ``store.max_bytes``, one small step (a worker
    thread, the registry's lock held for one short transaction), then a rest, so requests are never starved."""
    store = registry.store
    while True:
        try:
            steps = 0
            while await asyncio.to_thread(_shrink_step, registry) is not None:
                steps += 1
                await asyncio.sleep(PAUSE_S)
            if steps:
                log.info("store_shrunk", steps=steps, bytes=store.bytes, max_bytes=store.max_bytes, removed=dict(store.shrunk))
        except Exception:  # tried again at the next check
            log.warning("store_shrink_failed", exc_info=True)
        await asyncio.sleep(every_s)


async def sweep_forever(registry: SerializedRegistry, interval_s: float) -> None:
    """At start-up, then every ``interval_s``: remove expired sessions in small steps, each in a worker thread; and,
    with ``store.max_bytes``, keep the store under it (`keep_size_forever`, a task of its own)."""
    sizing = asyncio.create_task(keep_size_forever(registry)) if getattr(registry.store, "max_bytes", 0) else None
    try:
        await _sweep_forever(registry, interval_s)
    finally:
        if sizing is not None:
            sizing.cancel()


async def _sweep_forever(registry: SerializedRegistry, interval_s: float) -> None:
    while True:
        try:
            removed = 0
            while (n := await asyncio.to_thread(registry.expire, CHUNK)) == CHUNK:
                removed += n
                await asyncio.sleep(PAUSE_S)
            removed += n
            before, left = None, await asyncio.to_thread(_compact_step, registry) if removed and registry.store is not None else 0
            while left and (before is None or left < before):
                await asyncio.sleep(PAUSE_S)
                before, left = left, await asyncio.to_thread(_compact_step, registry)
            log.info("store_swept", removed=removed)
        except Exception:  # a failed sweep is retried at the next interval
            log.warning("store_sweep_failed", exc_info=True)
        await asyncio.sleep(interval_s)
