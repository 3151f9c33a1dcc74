"""Shutdown with a deadline: in-flight requests get ``server.shutdown_grace_seconds``, then they are ended."""

from __future__ import annotations

import asyncio
from collections.abc import Coroutine, Iterator
from contextlib import contextmanager
from typing import Any

import structlog

log = structlog.get_logger(__name__)


class Shutdown:
    """The requests in flight and the deadline that starts with SIGTERM/SIGINT. At the deadline each one still
    running is cancelled: a stream catches it and ends with an error event (SSE) or error line (NDJSON), a request
    not yet answered gets a 503; then the app's cleanup drains the store."""

    def __init__(self, grace_s: float) -> None:
        self.grace_s = grace_s
        self.deadline_passed = False
        self._running: set[asyncio.Task[object]] = set()
        self._cut: set[asyncio.Task[object]] = set()
        self._after: set[asyncio.Task[object]] = set()
        self._timer: asyncio.TimerHandle | None = None

    @contextmanager
    def tracking(self) -> Iterator[None]:
        """Around one request's handler."""
        task = asyncio.current_task()
        if task is not None:
            self._running.add(task)
        try:
            yield
        finally:
            self._running.discard(task)

    def keep(self, work: Coroutine[Any, Any, object]) -> asyncio.Task[object]:
        """Run a request's work after its answer (audit record, S0, memory) in a task of its own: a client that goes
        away cancels its handler, never this work; ``drain`` waits for it before the store closes."""
        task = asyncio.ensure_future(work)
        self._after.add(task)
        task.add_done_callback(self._after.discard)
        return task

    async def drain(self) -> None:
        """Wait for every request's after-answer work (at shutdown, before the store and the keeper close)."""
        while self._after:
            await asyncio.gather(*list(self._after), return_exceptions=True)

    def begin(self) -> None:
        """The server stopped accepting: the grace period starts now."""
        if self._timer is None:
            log.info("shutdown_started", in_flight=len(self._running), grace_s=self.grace_s)
            self._timer = asyncio.get_running_loop().call_later(self.grace_s, self._deadline)

    def end(self) -> None:
        if self._timer is not None:
            self._timer.cancel()

    def _deadline(self) -> None:
        self.deadline_passed = True
        if self._running:
            log.warning("shutdown_deadline_cut", requests=len(self._running), grace_s=self.grace_s)
        self._cut = set(self._running)
        for task in self._cut:
            task.cancel()

    def cut(self) -> bool:
        """In an ``except CancelledError``: whether the deadline cancelled this task (then the cancellation is
        taken back, so the caller can still end its answer cleanly). False for any other cancellation."""
        task = asyncio.current_task()
        if task is None or task not in self._cut:
            return False
        self._cut.discard(task)
        task.uncancel()
        return True


SHUTDOWN_MESSAGE = "Ruyi is shutting down: this request ran past its grace period (server.shutdown_grace_seconds); retry it"
