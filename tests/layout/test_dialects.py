"""The layout for Ollama and Anthropic clients (official clients, the fake upstream): the stable part in the native
system, the per-request block on the newest input as the dialect carries it, no breakpoint added, nothing kept in history."""

from __future__ import annotations

from typing import Any

import aiohttp
import anthropic
import ollama

from tests.anthropic_shape import breakpoints
from tests.api.test_anchors_api import call
from tests.conftest import MakeProxy, base_url
from tests.fake_upstream import FakeUpstream
from tests.layout.test_step import SYSTEM, TASK, remember

MODEL = "claude-opus-4-5"


async def add_note(proxy: Any, text: str, agent: str) -> None:
    async with aiohttp.ClientSession() as http:
        status, _ = await call(http, "POST", base_url(proxy) + "/ruyi/v1/notebook/env", agent=agent, json={"text": text})
        assert status == 201


async def test_ollama_gets_a_system_message_of_its_own_and_the_block_on_its_newest_input(make_proxy: MakeProxy, fake: FakeUpstream) -> None:
    proxy = await make_proxy("ollama", layout={"metadata": True})
    await remember(proxy, agent="o")
    client = ollama.AsyncClient(host=base_url(proxy), headers={"X-Ruyi-Agent": "o"})
    history: list[dict[str, Any]] = [{"role": "user", "content": TASK}]
    await client.chat(model="llama3.1:8b", messages=history, stream=False)
    first = fake.last("/api/chat").json["messages"]
    assert first[0]["role"] == "system" and first[0]["content"].startswith("<ruyi-memory>") and "[C001] Never commit secrets" in first[0]["content"]
    assert first[1]["content"].startswith(TASK + "\n\n<ruyi-context>") and "- model: llama3.1:8b" in first[1]["content"]
    history += [{"role": "assistant", "content": "Looking at CacheStore."}, {"role": "user", "content": "go on"}]
    parts = [p async for p in await client.chat(model="llama3.1:8b", messages=history, stream=True)]
    assert parts[-1].done
    second = fake.last("/api/chat").json["messages"]
    assert second[0] == first[0]  # the stable part, byte for byte
    assert second[1] == {"role": "user", "content": TASK}  # request 1's block is not kept in history
    assert second[2] == history[1] and second[3]["content"].startswith("go on\n\n<ruyi-context>")


async def test_anthropic_gets_text_blocks_after_the_last_breakpoint_and_no_breakpoint_of_its_own(make_proxy: MakeProxy, fake: FakeUpstream) -> None:
    proxy = await make_proxy("anthropic")
    await remember(proxy, agent="c")
    client = anthropic.AsyncAnthropic(base_url=base_url(proxy), api_key="sk-ant-client", default_headers={"X-Ruyi-Agent": "c"}, max_retries=0)
    system: Any = [{"type": "text", "text": SYSTEM, "cache_control": {"type": "ephemeral"}}]
    history: list[Any] = [{"role": "user", "content": [{"type": "text", "text": TASK, "cache_control": {"type": "ephemeral"}}]}]
    await client.messages.create(model=MODEL, max_tokens=100, system=system, messages=history)
    body = fake.last("/v1/messages").json
    assert body["system"][0] == system[0] and len(body["system"]) == 2 and "cache_control" not in body["system"][1]
    assert body["system"][1]["text"].startswith("<ruyi-memory>") and "[D001] CacheStore evicts by LRU" in body["system"][1]["text"]
    assert body["messages"] == history and not fake.anthropic_refused  # nothing per-request yet: the client's messages as sent
    await add_note(proxy, "runs Python 3.12", "c")
    history += [
        {"role": "assistant", "content": [{"type": "text", "text": "Looking at CacheStore."}]},
        {"role": "user", "content": [{"type": "text", "text": "go on", "cache_control": {"type": "ephemeral"}}]},
    ]
    async with client.messages.stream(model=MODEL, max_tokens=100, system=system, messages=history) as stream:
        await stream.get_final_message()
    second = fake.last("/v1/messages").json
    assert second["system"] == body["system"]  # byte for byte
    assert second["messages"][:2] == history[:2]
    newest = second["messages"][2]["content"]
    assert newest[0] == history[2]["content"][0] and len(newest) == 2 and "cache_control" not in newest[1]
    assert newest[1]["text"].startswith("<ruyi-context>") and "+ notebook: runs Python 3.12" in newest[1]["text"]
    assert breakpoints(second) == breakpoints({**second, "system": system, "messages": history}) and not fake.anthropic_refused
    history += [{"role": "assistant", "content": [{"type": "text", "text": "Done."}]}, {"role": "user", "content": "thanks"}]
    await client.messages.create(model=MODEL, max_tokens=100, system=system, messages=history)
    third = fake.last("/v1/messages").json
    assert third["system"] == body["system"] and third["messages"][2] == history[2]  # request 2's block is gone from history


