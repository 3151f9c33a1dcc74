"""What each session's answers have still to teach the keeper: an archive's rewrite waits for it (bounded) before reading the keeper's memory."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Hashable

REMEMBER_WAIT_S = 2.0
"""Longest an archiving request waits for what its session's earlier answers taught to be remembered: the default of
``layout.memory_wait_s`` (local work, no LLM, milliseconds; a stalled store must not hold the request longer)."""


class Pending:
    """Answers counted per session as they end (before their client can send the next request), uncounted once the
    keeper has remembered them. Only an archive reads what the keeper learnt of a session (its compact form, the
    notebook and anchors of the stable part it rebuilds), so only an archive waits: what it forwards then never
    depends on how fast the keeper went (the same bytes on a replay, after a restart, on a replica), and the other
    requests of the session never wait at all."""

    def __init__(self) -> None:
        self._cond = threading.Condition()
        self._count: dict[Hashable, int] = {}
        self.overdue = 0
        """Waits that ran out with answers still pending (an archive then forwarded what the keeper had so far:
        ``memory.archives_unsettled`` in GET /ruyi/v1/stats, and ``archive_memory_unsettled`` in the log)."""

    def expect(self, key: Hashable) -> None:
        with self._cond:
            self._count[key] = self._count.get(key, 0) + 1

    def done(self, key: Hashable) -> None:
        with self._cond:
            left = self._count.get(key, 0) - 1
            if left > 0:
                self._count[key] = left
            else:
                self._count.pop(key, None)
                self._cond.notify_all()

    def wait(self, key: Hashable, timeout: float = REMEMBER_WAIT_S) -> bool:
        """Whether nothing is pending for ``key`` (waiting up to ``timeout``; never on the event loop, which only looks)."""
        try:
            asyncio.get_running_loop()
            timeout = 0.0  # on the loop: never wait
        except RuntimeError:
            pass
        with self._cond:
            settled = self._cond.wait_for(lambda: key not in self._count, timeout)
            if not settled and timeout > 0:
                self.overdue += 1
            return settled

    def __len__(self) -> int:
        return len(self._count)
