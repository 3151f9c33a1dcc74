"""The background queue: records that need not be durable before forwarding, written in batches by one thread."""

from __future__ import annotations

import asyncio
import threading
import time
from collections import deque
from collections.abc import Callable
from contextlib import AbstractContextManager

import structlog

from memory.safe_text import without_lone_surrogates
from memory.store.base import Background, Store, in_background, is_busy

log = structlog.get_logger(__name__)

BATCH_MAX = 500
"""Records written per transaction; the store's lock is let go between transactions."""
COALESCE_S = 0.05
"""How long the writer waits after the first record before writing, so a busy proxy commits once per batch."""
AWAKE_S = 1.0
"""For this long after a write the writer looks for new records every COALESCE_S instead of sleeping until it is woken:
a busy proxy's requests queue records and a flush without waking a thread (a futex wake, often a context switch, that
was on the request's path before its first byte); past it, idle, the writer sleeps until the next record wakes it."""
CHECKPOINT_EVERY_S = 1.0
"""At most this often, the store's housekeeping (SQLite: a checkpoint) runs, on its own connection."""
RETRY_FIRST_S = 0.2
RETRY_MAX_S = 5.0
"""While the store is held or stalled, the writer tries again after RETRY_FIRST_S, doubling up to RETRY_MAX_S: what
waits is kept (records in the queue, the registry's unsaved changes), and the session registry's lock, which a try
holds for at most ``store.deadline_ms``, stays free for requests in between."""


