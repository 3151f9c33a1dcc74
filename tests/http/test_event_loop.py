"""Nothing blocks the event loop: rewrites and store writes run in worker threads; a session's requests take turns.

Each test holds a rewrite (a step waiting on an event) or the database (another connection's write lock) and checks
what the proxy still answers meanwhile. A guard releases what is held after a while, so a proxy that blocks its
loop fails the test (what was held was released by the guard, not by the test) instead of hanging the suite.
"""

from __future__ import annotations

import asyncio
import json
import sqlite3
import threading
from pathlib import Path
from typing import Any

import aiohttp
from aiohttp.test_utils import TestServer

from proxy import appkeys
from proxy.context import RequestContext
from proxy.rewrite.steps import default_steps
from tests.conftest import MakeProxy, base_url, config_for
from tests.fake_upstream import FakeUpstream

GUARD_S = 20.0


class HeldStep:
    """A pipeline step that holds requests whose last message says "hold" until released (or the guard fires)."""

    name = "held"

    def __init__(self) -> None:
        self.release = threading.Event()
        self.entered = threading.Event()
        self.guard_fired = False
        self.lock = threading.Lock()
        self.inside: dict[str, int] = {}
        self.overlapped = False
        self.order: list[str] = []

    def apply(self, messages: list[dict[str, Any]], ctx: RequestContext) -> list[dict[str, Any]]:
        session = ctx.measurement.session.session_id if ctx.measurement else "?"
        with self.lock:
            self.inside[session] = self.inside.get(session, 0) + 1
            self.overlapped |= self.inside[session] > 1
            self.order.append(str(messages[-1]["content"]))
        try:
            if messages[-1]["content"].startswith("hold"):
                self.entered.set()
                if not self.release.wait(GUARD_S):
                    self.guard_fired = True
        finally:
            with self.lock:
                self.inside[session] -= 1
        return messages


async def chat(http: aiohttp.ClientSession, proxy: TestServer, content: str, session: str) -> int:
    body = {"model": "m", "messages": [{"role": "user", "content": content}]}
    async with http.post(base_url(proxy) + "/v1/chat/completions", json=body, headers={"X-Ruyi-Session": session}) as resp:
        await resp.read()
        return resp.status


async def until(event: threading.Event) -> None:
    for _ in range(int(GUARD_S / 0.01)):
        if event.is_set():
            return
        await asyncio.sleep(0.01)
    raise AssertionError("never happened")


async def test_healthz_and_other_sessions_are_answered_while_a_request_is_rewritten(make_proxy: MakeProxy, upstream: TestServer) -> None:
    held = HeldStep()
    cfg = config_for(base_url(upstream) + "/v1")
    proxy = await make_proxy(config=cfg, steps=[held, *default_steps(cfg)])
    async with aiohttp.ClientSession() as http:
        slow = asyncio.ensure_future(chat(http, proxy, "hold me", "session-a"))
        await until(held.entered)
        async with http.get(base_url(proxy) + "/healthz") as resp:
            assert resp.status == 200
        assert await chat(http, proxy, "another session", "session-b") == 200
        assert not slow.done()
        held.release.set()
        assert await slow == 200
    assert not held.guard_fired, "the loop waited for the held rewrite"


async def test_requests_of_one_session_take_turns_in_arrival_order(make_proxy: MakeProxy, upstream: TestServer) -> None:
    held = HeldStep()
    cfg = config_for(base_url(upstream) + "/v1")
    proxy = await make_proxy(config=cfg, steps=[held, *default_steps(cfg)])
    async with aiohttp.ClientSession() as http:
        first = asyncio.ensure_future(chat(http, proxy, "hold the first", "same"))
        await until(held.entered)
        later = []
        for i in range(3):
            later.append(asyncio.ensure_future(chat(http, proxy, f"then {i}", "same")))
            await asyncio.sleep(0.05)  # arrival order (not timing) is what the turns follow
        assert await chat(http, proxy, "elsewhere", "other") == 200  # another session does not wait
        assert held.order == ["hold the first", "elsewhere"]  # the session's next requests wait their turn
        held.release.set()
        assert await asyncio.gather(first, *later) == [200] * 4
    assert held.order[2:] == ["then 0", "then 1", "then 2"]
    assert not held.overlapped and not held.guard_fired


def with_long_output(content: str) -> list[dict[str, Any]]:
    """A request whose tool output is truncated on arrival: a decision, written durably before forwarding."""
    call = {"id": "call_1", "type": "function", "function": {"name": "bash", "arguments": json.dumps({"command": "cat big.log"})}}
    return [
        {"role": "user", "content": "task"},
        {"role": "assistant", "content": None, "tool_calls": [call]},
        {"role": "tool", "tool_call_id": "call_1", "content": "\n".join(f"line {n} of output" for n in range(400))},
        {"role": "user", "content": content},
    ]


