"""The long-context service's per-session memory: bounded, and forgotten when no request used it for a while."""

from __future__ import annotations

from proxy.longctx.options import ArchiveOptions
from proxy.longctx.service import LongCtx


def test_a_sessions_prepared_memory_goes_when_unused_for_idle_s() -> None:
    """Issue 27 (memory flat after warm-up): what was prepared for a session (chunks, summaries) stayed until 2,000
    newer sessions pushed it out; now it goes after ``sessions.idle_s`` unused, and the session starts afresh."""
    longctx = LongCtx(ArchiveOptions())
    finished = longctx.memory("agent", "finished")
    finished.s1 = (3, "link", "an S1 made ahead")
    assert longctx.forget_idle(0.0, 300.0, 10) == 0
    live = longctx.memory("agent", "live")
    assert longctx.forget_idle(200.0, 300.0, 10) == 0
    assert longctx.memory("agent", "live") is live  # used at 200 s
    assert longctx.forget_idle(301.0, 300.0, 10) == 1  # the finished session's, untouched since before the mark at 0
    assert longctx.memory("agent", "finished").s1 is None  # made afresh
    assert longctx.memory("agent", "live") is live