async def test_anthropic_full_keeps_the_system_blocks_and_follows_them_with_the_seeds_order(make_proxy: MakeProxy, fake: FakeUpstream) -> None:
    proxy = await make_proxy("anthropic", layout={"mode": "full", "core_template": "Follow the tool rules.\n{client_system}"})
    await remember(proxy, agent="c")
    client = anthropic.AsyncAnthropic(base_url=base_url(proxy), api_key="sk-ant-client", default_headers={"X-Ruyi-Agent": "c"}, max_retries=0)
    system: Any = [{"type": "text", "text": SYSTEM, "cache_control": {"type": "ephemeral"}}]
    await client.messages.create(model=MODEL, max_tokens=100, system=system, messages=[{"role": "user", "content": TASK}])
    body = fake.last("/v1/messages").json
    assert body["system"][0] == system[0] and len(body["system"]) == 2 and not fake.anthropic_refused
    added = body["system"][1]["text"]
    assert added.startswith(f"## 1. Task\n{TASK}\n\n## 2. Core template\nFollow the tool rules.") and "<ruyi-memory>" in added
    newest = body["messages"][0]["content"]
    assert isinstance(newest, str) and newest.startswith(TASK + "\n\n<ruyi-context>") and "- time: " in newest


async def test_an_anthropic_sub_agent_gets_its_snapshot_after_the_system_blocks_and_stays_rewritable(
    make_proxy: MakeProxy, fake: FakeUpstream
) -> None:
    proxy = await make_proxy("anthropic")
    await remember(proxy, agent="c")
    client = anthropic.AsyncAnthropic(base_url=base_url(proxy), api_key="sk-ant-client", default_headers={"X-Ruyi-Agent": "c"}, max_retries=0)
    system: Any = [{"type": "text", "text": SYSTEM, "cache_control": {"type": "ephemeral"}}]
    parent = await client.messages.with_raw_response.create(model=MODEL, max_tokens=100, system=system, messages=[{"role": "user", "content": TASK}])
    parent_id = parent.headers["X-Ruyi-Session"]
    child: Any = [{"role": "user", "content": "Review CacheStore.evict for off-by-one errors."}]
    bodies = []
    for _ in range(2):
        await client.messages.create(model=MODEL, max_tokens=100, system=system, messages=child, extra_headers={"X-Ruyi-Parent": parent_id})
        bodies.append(fake.last("/v1/messages").json)
        child = [*child, {"role": "assistant", "content": "Looking."}, {"role": "user", "content": "go on"}]
    first = bodies[0]["system"]
    assert first[0] == system[0] and first[1]["text"].startswith(f'<ruyi-snapshot parent="{parent_id}">') and not fake.anthropic_refused
    assert bodies[1]["system"] == first  # the snapshot and the stable part, byte for byte


async def test_ollamas_num_ctx_holds_the_sections_too(make_proxy: MakeProxy, fake: FakeUpstream, tmp_path: Any) -> None:
    (tmp_path / "AGENTS.md").write_text(
        "# Rules\n" + "\n".join(f"- rule {i}: keep the change small and tested" for i in range(250)), encoding="utf-8"
    )
    proxy = await make_proxy("ollama", workspace={"root": str(tmp_path), "rules_max_chars": 20000})
    client = ollama.AsyncClient(host=base_url(proxy), headers={"X-Ruyi-Agent": "o"})
    prompt = "word " * 5500  # alone it fits the 8k step with its reserve; with the rules it does not
    await client.chat(model="llama3.1:8b", messages=[{"role": "user", "content": prompt}], stream=False)
    body = fake.last("/api/chat").json
    assert "rule 249" in body["messages"][0]["content"] and body["options"]["num_ctx"] == 16384
