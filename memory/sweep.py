"""Expiry: sessions and refs unseen for ``sessions.ttl_days`` go, by a daily sweep and by ``ruyi store vacuum``."""

from __future__ import annotations

import asyncio

import structlog

from memory.sessions import SessionRegistry

log = structlog.get_logger(__name__)

CHUNK = 200
"""Sessions removed per transaction (the event loop runs between transactions)."""
PAGES = 256
"""Pages given back to the file system per step."""


def sweep(registry: SessionRegistry) -> int:
    """Remove every expired session now (for the command line). Returns how many the store removed."""
    removed = 0
    while (n := registry.expire(CHUNK)) == CHUNK:
        removed += n
    removed += n
    if registry.store is not None:
        registry.store.compact()
    return removed


async def sweep_forever(registry: SessionRegistry, interval_s: float) -> None:
    """At start-up, then every ``interval_s``: remove expired sessions in small steps, never holding the loop."""
    while True:
        try:
            removed = 0
            while (n := registry.expire(CHUNK)) == CHUNK:
                removed += n
                await asyncio.sleep(0)
            removed += n
            left = registry.store.compact(PAGES) if registry.store is not None and removed else 0
            while left and registry.store is not None:
                await asyncio.sleep(0)
                left, before = registry.store.compact(PAGES), left
                if left >= before:
                    break  # nothing more to give back (a database made without incremental vacuum)
            log.info("store_swept", removed=removed)
        except Exception:  # noqa: BLE001 - a failed sweep is retried at the next interval
            log.warning("store_sweep_failed", exc_info=True)
        await asyncio.sleep(interval_s)
