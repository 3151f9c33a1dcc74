"""The background queue (on both backends): batches, drains on close, drops (and counts) past its bound, never raises."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable
from pathlib import Path

import pytest

from memory.store import writer as writer_module
from memory.store.base import Audit, Changes, SessionRecord, Store, Turn
from memory.store.sqlite_recall import Recall
from memory.store.sqlite_store import SQLiteStore
from memory.store.writer import Writer


def store_with_session(make_store: Callable[[], Store]) -> Store:
    store = make_store()
    store.write(Changes(sessions=[SessionRecord("a", "s", last_seen=1.0)]))
    return store


async def test_queued_records_are_written_and_a_replay_is_written_once(make_store: Callable[[], Store]) -> None:
    store = store_with_session(make_store)
    writer = Writer(store)
    writer.start()
    for i in range(1200):  # more than one batch
        writer.put(Audit("a", "s", f"r{i}", {"i": i}))
    await writer.drain()
    writer.put(Audit("a", "s", "r7", {"i": "replayed"}))
    await writer.close()
    audit = store.audit("a", "s")
    assert len(audit) == 1200 and audit[7] == {"i": 7}
    assert (writer.written, writer.dropped, writer.failed, writer.pending) == (1201, 0, 0, 0)


async def test_close_writes_what_is_still_queued(make_store: Callable[[], Store]) -> None:
    store = store_with_session(make_store)
    writer = Writer(store)
    writer.start()
    for i in range(10):
        writer.put(Audit("a", "s", f"r{i}", {}))
    await writer.close()  # no drain first: shutdown drains
    assert len(store.audit("a", "s")) == 10


async def test_a_full_queue_drops_and_counts(make_store: Callable[[], Store]) -> None:
    store = store_with_session(make_store)
    writer = Writer(store, max_items=5)  # not started: nothing is written meanwhile
    for i in range(8):
        writer.put(Audit("a", "s", f"r{i}", {}))
    assert (writer.pending, writer.dropped) == (5, 3)
    await writer.close()
    assert len(store.audit("a", "s")) == 5


async def test_a_failing_write_is_counted_never_raised(make_store: Callable[[], Store]) -> None:
    store = store_with_session(make_store)
    writer = Writer(store)
    writer.start()
    store.close()
    writer.put(Audit("a", "s", "r", {}))
    await writer.drain()
    await writer.close()
    assert (writer.written, writer.failed) == (0, 1)


async def test_a_lone_surrogate_fails_alone_and_is_stored_safely(tmp_path: Path) -> None:
    """One tenant's text never drops another's records: a lone surrogate (valid JSON, not UTF-8) in raw turns of one
    agent, in the same batch as a victim's; every record is written, that one with U+FFFD in the surrogate's place."""
    path = tmp_path / "ruyi.db"
    SQLiteStore(path).close()  # the schema
    recall = Recall(path)
    writer = Writer(recall)  # it writes Recall's items, as long-context recall does
    for i in range(10):  # one batch (not started: written on close)
        writer.put(Turn("victim", "s", i, f"v{i}", "user", {"role": "user", "content": f"fine {i}"}, f"fine {i}"))
        writer.put(Turn("mallory", "m", i, f"m{i}", "user", {"role": "user", "content": "bad \ud800"}, "bad \ud800 text"))
    await writer.close()
    assert len(recall.turns("victim", "s")) == 10
    stored = recall.turns("mallory", "m")
    assert len(stored) == 10 and "\ufffd" in json.dumps(stored, ensure_ascii=False)
    assert (writer.written, writer.failed, writer.failed_by_reason) == (20, 0, {})
    recall.close()


async def test_records_queued_while_the_writer_looks_by_itself_and_after_it_sleeps_are_written(
    make_store: Callable[[], Store], monkeypatch: pytest.MonkeyPatch
) -> None:
    """After a write the writer looks for records on its own for ``AWAKE_S`` (a request queues without waking a
    thread), then sleeps until woken: what is queued in either state is written, and so is a registry's flush."""
    monkeypatch.setattr(writer_module, "AWAKE_S", 0.3)
    store = store_with_session(make_store)
    writer = Writer(store)
    writer.start()
    writer.put(Audit("a", "s", "r0", {}))  # the writer sleeps: woken
    await writer.drain()
    assert await _until(lambda: writer._polling)  # looking by itself now: nobody wakes it
    writer.put(Audit("a", "s", "r1", {}))
    flushed: list[bool] = []
    writer.flush_soon(lambda: flushed.append(True))
    await writer.drain()
    assert flushed == [True]
    assert await _until(lambda: not writer._polling and writer.idle, after=0.6)  # AWAKE_S past: asleep again
    writer.put(Audit("a", "s", "r2", {}))
    await writer.drain()
    await writer.close()
    assert len(store.audit("a", "s")) == 3
    assert (writer.written, writer.dropped, writer.failed) == (3, 0, 0)


async def _until(condition: Callable[[], bool], after: float = 0.0, within: float = 10.0) -> bool:
    """Whether ``condition`` holds, looked at every 10 ms from ``after`` seconds on, for at most ``within`` seconds."""
    await asyncio.sleep(after)
    for _ in range(int(within / 0.01)):
        if condition():
            return True
        await asyncio.sleep(0.01)
    return False
