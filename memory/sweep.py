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


async def sweep_forever(registry: SerializedRegistry, interval_s: float) -> None:
    """At start-up, then every ``interval_s``: remove expired sessions in small steps, each in a worker thread."""
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
