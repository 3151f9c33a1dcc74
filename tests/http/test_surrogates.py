"""One tenant's text never drops another's records: lone surrogates (valid JSON, not UTF-8) in one agent's requests,
through the real proxy with its SQLite store; another agent's sessions, raw turns and writes all land."""

from __future__ import annotations

from pathlib import Path

import aiohttp

from tests.conftest import MakeProxy, base_url


async def test_a_lone_surrogate_never_costs_another_agent_its_records(make_proxy: MakeProxy, tmp_path: Path) -> None:
    proxy = await make_proxy(store={"data_dir": str(tmp_path / "data")})
    url = base_url(proxy) + "/v1/chat/completions"
    bad = '{"model": "m", "messages": [{"role": "system", "content": "s"}, {"role": "user", "content": "hi \\ud800 %d"}]}'
    async with aiohttp.ClientSession() as http:
        for i in range(5):
            for agent, body in (("mallory", (bad % i).encode()), ("victim", None)):
                payload = body or (b'{"model": "m", "messages": [{"role": "system", "content": "s"}, {"role": "user", "content": "task %d"}]}' % i)
                async with http.post(url, data=payload, headers={"X-Ruyi-Agent": agent, "Content-Type": "application/json"}) as resp:
                    assert resp.status == 200, await resp.text()
        async with http.get(base_url(proxy) + "/ruyi/v1/sessions", headers={"X-Ruyi-Agent": "victim"}) as resp:
            victim = await resp.json()
        async with http.get(base_url(proxy) + "/ruyi/v1/stats") as resp:
            stats = await resp.json()
    assert len(victim["sessions"]) == 5
    assert stats["store_queue"]["failed"] == 0 and stats["store_queue"]["dropped_by_reason"] == {"queue_full": 0}
    assert stats["failed_open"] == {} and stats["memory"]["remember_failed"] == 0
    async with aiohttp.ClientSession() as http:
        async with http.get(base_url(proxy) + "/ruyi/v1/sessions", headers={"X-Ruyi-Agent": "mallory"}) as resp:
            assert len((await resp.json())["sessions"]) == 5  # and the sender's own records are stored too