def locked(db: Path) -> tuple[sqlite3.Connection, threading.Event, threading.Event]:
    """Another process holding the database's write lock (like `ruyi store vacuum`), released by a guard after
    GUARD_S if the test never gets to release it (the second event says the guard did)."""
    other = sqlite3.connect(db, isolation_level=None, check_same_thread=False)
    other.execute("BEGIN IMMEDIATE")
    released, released_by_guard = threading.Event(), threading.Event()

    def guard() -> None:
        if not released.wait(GUARD_S):
            released_by_guard.set()
            other.execute("ROLLBACK")

    threading.Thread(target=guard, daemon=True).start()
    return other, released, released_by_guard


async def test_a_store_locked_by_another_process_never_blocks_the_loop(make_proxy: MakeProxy, fake: FakeUpstream, data_dir: Path) -> None:
    proxy = await make_proxy(pruning={"strategies": {"truncation": {"max_tool_output_tokens": 150}}})
    async with aiohttp.ClientSession() as http:
        assert await chat(http, proxy, "warm up", "s") == 200
        other, released, released_by_guard = locked(data_dir / "ruyi.db")
        body = {"model": "m", "messages": with_long_output("a new message to store")}
        waiting = asyncio.ensure_future(http.post(base_url(proxy) + "/v1/chat/completions", json=body, headers={"X-Ruyi-Session": "s"}))
        for _ in range(50):  # let it reach the durable write of its decision, which waits for the lock
            await asyncio.sleep(0.01)
        async with http.get(base_url(proxy) + "/healthz") as resp:
            assert resp.status == 200
        assert not waiting.done()  # still waiting for the database, before forwarding
        released.set()
        other.execute("ROLLBACK")
        resp = await waiting
        assert resp.status == 200
        assert "[ruyi:" in json.loads(fake.last().body)["messages"][2]["content"]  # its decision went out, stored
        assert not released_by_guard.is_set()
        async with http.get(base_url(proxy) + "/ruyi/v1/stats") as resp:
            assert (await resp.json())["failed_open"] == {}
    stored = sqlite3.connect(data_dir / "ruyi.db").execute("SELECT requests FROM sessions WHERE session_id = 's'").fetchone()
    assert stored == (2,)
    assert json.loads(fake.last().body)["messages"][-1]["content"] == "a new message to store"


async def test_a_request_that_decides_nothing_is_not_held_by_a_locked_store(make_proxy: MakeProxy, fake: FakeUpstream, data_dir: Path) -> None:
    """Only decisions must be durable before forwarding: a request that decided nothing goes on at once, and what
    it changed (its session's chain and facts) is written by the background writer once the lock is gone."""
    proxy = await make_proxy()
    async with aiohttp.ClientSession() as http:
        assert await chat(http, proxy, "warm up", "s") == 200
        other, released, released_by_guard = locked(data_dir / "ruyi.db")
        assert await chat(http, proxy, "nothing to decide", "s") == 200  # answered while the database is still locked
        assert json.loads(fake.last().body)["messages"][-1]["content"] == "nothing to decide"
        released.set()
        other.execute("ROLLBACK")
        assert not released_by_guard.is_set()
        await proxy.app[appkeys.MEASURER].drain()
    stored = sqlite3.connect(data_dir / "ruyi.db").execute("SELECT requests FROM sessions WHERE session_id = 's'").fetchone()
    assert stored == (2,)


async def test_the_layout_and_snapshot_steps_never_read_the_keepers_store_on_the_loop(make_proxy: MakeProxy, upstream: TestServer) -> None:
    """A small request (rewritten on the loop when it needs memory only) whose layout reads the agent's notebook and
    anchors, and a sub-agent's first request (its parent's snapshot): every read of the keeper's store is in a worker."""
    proxy = await make_proxy()
    keeper = proxy.app[appkeys.KEEPER]
    loop_thread, reads_on_loop, reads = threading.current_thread(), [], []
    reading = keeper.db.reading

    def watched() -> Any:
        reads.append(1)
        if threading.current_thread() is loop_thread:
            reads_on_loop.append(1)
        return reading()

    keeper.db.reading = watched  # type: ignore[method-assign]
    async with aiohttp.ClientSession() as http:
        for content in ("first", "second", "third"):
            assert await chat(http, proxy, content, "parent") == 200
        body = {"model": "m", "messages": [{"role": "user", "content": "a child"}]}
        headers = {"X-Ruyi-Session": "child", "X-Ruyi-Parent": "parent"}
        async with http.post(base_url(proxy) + "/v1/chat/completions", json=body, headers=headers) as resp:
            assert resp.status == 200
    assert reads  # the steps did read the store
    assert reads_on_loop == []
    assert proxy.app[appkeys.MEASURER].offload.where["on_loop"] >= 1  # once held, the parent's later requests stay on the loop
