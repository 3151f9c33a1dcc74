"""Work off the event loop: worker threads for rewrites and store I/O, and per-session turns between requests.

Why threads and not processes: the pruner keeps each session's last analysis and the token counter its counts,
so a request costs its new messages only; a process pool would start every request cold (and pickle it). Why not
aiosqlite: the session registry's logic reads the store in the middle of in-memory work (a session missing from
memory is read back while a request is resolved); running each registry call whole in a worker thread, under the
registry's one lock, keeps that logic synchronous and in one place, and the flush before forwarding is awaited
like any other call.
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import functools
import threading
from collections import Counter
from collections.abc import Callable, Hashable
from concurrent.futures import Future, ThreadPoolExecutor
from types import TracebackType
from typing import Any, TypeVar

import structlog

from memory.store.locks import held_longest
from proxy.dialects.errors import ProxyError

T = TypeVar("T")
log = structlog.get_logger(__name__)
TURN_WAIT_S = 300.0
"""Longest a request waits for its session's previous one to be rewritten (a rewrite takes milliseconds to seconds)."""


class Turn:
    """One request's turn in its session: entered when the request is resolved, in that order. ``with turn:``
    waits for the session's previous request to finish its rewrite (and its durable write), and lets the next
    one go on exit, so decisions stay sticky while other sessions' requests never wait on this one."""

    def __init__(self, turns: SessionTurns, key: Hashable, before: threading.Event | None) -> None:
        self._turns, self._key, self._before = turns, key, before
        self._mine = threading.Event()
        self.release: Callable[[], None] | None = None
        """Called once when the turn ends: the session's lock in the store, when replicas share it (store.shared)."""

    def __enter__(self) -> Turn:
        if self._before is not None and not self._before.wait(TURN_WAIT_S):
            log.warning("session_turn_overdue", waited_s=TURN_WAIT_S)  # a bug upstream of here; never wait forever
        return self

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None) -> None:
        self.end()

    def ready(self) -> bool:
        """Whether entering would not wait: the session's previous request is done (the loop may then go on)."""
        return self._before is None or self._before.is_set()

    def end(self) -> None:
        self._mine.set()
        self._turns.left(self._key, self._mine)
        release, self.release = self.release, None
        if release is not None:
            release()


