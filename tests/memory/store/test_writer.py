"""The background queue (on both backends): batches, drains on close, drops (and counts) past its bound, never raises."""

from __future__ import annotations

from collections.abc import Callable

from memory.store.base import Audit, Changes, SessionRecord, Store
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
