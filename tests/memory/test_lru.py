"""The one bounded cache: least recently used first, peek without refreshing, evictions handed on, shared by threads."""

from __future__ import annotations

import threading

from memory.lru import LRU


def test_the_least_recently_used_entry_goes_first() -> None:
    memo: LRU[str, str] = LRU(3)
    for key in "abc":
        memo[key] = key.upper()
    assert memo.get("a") == "A"  # a is now the most recent: b goes next
    memo["d"] = "D"
    assert list(memo) == ["c", "a", "d"] and memo.get("b") is None
    memo["c"] = "C2"  # a write refreshes too
    memo["e"] = "E"
    assert list(memo) == ["d", "c", "e"] and memo.get("a", "gone") == "gone"
    assert len(memo) == 3


def test_peek_and_item_reads_leave_the_order_first_in_first_out() -> None:
    fifo: LRU[str, int | None] = LRU(2)
    fifo["a"], fifo["b"] = None, 2
    assert fifo.peek("a", "missing") is None and fifo["a"] is None and fifo.peek("x", "missing") == "missing"
    fifo["c"] = 3
    assert list(fifo) == ["b", "c"]


def test_each_eviction_is_handed_on_in_order() -> None:
    gone: list[tuple[str, int]] = []
    cache: LRU[str, int] = LRU(2, evicted=lambda key, value: gone.append((key, value)))
    for i, key in enumerate("abcd"):
        cache[key] = i
    assert gone == [("a", 0), ("b", 1)] and list(cache) == ["c", "d"]
    cache.pop("c")  # taken out by hand: not an eviction
    cache["e"] = 4
    assert gone == [("a", 0), ("b", 1)] and list(cache.items()) == [("d", 3), ("e", 4)]


def test_threads_share_one_without_a_lock() -> None:
    cache: LRU[int, int] = LRU(64)
    errors: list[BaseException] = []
    start = threading.Barrier(4)

    def work(seed: int) -> None:
        start.wait()
        try:
            for i in range(20_000):
                key = (i * 7 + seed) % 200
                if cache.get(key) is None:
                    cache[key] = key
        except BaseException as exc:  # noqa: BLE001 — collected and asserted below
            errors.append(exc)

    threads = [threading.Thread(target=work, args=(s,)) for s in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=60)
    assert not any(t.is_alive() for t in threads) and errors == []
    assert len(cache) <= 64 and all(cache.peek(k) == k for k in cache)
