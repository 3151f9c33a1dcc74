"""The layout through the proxy (OpenAI, Ollama, Anthropic clients, the fake upstream): each section where the mode says,
the stable part byte for byte on every request of a session, the per-request block never kept in history, fail-open."""

from __future__ import annotations

import json
from typing import Any

import aiohttp

from tests.api.test_anchors_api import FIELDS, call
from tests.conftest import MakeProxy, base_url
from tests.fake_upstream import FakeUpstream

SYSTEM = "You are a careful coding agent."
TASK = "Fix the flaky test in tests/test_cache.py: CacheStore.evict drops entries too early."


async def remember(proxy: Any, agent: str = "a") -> None:
    """A notebook entry and three anchors (one constraint, one relevant decision, one unrelated decision)."""
    root = base_url(proxy) + "/ruyi/v1"
    async with aiohttp.ClientSession() as http:
        status, _ = await call(http, "POST", root + "/notebook/user", agent=agent, json={"text": "prefers small diffs"})
        assert status == 201
        for kind, title in (("C", "Never commit secrets"), ("D", "CacheStore evicts by LRU"), ("D", "Deploy with Docker compose")):
            status, _ = await call(http, "POST", root + "/anchors", agent=agent, json={"type": kind, "title": title, "fields": FIELDS})
            assert status == 201


async def chat(proxy: Any, messages: list[dict[str, Any]], agent: str = "a", headers: dict[str, str] | None = None) -> aiohttp.ClientResponse:
    async with aiohttp.ClientSession() as http:
        body = {"model": "gpt-4o", "messages": messages}
        resp = await http.post(base_url(proxy) + "/v1/chat/completions", json=body, headers={"X-Ruyi-Agent": agent, **(headers or {})})
        await resp.read()
        return resp


def conversation(turns: int) -> list[dict[str, Any]]:
    msgs: list[dict[str, Any]] = [{"role": "system", "content": SYSTEM}, {"role": "user", "content": TASK}]
    for t in range(turns):
        msgs += [{"role": "assistant", "content": f"Looked at CacheStore part {t}."}, {"role": "user", "content": f"go on with step {t}"}]
    return msgs


async def test_nothing_stored_nothing_configured_forwards_the_clients_bytes(make_proxy: MakeProxy, fake: FakeUpstream) -> None:
    proxy = await make_proxy()
    for turns in (0, 1):
        await chat(proxy, conversation(turns))
        assert fake.last().json["messages"] == conversation(turns)


async def test_append_puts_memory_after_the_system_prompt_and_keeps_it_byte_for_byte(make_proxy: MakeProxy, fake: FakeUpstream) -> None:
    proxy = await make_proxy()
    await remember(proxy)
    session = (await chat(proxy, conversation(0))).headers["X-Ruyi-Session"]
    first = fake.last().json["messages"]
    system = first[0]["content"]
    assert system.startswith(SYSTEM + "\n\n<ruyi-memory>") and system.endswith("</ruyi-memory>")
    assert "prefers small diffs" in system and "[C001] Never commit secrets" in system and "[D001] CacheStore evicts by LRU" in system
    assert "Deploy with Docker" not in system  # not relevant to this session
    assert first[1:] == conversation(0)[1:]  # the conversation as sent: no trailing block without metadata, cards or delta
    async with aiohttp.ClientSession() as http:  # memory changes mid-session: the stable part stays, the delta rides along
        await call(http, "POST", base_url(proxy) + "/ruyi/v1/notebook/env", agent="a", json={"text": "runs Python 3.12"})
    resp = await chat(proxy, conversation(1))
    second = fake.last().json["messages"]
    assert second[0]["content"] == system  # byte for byte: the provider's cached prefix holds
    assert second[1:-1] == conversation(1)[1:-1]
    newest = second[-1]["content"]
    assert newest.startswith("go on with step 0\n\n<ruyi-context>") and "+ notebook: runs Python 3.12" in newest
    last = await chat(proxy, conversation(2))
    third = fake.last().json["messages"]
    assert third[0]["content"] == system and third[-3]["content"] == "go on with step 0"  # request 2's block is not in history
    assert resp.headers["X-Ruyi-Session"] == last.headers["X-Ruyi-Session"] == session  # one conversation, one session


