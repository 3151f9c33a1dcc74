"""Small requests of sessions in memory are rewritten on the event loop: the same bytes go out as from a worker thread."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import aiohttp

from tests.conftest import MakeProxy, base_url
from tests.fake_upstream import FakeUpstream
from tests.traces import load, requests_of, trace_files

WINDOW = {"models": {"gpt-4o*": 8000}}  # sticky decisions and batches along the trace


async def replay(proxy: Any, requests: list[list[dict[str, Any]]]) -> tuple[list[dict[str, str]], dict[str, Any]]:
    """Send a trace's requests one after the other; the Ruyi headers of each answer, and the proxy's stats."""
    headers = []
    async with aiohttp.ClientSession() as http:
        for messages in requests:
            async with http.post(
                base_url(proxy) + "/v1/chat/completions", json={"model": "gpt-4o", "messages": messages}, headers={"X-Ruyi-Agent": "a"}
            ) as resp:
                await resp.read()
                assert resp.status == 200
                headers.append({k: v for k, v in resp.headers.items() if k.startswith("X-Ruyi-") and k != "X-Ruyi-Request-Id"})
        async with http.get(base_url(proxy) + "/ruyi/v1/stats") as resp:
            return headers, await resp.json()


async def test_on_the_loop_or_in_a_thread_the_same_bytes_go_out(make_proxy: MakeProxy, fake: FakeUpstream, tmp_path: Path) -> None:
    requests = requests_of(load(trace_files()[3])["messages"])
    runs = []
    for name, limit in (("thread", 0), ("loop", 1 << 20)):
        fake.received.clear()
        # archives off: recall searches raw turns the background writer keeps, which differ with its timing
        proxy = await make_proxy(
            window=WINDOW, server={"loop_rewrite_bytes": limit}, store={"data_dir": str(tmp_path / name)}, archive={"enabled": False}
        )
        headers, stats = await replay(proxy, requests)
        sessions = {h.pop("X-Ruyi-Session") for h in headers}
        assert len(sessions) == 1
        runs.append(([r.body for r in fake.received if r.path == "/v1/chat/completions"], headers, stats))
    (thread_bodies, thread_headers, thread_stats), (loop_bodies, loop_headers, loop_stats) = runs
    assert thread_stats["rewrites"] == {"on_loop": 0, "in_thread": len(requests)}
    # in a thread: the agent's first request (is anything of it stored?), those whose decisions are written first, and
    # those that find the keeper's held copy of the agent's memory expired (HELD_S: how many depends on the machine's pace)
    assert loop_stats["rewrites"]["on_loop"] >= 1 and loop_stats["rewrites"]["in_thread"] >= 10
    assert loop_stats["rewrites"]["on_loop"] + loop_stats["rewrites"]["in_thread"] == len(requests)
    assert loop_bodies == thread_bodies  # byte for byte
    assert loop_headers == thread_headers
    assert any("[ruyi:" in json.dumps(json.loads(b)["messages"]) for b in loop_bodies)
    assert loop_stats["failed_open"] == thread_stats["failed_open"] == {}
