"""The registry's writes to the store: a request's decisions made durable before it is forwarded, the rest in one flush."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

import structlog

from memory.decisions import merge, restore
from memory.lru import LRU
from memory.session import Session
from memory.store.base import Store
from memory.unsaved import Unsaved

log = structlog.get_logger(__name__)


class WriteThrough:
    """What SessionRegistry (memory/sessions.py) writes to its store, and when: every change is kept as unsaved
    until ``flush`` writes it in one transaction; `decide` and `settle` write before the request is forwarded."""

    store: Store | None
    unsaved_max: int
    write_failures: int
    _unsaved: Unsaved
    _soon: Callable[[], None] | None
    _lru: LRU[tuple[str, str], int]

    if TYPE_CHECKING:

        def get(self, agent_id: str, session_id: str, *, stored: bool = True) -> Session | None: ...

    def decide(
        self,
        agent_id: str,
        session_id: str,
        decisions: Mapping[str, Any],
        refs: Mapping[str, str],
        batch_retry_at: int | None = None,
        clear_batch_retry: bool = False,
    ) -> bool:
        """Add a request's decisions to its session's and make them durable (with everything unsaved) before
        the request is forwarded. If the write fails they are taken back, in memory and from the unsaved
        changes, and False says: forward the client's own bytes (the rest is retried by the next flush)."""
        session = self.get(agent_id, session_id)
        if session is None:
            return False
        key, retry_before = (agent_id, session_id), session.batch_retry_at
        pending = {link for link in decisions if (*key, link) in self._unsaved.decisions}
        before = merge(session.decisions, decisions)
        if batch_retry_at is not None or clear_batch_retry:
            session.batch_retry_at = batch_retry_at
        if self.store is None:
            session.refs.update(refs)
            return True
        self._unsaved.recorded(session, decisions, refs, True)
        if self.settle(durable=bool(decisions or refs) or session.batch_retry_at != retry_before):
            return True
        restore(session.decisions, before)
        session.batch_retry_at = retry_before
        self._unsaved.take_back(key, [link for link in decisions if link not in pending], refs)
        return False

    def writes_now(
        self,
        session: Session,
        decisions: Mapping[str, Any],
        refs: Mapping[str, str],
        batch_retry_at: int | None = None,
        clear_batch_retry: bool = False,
    ) -> bool:
        """Whether `decide` with these (or `settle`, with none) writes to the store before it returns."""
        retry = batch_retry_at if batch_retry_at is not None or clear_batch_retry else session.batch_retry_at
        durable = decisions or refs or retry != session.batch_retry_at or self._unsaved.durable_pending()
        return self.store is not None and bool(durable or self._soon is None)

    def settle(self, durable: bool = False) -> bool:
        """Before forwarding: write now what must survive a crash (``durable``, decisions, refs, a batch's retry
        point), with everything unsaved; leave a request that decided nothing to the background writer (`soon`,
        within its coalescing delay): a restart finds its session again by the prefix its earlier requests stored."""
        if not durable and self.store is not None and self._unsaved and not self._unsaved.durable_pending() and self._soon is not None:
            self._soon()
            return True
        return self.flush()

    def flush(self) -> bool:
        """Write every change since the last flush in one transaction; call it before forwarding.
        A failed write is logged, counted and retried by the next flush; while the store keeps failing,
        the oldest unsaved entries past `unsaved_max` are dropped (counted in ``self._unsaved.dropped``)."""
        if self.store is None or not self._unsaved:
            return True
        try:
            self.store.write(self._unsaved.changes())
        except Exception:  # fail open: the caller forwards the client's own bytes
            self.write_failures += 1
            log.warning("store_write_failed", location=self.store.location, failures=self.write_failures, exc_info=True)
            dropped = self._unsaved.bound(self.unsaved_max, lambda key: key in self._lru)
            if dropped:
                log.warning("store_backlog_trimmed", dropped=dropped, dropped_total=self._unsaved.dropped, kept=self._unsaved.size())
            return False
        self._unsaved.written()
        return True

    def unsaved_stats(self) -> dict[str, int]:
        """Failed writes since start-up, entries waiting for the next one, and entries dropped while the store failed."""
        return {"failed": self.write_failures, "unsaved": self._unsaved.size(), "dropped": self._unsaved.dropped}