async def test_metadata_and_full_mode_put_each_section_where_the_seed_says(make_proxy: MakeProxy, fake: FakeUpstream) -> None:
    proxy = await make_proxy(layout={"mode": "full", "core_template": "Follow the tool rules.\n{client_system}\nBe brief."})
    await remember(proxy)
    await chat(proxy, conversation(0))
    msgs = fake.last().json["messages"]
    system = msgs[0]["content"]
    assert system.startswith("## 1. Task\n" + TASK + "\n\n## 2. Core template\nFollow the tool rules.\n" + SYSTEM + "\nBe brief.")
    assert system.index("## Notebook") < system.index("## Anchors")
    newest = msgs[-1]["content"]
    assert newest.startswith(TASK + "\n\n<ruyi-context>") and "- time: 20" in newest and "- agent: a" in newest and "- model: gpt-4o" in newest
    await chat(proxy, conversation(1))
    assert fake.last().json["messages"][0]["content"] == system
    assert fake.last().json["messages"][1]["content"] == TASK


async def test_off_adds_nothing_even_with_memory(make_proxy: MakeProxy, fake: FakeUpstream) -> None:
    proxy = await make_proxy(layout={"mode": "off", "metadata": True})
    await remember(proxy)
    await chat(proxy, conversation(0))
    assert fake.last().json["messages"] == conversation(0)


async def test_each_sections_tokens_are_reported_per_request(make_proxy: MakeProxy, fake: FakeUpstream) -> None:
    proxy = await make_proxy(layout={"metadata": True})
    await remember(proxy)
    resp = await chat(proxy, conversation(0))
    session = resp.headers["X-Ruyi-Session"]
    before, after = int(resp.headers["X-Ruyi-Tokens-Before"]), int(resp.headers["X-Ruyi-Tokens-After"])
    async with aiohttp.ClientSession() as http:
        status, body = await call(http, "GET", base_url(proxy) + f"/ruyi/v1/sessions/{session}/report", agent="a")
        assert status == 200
        layout = body["reports"][-1]["layout"]
        assert layout["built"] is True and set(layout["sections"]) == {"notebook", "anchors", "metadata"}
        assert all(n > 0 for n in layout["sections"].values()) and after - before == layout["tokens"]  # the window counts them
        assert body["summary"]["layout"] == layout["sections"]
        status, text = await call(http, "GET", base_url(proxy) + f"/ruyi/v1/sessions/{session}/report?format=markdown", agent="a")
        assert "### Added by the layout (append; stable part built)" in text and "| notebook | ~" in text


async def test_metadata_reports_the_usage_of_what_is_forwarded(make_proxy: MakeProxy, fake: FakeUpstream) -> None:
    """Issue 21: "494 % (tier archive)" was the client's prompt; the model is told the usage of what it gets."""
    import re

    proxy = await make_proxy(layout={"metadata": True}, window={"models": {"gpt-4o*": 8000}})
    messages: list[dict[str, Any]] = [{"role": "system", "content": "You are a coding agent."}, {"role": "user", "content": "Read every module."}]
    for n in range(10):
        call = {"id": f"c{n}", "type": "function", "function": {"name": "bash", "arguments": json.dumps({"command": f"cat m{n}.py"})}}
        messages += [
            {"role": "assistant", "content": None, "tool_calls": [call]},
            {"role": "tool", "tool_call_id": f"c{n}", "content": "\n".join(f"def f{n}_{i}(): return {i}" for i in range(200))},
        ]
        resp = await chat(proxy, messages)
        assert resp.status == 200
    told = re.search(r"- context: (\d+)% of ([\d,]+) tokens used \(tier (\w+)\)", json.dumps(fake.last().json["messages"]))
    assert told is not None
    assert int(told.group(1)) <= 100 and told.group(3) != "archive", told.group(0)
