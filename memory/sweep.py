"""Expiry: sessions and refs unseen for ``sessions.ttl_days`` go, by a daily sweep and by ``ruyi store vacuum``."""

from __future__ import annotations

import asyncio
import time

import structlog

from memory.serialized import SerializedRegistry

log = structlog.get_logger(__name__)

CHUNK = 200
"""Sessions removed per transaction (other writers get the database between transactions)."""
PAGES = 256
"""Pages given back to the file system per step (one short transaction each)."""
PAUSE_S = 0.005
"""``ruyi store vacuum`` rests this long between steps, so a running Ruyi's writes get their turn."""


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
            removed += n
            before, left = None, await asyncio.to_thread(_compact_step, registry) if removed and registry.store is not None else 0
            while left and (before is None or left < before):
                before, left = left, await asyncio.to_thread(_compact_step, registry)
            log.info("store_swept", removed=removed)
        except Exception:  # a failed sweep is retried at the next interval
            log.warning("store_sweep_failed", exc_info=True)
        await asyncio.sleep(interval_s)