class Writer:
    """Queued records (reports, usage, audit, calibration) written by one thread, never on the event loop.
    ``put`` never waits and never fails, from any thread; a full queue drops the record and counts it. The store
    makes each write idempotent, so a record queued twice is written once. ``close`` writes what is left.
    ``lock`` is the lock of everyone else using the same store connection (the session registry)."""

    def __init__(self, store: Store, max_items: int = 10_000, lock: AbstractContextManager[object] | None = None) -> None:
        self.store = store
        self.max_items = max_items
        self.written = 0
        self.dropped = 0
        self.failed = 0
        self.failed_by_reason: dict[str, int] = {}
        """Records given up, by why: ``unencodable_text`` (still, after scrubbing), ``store_error``."""
        self._store_lock = lock
        self._items: deque[Background] = deque()
        self._queue = threading.Condition()
        self._idle = threading.Event()
        self._idle.set()
        self._tried = threading.Event()
        """Everything queued so far was tried at least once (written, given up, or kept for a retry while the store is held)."""
        self._tried.set()
        self._asked = 0
        """Records and flushes asked for since start-up: a try that failed marks as tried only what was asked before it."""
        self._try_from = 0
        self._stopping = False
        self._flush: Callable[[], object] | None = None
        """The session registry's flush, due with the next batch (`flush_soon`)."""
        self._thread: threading.Thread | None = None
        self._last_housekeeping = time.monotonic()
        self._retry_s = 0.0
        """The wait before the next try while the store is held (0: it is not)."""
        self.retried = 0
        """Writes (a batch or the registry's flush) that found the store held and were kept to be tried again."""
        self._final = False
        self._polling = False
        """The writer is in a timed wait (``AWAKE_S``): it finds what is queued by itself, nobody need wake it."""
        self._last_write = float("-inf")
        self._first_at: float | None = None
        """When the first record (or flush) not yet taken by the writer was queued: it is written COALESCE_S after."""

    def start(self) -> None:
        """Start the writing thread."""
        self._thread = threading.Thread(target=self._run, name="ruyi-store-writer", daemon=True)
        self._thread.start()

    def put(self, item: Background) -> None:
        with self._queue:
            if len(self._items) >= self.max_items:
                self.dropped += 1
                if self.dropped == 1 or self.dropped % 1000 == 0:
                    log.warning("store_queue_full", dropped=self.dropped, queue_max=self.max_items)
                return
            self._items.append(item)
            self._idle.clear()
            self._tried.clear()
            self._asked += 1
            if self._first_at is None:
                self._first_at = time.monotonic()
            if not self._polling:
                self._queue.notify()

    def flush_soon(self, flush: Callable[[], object]) -> None:
        """Call ``flush`` (the session registry's, which takes its own lock) before the next batch: the changes of
        requests that decided nothing, many requests' in one transaction. Never waits, from any thread."""
        with self._queue:
            self._flush = flush
            self._idle.clear()
            self._tried.clear()
            self._asked += 1
            if self._first_at is None:
                self._first_at = time.monotonic()
            if not self._polling:
                self._queue.notify()

    @property
    def pending(self) -> int:
        """Records queued and not yet written."""
        return len(self._items)

    @property
    def idle(self) -> bool:
        """Whether everything queued so far is written (or given up), the registry's flush included."""
        return self._idle.is_set()

    async def drain(self) -> None:
        """Wait until everything queued so far is written (or given up, or, while the store is held, tried once and
        kept for the next try)."""
        if self._thread is None or not self._thread.is_alive():
            await asyncio.to_thread(self._write_all)
            return
        await asyncio.to_thread(self._tried.wait)

    async def close(self) -> None:
        """Stop the thread and write what is left (graceful shutdown)."""
        if self._thread is not None:
            with self._queue:
                self._stopping = True
                self._queue.notify()
            await asyncio.to_thread(self._thread.join)
        self._final = True  # what still finds the store held is given up now, counted
        await asyncio.to_thread(self._write_all)
        log.info("store_queue_drained", written=self.written, dropped=self.dropped, failed=self.failed)

    def _run(self) -> None:
        with in_background():  # this thread's writes probe a stalled store (memory/store/base.py: Stall)
            while True:
                with self._queue:
                    while not self._items and self._flush is None and not self._stopping:
                        polling = time.monotonic() - self._last_write < AWAKE_S
                        self._polling = polling
                        try:
                            self._queue.wait(COALESCE_S if polling else None)
                        finally:
                            self._polling = False
                    if self._stopping:
                        return  # close() writes the rest
                    retry = self._retry_s
                    first, self._first_at = self._first_at, None
                if retry:
                    with self._queue:  # the store was held: wait before trying again (close() still ends it)
                        self._queue.wait_for(lambda: self._stopping, retry)
                        if self._stopping:
                            return
                else:  # gather what the next requests queue: one transaction for many, COALESCE_S after the first
                    now = time.monotonic()
                    time.sleep(max(0.0, min(COALESCE_S, (first if first is not None else now) + COALESCE_S - now)))
                self._write_all()
                self._last_write = time.monotonic()
                self._maybe_housekeeping()

    def _held(self) -> None:
        """The store was held or stalled: wait longer before the next try."""
        self.retried += 1
        self._retry_s = min(RETRY_MAX_S, max(RETRY_FIRST_S, self._retry_s * 2))
        with self._queue:
            if self._asked == self._try_from:  # what was queued so far was tried: a drain need not wait for the store
                self._tried.set()

    def _write_all(self) -> None:
        """Write what is queued; the registry's flush first, and again whenever one was asked for meanwhile, so a
        record queued after a request's flush was asked for (its audit record) is never stored before that flush."""
        while True:
            with self._queue:
                flush, self._flush = self._flush, None
                self._try_from = self._asked
            if flush is not None and not self._flushed(flush):
                return
            if not self._write_batch():
                return

    def _flushed(self, flush: Callable[[], object]) -> bool:
        try:
            ok = flush()  # logs and counts its own failures, and keeps what it could not write for the next one
        except Exception:  # never let the writer thread die
            log.warning("store_flush_failed", location=self.store.location, exc_info=True)
            ok = False
        if ok is not False or self._final:
            self._retry_s = 0.0 if ok is not False else self._retry_s
            return True
        with self._queue:  # tried again later even if no request asks: what waits lands once the store is free
            if self._flush is None:
                self._flush = flush
        self._held()
        return False

    def _write_batch(self) -> bool:
        """Write up to BATCH_MAX records; False when there was nothing to write."""
        with self._queue:
            if not self._items:
                if self._flush is None:
                    self._idle.set()
                    self._tried.set()
                return False
            batch = [self._items.popleft() for _ in range(min(BATCH_MAX, len(self._items)))]
        try:
            self._write(batch)
        except Exception as exc:  # noqa: BLE001 - one bad record must not take the others with it: each alone
            if is_busy(exc) and not self._final:  # the store is held, not the records bad: kept, in order, for later
                with self._queue:
                    self._items.extendleft(reversed(batch))
                self._held()
                return False
            for item in batch:
                self._write_alone(item)
            return True
        self.written += len(batch)
        self._retry_s = 0.0
        return True

    def _write(self, items: list[Background]) -> None:
        if self._store_lock is None:  # a store of its own (long-context recall)
            self.store.write_background(items)
        else:
            self.store.write_background(items, self._store_lock)  # its rows made before the lock is taken

    def _write_alone(self, item: Background) -> None:
        """One record of a batch that failed: written by itself; text a database cannot encode (a lone surrogate,
        valid in JSON) is stored with U+FFFD in its place; what still fails is dropped and counted by reason."""
        try:
            try:
                self._write([item])
            except UnicodeError:
                self._write([without_lone_surrogates(item)])
        except Exception as exc:  # background records are best effort; the proxy goes on
            reason = "unencodable_text" if isinstance(exc, UnicodeError) else "store_busy" if is_busy(exc) else "store_error"
            self.failed += 1
            self.failed_by_reason[reason] = self.failed_by_reason.get(reason, 0) + 1
            log.warning("store_background_write_failed", records=1, reason=reason, location=self.store.location, exc_info=True)
            return
        self.written += 1

    def _maybe_housekeeping(self) -> None:
        now = time.monotonic()
        if now - self._last_housekeeping < CHECKPOINT_EVERY_S:
            return
        self._last_housekeeping = now
        try:
            self.store.checkpoint()  # on the store's own checkpoint connection: no lock needed
        except Exception:  # a checkpoint that fails is retried later
            log.warning("store_checkpoint_failed", location=self.store.location, exc_info=True)
