"""Know each request through the proxy: headers, sessions API, Ollama windows and num_ctx, calibration."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import aiohttp
import ollama
import openai

from proxy import appkeys
from tests.conftest import MakeProxy, base_url
from tests.fake_upstream import FakeUpstream
from tests.traces import load, requests_of, trace_files

TASK = [{"role": "system", "content": "You are a coding agent."}, {"role": "user", "content": "Fix the bug in parser.py"}]


async def chat(proxy: Any, messages: list[dict[str, Any]], headers: dict[str, str] | None = None, **kw: Any) -> Any:
    client = openai.AsyncOpenAI(base_url=base_url(proxy) + "/v1", api_key="k", default_headers=headers or {})
    return await client.chat.completions.with_raw_response.create(model="gpt-4o", messages=messages, **kw)  # type: ignore[arg-type]


async def get_json(proxy: Any, path: str, headers: dict[str, str] | None = None) -> tuple[int, Any]:
    async with aiohttp.ClientSession() as http:
        async with http.get(base_url(proxy) + path, headers=headers or {}) as resp:
            return resp.status, await resp.json()


async def test_headers_say_session_tokens_tier_and_window(make_proxy: MakeProxy) -> None:
    proxy = await make_proxy()
    raw = await chat(proxy, TASK)
    h = raw.headers
    assert h["x-ruyi-session"] and h["x-ruyi-tier"] == "expanded"
    assert int(h["x-ruyi-tokens-before"]) == int(h["x-ruyi-tokens-after"]) > 10
    assert h["x-ruyi-window"] == "128000"  # gpt-4o in litellm's bundled map
    follow = await chat(proxy, [*TASK, {"role": "assistant", "content": "Looking."}, {"role": "user", "content": "go on"}])
    assert follow.headers["x-ruyi-session"] == h["x-ruyi-session"]
    rerun = await chat(proxy, [*TASK, {"role": "assistant", "content": "Other start."}, {"role": "user", "content": "go"}])
    assert rerun.headers["x-ruyi-session"] != h["x-ruyi-session"]  # two runs of one task share only [system, task]


async def test_sessions_api_is_scoped_to_the_agent(make_proxy: MakeProxy) -> None:
    proxy = await make_proxy()
    a = await chat(proxy, TASK, {"X-Ruyi-Agent": "alice"})
    await chat(proxy, TASK, {"X-Ruyi-Agent": "bob"})
    sid = a.headers["x-ruyi-session"]
    status, listing = await get_json(proxy, "/ruyi/v1/sessions", {"X-Ruyi-Agent": "alice"})
    assert status == 200 and [s["session_id"] for s in listing["sessions"]] == [sid]
    status, one = await get_json(proxy, f"/ruyi/v1/sessions/{sid}", {"X-Ruyi-Agent": "alice"})
    assert status == 200 and one["requests"] == 1 and one["window"] == 128000 and one["tier"] == "expanded"
    status, other = await get_json(proxy, f"/ruyi/v1/sessions/{sid}", {"X-Ruyi-Agent": "bob"})
    assert status == 404 and "error" in other


async def test_explicit_session_header_wins(make_proxy: MakeProxy) -> None:
    proxy = await make_proxy()
    first = await chat(proxy, TASK, {"X-Ruyi-Session": "my-session"})
    other = await chat(proxy, [{"role": "user", "content": "unrelated"}], {"X-Ruyi-Session": "my-session"})
    assert first.headers["x-ruyi-session"] == other.headers["x-ruyi-session"] == "my-session"


async def test_calibration_and_cached_tokens_from_upstream_usage(make_proxy: MakeProxy, fake: FakeUpstream) -> None:
    proxy = await make_proxy()
    raw = await chat(proxy, TASK, {"X-Ruyi-Agent": "cal"})
    estimate = int(raw.headers["x-ruyi-tokens-before"])
    fake.prompt_tokens, fake.cached_tokens = int(estimate * 1.2), 7
    raw = await chat(proxy, TASK, {"X-Ruyi-Agent": "cal"})
    _, one = await get_json(proxy, f"/ruyi/v1/sessions/{raw.headers['x-ruyi-session']}", {"X-Ruyi-Agent": "cal"})
    assert one["upstream_prompt_tokens"] == int(estimate * 1.2) and one["cached_tokens"] == 7
    assert one["calibration"] > 1.0
    again = await chat(proxy, TASK, {"X-Ruyi-Agent": "cal"})
    assert int(again.headers["x-ruyi-tokens-before"]) > estimate  # the ratio is applied to later estimates


async def test_ollama_window_from_show_and_num_ctx_ladder(make_proxy: MakeProxy, fake: FakeUpstream) -> None:
    fake.context_length = 65536
    proxy = await make_proxy("ollama")
    client = ollama.AsyncClient(host=base_url(proxy))
    small = [{"role": "user", "content": "hi"}]
    await client.chat(model="llama3.1:8b", messages=small, stream=False)
    assert fake.last("/api/chat").json["options"]["num_ctx"] == 8192
    big = [*small, {"role": "assistant", "content": "ok"}, {"role": "user", "content": "word " * 9000}]
    await client.chat(model="llama3.1:8b", messages=big, stream=False)
    assert fake.last("/api/chat").json["options"]["num_ctx"] == 16384
    back = [*big, {"role": "assistant", "content": "done"}, {"role": "user", "content": "thanks"}]
    await client.chat(model="llama3.1:8b", messages=back, stream=False)
    assert fake.last("/api/chat").json["options"]["num_ctx"] == 16384  # never lowered within the session
    await client.chat(model="llama3.1:8b", messages=small, options={"num_ctx": 2048, "temperature": 0}, stream=False)
    assert fake.last("/api/chat").json["options"] == {"num_ctx": 2048, "temperature": 0}  # the client's own wins
    shows = [r for r in fake.received if r.path == "/api/show"]
    assert len(shows) == 1  # the trained length is fetched once per model


async def test_ollama_openai_path_uses_the_server_default_window(make_proxy: MakeProxy) -> None:
    proxy = await make_proxy("ollama")
    raw = await chat(proxy, TASK)
    assert raw.headers["x-ruyi-window"] == "4096"


async def test_off_mode_measures_nothing(make_proxy: MakeProxy, fake: FakeUpstream) -> None:
    proxy = await make_proxy("ollama")
    async with aiohttp.ClientSession() as http:
        body = {"model": "m", "messages": [{"role": "user", "content": "hi"}], "stream": False}
        async with http.post(base_url(proxy) + "/api/chat", json=body, headers={"X-Ruyi-Mode": "off"}) as resp:
            assert "X-Ruyi-Session" not in resp.headers
    assert "options" not in fake.last("/api/chat").json


async def test_a_trace_replayed_through_the_proxy_is_one_session(make_proxy: MakeProxy) -> None:
    proxy = await make_proxy()
    trace = load(trace_files()[-1])
    sessions = set()
    async with aiohttp.ClientSession() as http:
        for messages in requests_of(trace["messages"]):
            body = json.dumps({"model": "gpt-4o", "messages": messages, "tools": trace.get("tools")})
            async with http.post(base_url(proxy) + "/v1/chat/completions", data=body, headers={"Content-Type": "application/json"}) as resp:
                assert resp.status == 200
                sessions.add(resp.headers["X-Ruyi-Session"])
    assert len(sessions) == 1


async def test_idle_counts_and_sessions_leave_memory_and_continue(make_proxy: MakeProxy, fake: FakeUpstream, data_dir: Path) -> None:
    """Issue 27 (memory flat after warm-up): with a store, token counts, pruning's classifications and sessions unused for
    ``sessions.idle_s`` leave memory (said in GET /ruyi/v1/stats); the conversation's next request reads its session back and continues it,
    its forwarded request the same as one kept in memory would have been."""
    proxy = await make_proxy(store={"data_dir": str(data_dir)}, sessions={"idle_s": 0.3})
    follow = [*TASK, {"role": "assistant", "content": "Looking."}, {"role": "user", "content": "go on"}]
    alice = {"X-Ruyi-Agent": "alice"}
    first = await chat(proxy, TASK, alice)
    forgotten: dict[str, int] = {}
    for _ in range(200):
        status, stats = await get_json(proxy, "/ruyi/v1/stats", {})
        forgotten = stats["memory"]["forgotten_idle"]
        if forgotten.get("sessions") and forgotten.get("cached"):
            break
        await asyncio.sleep(0.05)
    assert forgotten.get("sessions", 0) >= 1 and forgotten.get("cached", 0) >= 1, forgotten
    assert len(proxy.app[appkeys.MEASURER].sessions) == 0
    again = await chat(proxy, follow, alice)
    assert again.headers["x-ruyi-session"] == first.headers["x-ruyi-session"]
    assert fake.last().json["messages"] == follow
    status, one = await get_json(proxy, f"/ruyi/v1/sessions/{first.headers['x-ruyi-session']}", alice)
    assert status == 200 and one["requests"] == 2