class SessionTurns:
    """The last turn taken per session (only sessions with a request in flight are kept)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._last: dict[Hashable, threading.Event] = {}

    def enter(self, key: Hashable) -> Turn:
        """A turn after every turn taken so far for ``key`` (call it where requests are ordered: at resolve)."""
        turn = Turn(self, key, None)
        with self._lock:
            turn._before = self._last.get(key)  # set under the lock, read only by the turn itself
            self._last[key] = turn._mine
        return turn

    def left(self, key: Hashable, done: threading.Event) -> None:
        with self._lock:
            if self._last.get(key) is done:
                del self._last[key]

    def __len__(self) -> int:
        return len(self._last)


STALL_POLL_S = 0.1
"""How often a wait for a worker thread looks whether the store is stuck (and how long it waits once it is)."""


def _settle(waiting: asyncio.Future[Any], done: Future[Any]) -> None:
    """On the loop: a worker thread's call has returned; its result (or exception) ends the wait, unless the wait
    already ended (cancelled, or given up on a stuck store)."""
    if waiting.done():
        return
    if done.cancelled():
        waiting.cancel()
    elif (exc := done.exception()) is not None:
        waiting.set_exception(exc)
    else:
        waiting.set_result(done.result())


def _settle_soon(loop: asyncio.AbstractEventLoop, waiting: asyncio.Future[Any], done: Future[Any]) -> None:
    """In the worker thread, as its call returns: `_settle` on the loop."""
    loop.call_soon_threadsafe(_settle, waiting, done)


LARGE_BYTES = 4 << 20
"""A body this large (bytes as received) is a large body: its rewrite takes its turn among the others (``LARGE_AT_ONCE``)."""
LARGE_AT_ONCE = 2
"""Large bodies rewritten at once; the others wait on the loop, holding no thread and no lock. Their rewrites are the
interpreter's work (parsing, counting, redacting, hashing tens of megabytes) and one interpreter runs one thread at a
time: six 30 MiB bodies rewritten at once took as long in all, each store write among them waited its turn behind the
others for seconds, long enough to look like a frozen disk, and all six went through unpruned
(``bench/serve/body_memory.py --mib 30 --at-once 6``: 6 given up on before, 0 now, the peak 3.4 → 2.4× the bodies)."""


def stuck_after(deadline_ms: int) -> float:
    """When a store lock held is a stuck store: 3× ``store.deadline_ms`` (every wait of SQLite's under a lock is bounded
    by it), at least 2 s (a busy machine)."""
    return max(3 * deadline_ms / 1000, 2.0)


class StoreStalled(ProxyError):
    """The store has not answered for longer than its bound (a lock of it held that long: a frozen or hung disk): the
    caller stops waiting (a request goes through unmodified; the admin API answers 503); the work goes on in its thread."""

    def __init__(self) -> None:
        super().__init__(503, "store_stalled", "Ruyi's store is not answering (its disk is stalled); try again shortly")


class Offload:
    """A pool of worker threads shared by the app: rewrites, token counts, JSON of large bodies, store calls."""

    def __init__(self, threads: int, stuck_s: float | None = None) -> None:
        self._pool = ThreadPoolExecutor(threads, thread_name_prefix="ruyi-worker")
        self.turns = SessionTurns()
        self.where: dict[str, int] = {"on_loop": 0, "in_thread": 0}
        """Where requests were rewritten since start-up (counted on the loop): small ones of warm sessions on the loop."""
        self.why: Counter[str] = Counter()
        """Why requests were rewritten in a worker thread (``_plan_on_loop``'s reasons), since start-up."""
        self.stuck_s = stuck_s
        """A store lock held longer than this is a stuck store (``held_longest``); None: wait for the store however long."""
        self.stalled = 0
        """Waits given up because the store was stuck (``store_stalled`` in GET /ruyi/v1/stats)."""
        self._large = asyncio.Semaphore(LARGE_AT_ONCE)  # bound to the loop on its first wait
        self.large_waited = 0
        """Large bodies that waited for their turn (``large_waited`` in GET /ruyi/v1/stats)."""

    def large(self, size: int) -> contextlib.AbstractAsyncContextManager[Any]:
        """A turn among the large bodies' rewrites (at most ``LARGE_AT_ONCE`` at once), or none for a smaller body."""
        if size < LARGE_BYTES:
            return contextlib.nullcontext()
        if self._large.locked():
            self.large_waited += 1
        return self._large

    def stuck(self) -> bool:
        return self.stuck_s is not None and held_longest() > self.stuck_s

    async def run(self, fn: Callable[..., T], *args: Any, bounded: bool = True) -> T:
        """``fn(*args)`` in a worker thread (with the caller's context variables), awaited. ``bounded``: while it has
        not returned, once the store is stuck (``stuck``) the wait ends with `StoreStalled` (``fn`` still runs, later);
        work that never touches the store says ``bounded=False``."""
        call = functools.partial(contextvars.copy_context().run, fn, *args)
        if not bounded or self.stuck_s is None:
            return await asyncio.get_running_loop().run_in_executor(self._pool, call)
        loop = asyncio.get_running_loop()
        waiting: asyncio.Future[T] = loop.create_future()
        work = self._pool.submit(call)
        work.add_done_callback(functools.partial(_settle_soon, loop, waiting))  # not a closure: no cell of this frame
        watch = loop.call_later(STALL_POLL_S, self._watch, waiting, fn)  # one timer, re-armed: no wait per slice
        try:
            return await waiting
        except asyncio.CancelledError:
            work.cancel()  # not started yet: never started
            raise
        finally:
            watch.cancel()
            # A wait that ends in an exception (`StoreStalled`, or the call's own) holds it, its traceback holds this
            # frame, and the frame held the wait (and the thread's future, whose callback holds the wait): a cycle only
            # the collector's rare full pass frees, keeping ``args`` (a request's body, tens of MB) long after the
            # thread returned. Without these names, reference counts free it all once the thread is done.
            del waiting, work

    def background(self, fn: Callable[[], Any]) -> None:
        """``fn()`` in a worker thread, not awaited (its own errors are its to handle)."""
        self._pool.submit(contextvars.copy_context().run, fn)

    def _watch(self, waiting: asyncio.Future[Any], fn: Callable[..., Any]) -> None:
        """Every ``STALL_POLL_S`` while a bounded call runs: once the store is stuck, its wait ends with `StoreStalled`."""
        if waiting.done():
            return
        if not self.stuck():
            asyncio.get_running_loop().call_later(STALL_POLL_S, self._watch, waiting, fn)
            return
        self.stalled += 1
        log.warning("store_stalled_wait_given_up", fn=getattr(fn, "__name__", "call"), held_s=round(held_longest(), 1))
        waiting.set_exception(StoreStalled())

    def close(self) -> None:
        self._pool.shutdown(wait=False, cancel_futures=True)
