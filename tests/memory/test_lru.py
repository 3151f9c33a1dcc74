"""The one bounded cache: least recently used first, peek without refreshing, evictions handed on, shared by threads."""

from __future__ import annotations

import threading

import pytest

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


def test_a_bound_in_bytes_drops_the_oldest_and_counts_what_leaves() -> None:
    gone: list[str] = []
    cache: LRU[str, str] = LRU(100, lambda key, _: gone.append(key), max_bytes=10, size=lambda _, value: len(value))
    cache["a"], cache["b"] = "xxx", "yyyy"
    assert cache.held_bytes == 7
    cache["c"] = "zzzz"  # 11 bytes: the oldest goes
    assert list(cache) == ["b", "c"] and gone == ["a"] and cache.held_bytes == 8
    cache["b"] = "y"  # rewritten: its old size leaves with it
    assert cache.held_bytes == 5
    assert cache.pop("b") == "y" and cache.pop("missing", None) is None and cache.held_bytes == 4
    cache["d"] = "q"
    assert cache.popitem(last=False) == ("c", "zzzz") and cache.held_bytes == 1
    del cache["d"]
    assert cache.held_bytes == 0 and not cache
    cache["small"], cache["huge"] = "s", "h" * 50  # alone past the bound: the entry just written stays
    assert list(cache) == ["huge"] and cache.held_bytes == 50
    cache.clear()
    assert cache.held_bytes == 0
    with pytest.raises(ValueError):
        LRU(1, max_bytes=10)  # a bound in bytes needs a size


def test_threads_leave_the_byte_count_exact() -> None:
    cache: LRU[int, bytes] = LRU(10_000, max_bytes=4_000, size=lambda _, value: len(value))
    start = threading.Barrier(4)

    def work(seed: int) -> None:
        start.wait()
        for i in range(20_000):
            key = (i * 7 + seed) % 300
            if i % 5 == 0:
                cache.pop(key, None)
            else:
                cache[key] = b"x" * (key % 37)

    threads = [threading.Thread(target=work, args=(s,)) for s in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=60)
    assert not any(t.is_alive() for t in threads)
    assert cache.held_bytes == sum(len(v) for v in cache.values()) <= 4_000


def test_forget_idle_drops_only_what_nothing_wrote_or_hit_for_the_idle_time() -> None:
    """Issue 27 (memory flat after warm-up): what finished conversations left goes after ``idle_s``, not when the bound
    pushes it out hours later; what was written or hit since stays, and each dropped entry is handed on."""
    gone: list[str] = []
    cache: LRU[str, int] = LRU(100, evicted=lambda key, _: gone.append(key))
    assert cache.forget_idle(0.0, 10.0, 100) == 0  # the first call only marks the time
    for i, key in enumerate("abc"):
        cache[key] = i
    assert cache.forget_idle(11.0, 10.0, 100) == 0  # all three were written after the mark at 0
    cache.get("a")  # used: a is not idle
    cache["d"] = 3
    assert cache.forget_idle(20.0, 10.0, 100) == 0  # the mark at 11 is 9 s old
    assert cache.forget_idle(21.0, 10.0, 1) == 1 and gone == ["b"]  # one at a time: the limit
    assert cache.forget_idle(21.0, 10.0, 100) == 1 and gone == ["b", "c"]
    assert list(cache) == ["a", "d"] and cache.forget_idle(21.5, 10.0, 100) == 0
    cache.peek("a")  # a peek is not a use
    assert cache.forget_idle(31.0, 10.0, 100) == 2 and not cache  # nothing touched since the mark at 21


def test_forget_idle_keeps_a_bounded_cache_in_bytes_consistent() -> None:
    cache: LRU[str, bytes] = LRU(100, max_bytes=1 << 20, size=lambda _k, v: len(v))
    cache.forget_idle(0.0, 5.0, 100)
    cache["old"], cache["new"] = b"x" * 100, b"y" * 10
    cache.forget_idle(5.0, 5.0, 100)
    cache["newer"] = b"z" * 7
    assert cache.forget_idle(10.0, 5.0, 100) == 2 and list(cache) == ["newer"] and cache.held_bytes == 7


def test_forget_idle_is_exact_when_a_hot_key_is_hit_again_and_again() -> None:
    """A key hit on every request (a tools schema's count) adds a touch each time but holds one entry: what was idle
    still goes, up to the key that was the most recent at the mark, while that key was not used since."""
    cache: LRU[str, int] = LRU(100)
    cache["hot"] = 0
    for key in "abc":
        cache[key] = 1
    cache.forget_idle(0.0, 10.0, 100)  # marks c, the most recent
    for _ in range(50):
        cache.get("hot")
    cache["d"] = 2
    assert cache.forget_idle(10.0, 10.0, 100) == 3 and list(cache) == ["hot", "d"]  # a, b, c; touches alone: none
    cache.forget_idle(11.0, 10.0, 100)  # marks d
    cache.get("d")  # the marked key used: the count of touches is the bound again
    assert cache.forget_idle(21.0, 10.0, 100) == 1 and list(cache) == ["d"]
