"""The background queue: records that need not be durable before forwarding, written in batches by one task."""

from __future__ import annotations

import asyncio
import time
from collections import deque

import structlog

from memory.store import Background, Store

log = structlog.get_logger(__name__)

BATCH_MAX = 500
"""Records written per transaction; the writer yields to the event loop between transactions."""
COALESCE_S = 0.05
"""How long the writer waits after the first record before writing, so a busy proxy commits once per batch."""
CHECKPOINT_EVERY_S = 1.0
"""At most this often, the store's housekeeping (SQLite: a checkpoint) runs in a worker thread."""


class Writer:
    """Queued records (reports, usage, audit, calibration) written by one asyncio task. ``put`` never
    waits and never fails; a full queue drops the record and counts it. The store makes each write
    idempotent, so a record queued twice is written once. ``close`` writes what is left."""

    def __init__(self, store: Store, max_items: int = 10_000) -> None:
        self.store = store
        self.max_items = max_items
        self.written = 0
        self.dropped = 0
        self.failed = 0
        self._items: deque[Background] = deque()
        self._wake = asyncio.Event()
        self._idle = asyncio.Event()
        self._idle.set()
        self._task: asyncio.Task[None] | None = None
        self._housekeeping: asyncio.Task[None] | None = None
        self._last_housekeeping = time.monotonic()

    def start(self) -> None:
        """Start the writing task (in the running event loop)."""
        self._task = asyncio.create_task(self._run(), name="ruyi-store-writer")

    def put(self, item: Background) -> None:
        if len(self._items) >= self.max_items:
            self.dropped += 1
            if self.dropped == 1 or self.dropped % 1000 == 0:
                log.warning("store_queue_full", dropped=self.dropped, queue_max=self.max_items)
            return
        self._items.append(item)
        self._idle.clear()
        self._wake.set()

    @property
    def pending(self) -> int:
        """Records queued and not yet written."""
        return len(self._items)

    async def drain(self) -> None:
        """Wait until everything queued so far is written (or given up)."""
        if self._task is None or self._task.done():
            self._write_all()
            return
        await self._idle.wait()

    async def close(self) -> None:
        """Stop the task and write what is left (graceful shutdown)."""
        if self._task is not None:
            self._task.cancel()
            try:
                await self._task
            except asyncio.CancelledError:
                pass  # cancelled on purpose: what it had not written is written just below
        if self._housekeeping is not None:
            await self._housekeeping
        self._write_all()
        log.info("store_queue_drained", written=self.written, dropped=self.dropped, failed=self.failed)

    async def _run(self) -> None:
        while True:
            await self._wake.wait()
            self._wake.clear()
            await asyncio.sleep(COALESCE_S)  # gather what the next requests queue: one transaction for many
            while self._items:
                self._write_batch()
                await asyncio.sleep(0)
            self._idle.set()
            self._maybe_housekeeping()

    def _write_all(self) -> None:
        while self._items:
            self._write_batch()
        self._idle.set()

    def _write_batch(self) -> None:
        batch = [self._items.popleft() for _ in range(min(BATCH_MAX, len(self._items)))]
        try:
            self.store.write_background(batch)
        except Exception:  # noqa: BLE001 - background records are best effort; the proxy goes on
            self.failed += len(batch)
            log.warning("store_background_write_failed", records=len(batch), location=self.store.location, exc_info=True)
            return
        self.written += len(batch)

    def _maybe_housekeeping(self) -> None:
        now = time.monotonic()
        busy = self._housekeeping is not None and not self._housekeeping.done()
        if busy or now - self._last_housekeeping < CHECKPOINT_EVERY_S:
            return
        self._last_housekeeping = now
        self._housekeeping = asyncio.create_task(self._checkpoint())

    async def _checkpoint(self) -> None:
        try:
            await asyncio.to_thread(self.store.checkpoint)
        except Exception:  # noqa: BLE001 - a checkpoint that fails is retried later
            log.warning("store_checkpoint_failed", location=self.store.location, exc_info=True)
