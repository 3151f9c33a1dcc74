"""The dashboard's data: /ruyi/v1/agents, /ruyi/v1/overview and a session's /timeline, each caller seeing only what the
admin API lets it see (a client key its own agent, the admin key every agent, no keys: local callers)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import aiohttp

from tests.conftest import MakeProxy, base_url

KEYS = {"auth": {"keys": [{"key": "key-aaaa-0001", "agent": "alice"}, {"key": "key-bbbb-0002", "agent": "bob"}], "admin_key": "admin-key-0003"}}


async def chat(http: aiohttp.ClientSession, url: str, key: str, text: str) -> str:
    body = {"model": "m", "messages": [{"role": "system", "content": "s"}, {"role": "user", "content": text}]}
    async with http.post(url + "/v1/chat/completions", json=body, headers={"X-Ruyi-Key": key}) as resp:
        assert resp.status == 200
        return resp.headers["X-Ruyi-Session"]


async def get(http: aiohttp.ClientSession, url: str, key: str, **headers: str) -> tuple[int, Any]:
    async with http.get(url, headers={"X-Ruyi-Key": key, **headers}) as resp:
        return resp.status, await resp.json()


async def test_each_key_sees_its_own_agent_and_the_admin_key_every_agent(make_proxy: MakeProxy, tmp_path: Path) -> None:
    proxy = await make_proxy(store={"data_dir": str(tmp_path / "d")}, **KEYS)
    url = base_url(proxy)
    async with aiohttp.ClientSession() as http:
        mine = await chat(http, url, "key-aaaa-0001", "alice's task")
        theirs = await chat(http, url, "key-bbbb-0002", "bob's task")
        await chat(http, url, "key-bbbb-0002", "bob's second task")
        status, agents = await get(http, url + "/ruyi/v1/agents", "key-aaaa-0001")
        assert status == 200 and [a["agent_id"] for a in agents["agents"]] == ["alice"]
        status, everyone = await get(http, url + "/ruyi/v1/agents", "admin-key-0003")
        assert {a["agent_id"]: a["sessions"] for a in everyone["agents"]} == {"alice": 1, "bob": 2}
        status, report = await get(http, url + "/ruyi/v1/overview", "key-bbbb-0002")
        assert status == 200 and report["requests"]["total"] == 2 and {s["agent_id"] for s in report["sessions"]} == {"bob"}
        status, points = await get(http, url + f"/ruyi/v1/sessions/{mine}/timeline", "key-aaaa-0001")
        assert status == 200 and len(points["points"]) == 1 and points["points"][0]["est_before"] > 0
        status, _ = await get(http, url + f"/ruyi/v1/sessions/{theirs}/timeline", "key-aaaa-0001")
        assert status == 404  # another agent's session is simply not found
        status, _ = await get(http, url + "/ruyi/v1/agents", "wrong-key")
        assert status == 401
        status, bad = await get(http, url + "/ruyi/v1/overview?days=abc", "admin-key-0003")
        assert status == 400 and "days" in bad["error"]["message"]
        async with http.get(url + "/ruyi/ui") as resp:  # the page itself holds no data: it asks for a key
            page = await resp.text()
            assert resp.status == 200 and "Content-Security-Policy" in resp.headers and "key-aaaa" not in page
        async with http.get(url + "/ruyi/ui/static/..%2fpages.py") as resp:
            assert resp.status in (400, 404)
