"""Ruyi's own API (proxy/api/admin.py) end to end: sessions, reports in JSON and markdown, refs, stats, forgetting."""

from __future__ import annotations

import asyncio
import re
import threading
from typing import Any

import aiohttp

from proxy import appkeys
from tests.conftest import MakeProxy, base_url
from tests.fake_upstream import FakeUpstream
from tests.rewrite.test_decisions import WINDOW, rereads, send

AGENT = {"X-Ruyi-Agent": "a"}


async def get(proxy: Any, path: str, headers: dict[str, str] = AGENT) -> tuple[int, Any]:
    async with aiohttp.ClientSession() as http, http.get(base_url(proxy) + path, headers=headers) as resp:
        body = await resp.json() if resp.content_type == "application/json" else await resp.text()
        return resp.status, body


async def test_sessions_reports_refs_and_stats_of_a_pruned_session(make_proxy: MakeProxy, fake: FakeUpstream) -> None:
    proxy = await make_proxy(window=WINDOW, pruning={"economic": False})
    resp = await send(proxy, rereads(13))
    session = resp.headers["X-Ruyi-Session"]
    status, listed = await get(proxy, "/ruyi/v1/sessions")
    assert status == 200 and [s["session_id"] for s in listed["sessions"]] == [session]
    status, one = await get(proxy, f"/ruyi/v1/sessions/{session}")
    assert status == 200 and one["session_id"] == session and one["requests"] == 1
    status, report = await get(proxy, f"/ruyi/v1/sessions/{session}/report")
    assert status == 200 and report["summary"] and report["reports"][-1]["strategies"]
    status, text = await get(proxy, f"/ruyi/v1/sessions/{session}/report?format=markdown")
    assert status == 200 and isinstance(text, str) and session in text
    forwarded = fake.last().body.decode()
    ref = re.search(r"ref (r[0-9a-f]+)", forwarded)
    assert ref, "a placeholder names its ref"
    status, original = await get(proxy, f"/ruyi/v1/refs/{ref.group(1)}")
    assert status == 200 and original["original"] in [m["content"] for m in rereads(13) if m["role"] == "tool"]
    status, stats = await get(proxy, "/ruyi/v1/stats")
    assert status == 200 and {"failed_open", "store_queue", "upstream_pool"} <= set(stats)


async def test_unknown_ids_are_404_in_openai_shape_and_another_agent_sees_nothing(make_proxy: MakeProxy) -> None:
    proxy = await make_proxy(window=WINDOW)
    session = (await send(proxy, rereads(3))).headers["X-Ruyi-Session"]
    for path in ("/ruyi/v1/sessions/nope", "/ruyi/v1/sessions/nope/report", "/ruyi/v1/refs/r0000"):
        status, body = await get(proxy, path)
        assert status == 404 and body["error"]["code"] in ("session_not_found", "ref_not_found")
    status, body = await get(proxy, f"/ruyi/v1/sessions/{session}", {"X-Ruyi-Agent": "b"})
    assert status == 404
    status, listed = await get(proxy, "/ruyi/v1/sessions", {"X-Ruyi-Agent": "b"})
    assert listed["sessions"] == []


async def test_forgetting_a_session_removes_it_and_says_what(make_proxy: MakeProxy) -> None:
    proxy = await make_proxy(window=WINDOW, pruning={"economic": False})
    session = (await send(proxy, rereads(13))).headers["X-Ruyi-Session"]
    async with aiohttp.ClientSession() as http:
        async with http.delete(base_url(proxy) + f"/ruyi/v1/sessions/{session}", headers=AGENT) as resp:
            assert resp.status == 200
            removed = (await resp.json())["removed"]
    assert any(removed.values())
    status, _ = await get(proxy, f"/ruyi/v1/sessions/{session}")
    assert status == 404


async def test_forgetting_a_session_waits_in_a_worker_thread_while_the_loop_answers_others(make_proxy: MakeProxy) -> None:
    """The store's delete runs off the event loop: while it waits for the registry (held here by another thread, as a
    long sweep would), the proxy still answers; once free, the delete completes."""
    proxy = await make_proxy(window=WINDOW, pruning={"economic": False})
    session = (await send(proxy, rereads(5))).headers["X-Ruyi-Session"]
    registry = proxy.app[appkeys.MEASURER].sessions
    held, release = threading.Event(), threading.Event()

    def hold() -> None:
        with registry.lock:  # type: ignore[attr-defined]
            held.set()
            release.wait(10)

    holder = threading.Thread(target=hold)
    holder.start()
    try:
        assert held.wait(5)
        async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=10)) as http:
            deleting = asyncio.ensure_future(http.delete(base_url(proxy) + f"/ruyi/v1/sessions/{session}", headers=AGENT))
            await asyncio.sleep(0.2)
            assert not deleting.done()  # waiting for the registry, in a worker thread
            async with http.get(base_url(proxy) + "/healthz") as resp:
                assert resp.status == 200  # the loop is free meanwhile
            release.set()
            resp = await asyncio.wait_for(deleting, 10)
            assert resp.status == 200 and any((await resp.json())["removed"].values())
            resp.release()
    finally:
        release.set()
        holder.join(10)
