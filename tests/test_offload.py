"""Work off the event loop (proxy/offload.py): what a wait given up on a stuck store leaves behind."""

from __future__ import annotations

import asyncio
import gc
import threading
import weakref

import pytest

from memory.store.locks import WatchedLock
from proxy.offload import LARGE_AT_ONCE, LARGE_BYTES, Offload, StoreStalled


class Body:
    """Stands for a request's parsed body: what the worker's call was given."""


async def test_a_wait_given_up_on_a_stuck_store_lets_go_of_the_call_once_it_returns() -> None:
    """Issue 27 (memory after large bodies): six 30 MB bodies given up on a store held for seconds kept their bodies
    (~700 MB) long after their threads returned: the given-up wait's exception held the waiting frame, which held the
    thread's future, whose callback held the wait: a cycle only the collector's rare full pass would free."""
    offload = Offload(2, stuck_s=0.05)
    lock, go = WatchedLock(), threading.Event()
    body = Body()
    gone = weakref.ref(body)

    def rewrite(what: Body) -> str:
        with lock:  # the store held past stuck_s: the wait is given up, the work goes on
            go.wait(5)
        return "done"

    gc.disable()  # freed by reference counts alone, not a collection that may or may not come
    try:
        with pytest.raises(StoreStalled):
            await offload.run(rewrite, body)
        del body
        go.set()
        for _ in range(200):  # the thread returns; its future's callback runs on the loop
            await asyncio.sleep(0.01)
            if gone() is None:
                break
        assert gone() is None, gc.get_referrers(gone())
    finally:
        gc.enable()
        go.set()
        offload.close()


async def test_a_call_that_raises_in_its_thread_lets_go_of_its_arguments() -> None:
    """The same for a rewrite that fails in its worker thread (fail open): its exception holds the thread's frames and
    the waiting one; nothing holds it once the caller has handled it."""
    offload = Offload(2, stuck_s=5.0)
    body = Body()
    gone = weakref.ref(body)

    def rewrite(what: Body) -> str:
        raise ValueError("a step broke")

    gc.disable()
    try:
        with pytest.raises(ValueError):
            await offload.run(rewrite, body)
        del body
        await asyncio.sleep(0.01)
        assert gone() is None, gc.get_referrers(gone())
    finally:
        gc.enable()
        offload.close()


async def test_large_bodies_are_rewritten_a_few_at_a_time_and_small_ones_never_wait() -> None:
    """Issue 27: six 30 MiB bodies rewritten at once all went through unpruned (each store write among them waited
    behind the others' interpreter work past the stuck-store bound). Large rewrites take turns; the others wait on the
    loop, holding no thread; a small body never waits for them."""
    offload = Offload(8, stuck_s=5.0)
    running, most, go, count = [0], [0], threading.Event(), threading.Lock()

    def rewrite() -> str:
        with count:
            running[0] += 1
            most[0] = max(most[0], running[0])
        go.wait(10)
        with count:
            running[0] -= 1
        return "done"

    async def one(size: int) -> str:
        async with offload.large(size):
            return await offload.run(rewrite)

    try:
        large = [asyncio.ensure_future(one(LARGE_BYTES)) for _ in range(6)]
        for _ in range(200):
            await asyncio.sleep(0.01)
            if running[0] == LARGE_AT_ONCE:
                break
        await asyncio.sleep(0.1)
        assert running[0] == LARGE_AT_ONCE and offload.large_waited == 6 - LARGE_AT_ONCE
        small = asyncio.ensure_future(one(LARGE_BYTES - 1))
        for _ in range(200):  # a small body runs beside them
            await asyncio.sleep(0.01)
            if running[0] == LARGE_AT_ONCE + 1:
                break
        assert running[0] == LARGE_AT_ONCE + 1
        go.set()
        assert await asyncio.gather(small, *large) == ["done"] * 7
        assert most[0] == LARGE_AT_ONCE + 1 and offload.large_waited == 6 - LARGE_AT_ONCE
    finally:
        go.set()
        offload.close()
