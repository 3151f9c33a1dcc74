"""A stalled store (another connection holding the database with BEGIN EXCLUSIVE): requests are still answered, each
store write they need bounded by ``store.deadline_ms``; the sessions API answers; what waits lands once it is let go."""

from __future__ import annotations

import asyncio
import json
import sqlite3
from pathlib import Path
from typing import Any

import aiohttp

from memory.store.sqlite_store import SQLiteStore
from proxy import appkeys
from tests.conftest import MakeProxy, base_url
from tests.fake_upstream import FakeUpstream
from tests.rewrite.test_decisions import WINDOW, rereads

REQUESTS = 16


async def stats(proxy: Any) -> dict[str, Any]:
    async with aiohttp.ClientSession() as http:
        async with http.get(base_url(proxy) + "/ruyi/v1/stats") as r:
            return dict(await r.json())


async def send(http: aiohttp.ClientSession, proxy: Any, agent: str, messages: list[dict[str, Any]]) -> tuple[int, str]:
    async with http.post(
        base_url(proxy) + "/v1/chat/completions",
        json={"model": "gpt-4o", "messages": messages},
        headers={"X-Ruyi-Agent": agent, "X-Request-Id": f"{agent}-{len(messages)}"},
    ) as r:
        await r.read()
        return r.status, r.headers.get("X-Ruyi-Session", "")


def hold(db: Path) -> sqlite3.Connection:
    """Another process holding the database: every write waits for it (reads go on, WAL)."""
    other = sqlite3.connect(db, isolation_level=None)
    other.execute("BEGIN EXCLUSIVE")
    other.execute("INSERT INTO model_calibration VALUES ('held', 1.0, 0)")  # it really wrote: the lock is the writer's
    return other


async def settled(proxy: Any) -> dict[str, Any]:
    """Polled (bounded) until the writers have nothing waiting: what was queued while the store was held has landed."""
    for _ in range(400):
        now = await stats(proxy)
        if now["store_writes"]["unsaved"] == 0 and now["store_queue"]["pending"] == 0 and not any(now["in_flight"].values()):
            return now
        await asyncio.sleep(0.05)
    raise AssertionError(f"what waited never landed: {now}")


async def test_a_held_database_never_holds_requests_and_what_waits_lands_after(make_proxy: MakeProxy, fake: FakeUpstream, data_dir: Path) -> None:
    # busy_timeout_ms as shipped: without a deadline each of these writes would wait 5 s, one after the other
    proxy = await make_proxy(window=WINDOW, pruning={"economic": False}, store={"deadline_ms": 200})
    async with aiohttp.ClientSession() as http:
        assert (await send(http, proxy, "warm", rereads(2)))[0] == 200
        other = hold(data_dir / "ruyi.db")
        try:
            # sixteen agents at once, each over the prune tier: each decides, and needs a durable write first
            answers = await asyncio.gather(*(send(http, proxy, f"agent-{i}", rereads(13)) for i in range(REQUESTS)))
            assert [status for status, _ in answers] == [200] * REQUESTS
            assert all(session for _, session in answers)
            raw = json.dumps({"model": "gpt-4o", "messages": rereads(13)}).encode()
            assert sum(r.body == raw for r in fake.received[-REQUESTS:]) == REQUESTS, "failed open: the clients' own bytes"
            during = await stats(proxy)
            assert during["store_deadline"]["stalled"] is True and during["store_deadline"]["missed"] >= 1
            assert during["failed_open"]["store_write"] == REQUESTS
            # the sessions API answers too (reads go on beside the held database)
            async with http.get(base_url(proxy) + "/ruyi/v1/sessions", headers={"X-Ruyi-Agent": "agent-0"}) as r:
                assert r.status == 200
        finally:
            other.execute("ROLLBACK")
            other.close()
        after = await settled(proxy)
        assert after["store_deadline"]["stalled"] is False  # ended by the writer's retry
        assert after["store_queue"]["dropped_by_reason"].get("store_busy", 0) == 0, "nothing given up"
        assert after["store_queue"]["retried"] >= 1
        # the store is usable again: the next request's rewrite goes out, decided and kept
        status, session = await send(http, proxy, "agent-0", rereads(13))
        assert status == 200 and fake.last().json["messages"] != rereads(13)
    await proxy.app[appkeys.MEASURER].drain()
    store = SQLiteStore(data_dir / "ruyi.db")
    try:  # every session and audit record queued while the database was held is in the file now
        assert all(store.session_ids(f"agent-{i}") for i in range(REQUESTS))
        assert all(store.audit(f"agent-{i}", s) for i, (_, s) in enumerate(answers))
    finally:
        store.close()
