"""Ruyi's MCP server at /mcp, through the official mcp SDK's own client over Streamable HTTP: the four tools, a
placeholder's original by its ref, a search of what an archive took, the notebook the model writes (refusals, versions,
rollback), anchors proposed pending, one key's agent seeing nothing of another's, non-local callers refused."""

from __future__ import annotations

import json
import re
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import aiohttp
import httpx
import pytest
from mcp import ClientSession
from mcp.client.streamable_http import streamable_http_client

from tests.conftest import MakeProxy, base_url
from tests.fake_upstream import FakeUpstream

KEYS = {"auth": {"keys": [{"key": "key-alice-0001", "agent": "alice"}, {"key": "key-bob-0002", "agent": "bob"}]}}
MARKER = "UNIQUE_MARKER_7f3a"


@asynccontextmanager
async def mcp(url: str, key: str | None = None) -> AsyncIterator[ClientSession]:
    headers = {"X-Ruyi-Key": key} if key else {}
    async with httpx.AsyncClient(headers=headers, timeout=30) as client:
        async with streamable_http_client(url + "/mcp", http_client=client) as (read, write, _):
            async with ClientSession(read, write) as session:
                await session.initialize()
                yield session


def text_of(result: Any) -> str:
    return "\n".join(c.text for c in result.content if getattr(c, "type", "") == "text")


def coding_session(turns: int, width: int) -> list[dict[str, Any]]:
    messages: list[dict[str, Any]] = [
        {"role": "system", "content": "You are a coding agent."},
        {"role": "user", "content": "Find why parse_header fails, then fix it."},
    ]
    for n in range(turns):
        call = {"id": f"c{n}", "type": "function", "function": {"name": "bash", "arguments": json.dumps({"command": f"cat src/mod{n}.py"})}}
        body = "\n".join(f"def handler_{n}_{i}(request): return route_{i}(request)  # {MARKER if n == 0 and i == 3 else ''}" for i in range(width))
        messages += [{"role": "assistant", "content": None, "tool_calls": [call]}, {"role": "tool", "tool_call_id": f"c{n}", "content": body}]
    return messages


async def send(http: aiohttp.ClientSession, url: str, messages: list[dict[str, Any]], key: str) -> None:
    async with http.post(url + "/v1/chat/completions", json={"model": "gpt-4o", "messages": messages}, headers={"X-Ruyi-Key": key}) as resp:
        assert resp.status == 200, await resp.text()


async def test_the_tools_and_a_placeholders_original(make_proxy: MakeProxy, fake: FakeUpstream, tmp_path: Path) -> None:
    proxy = await make_proxy(
        store={"data_dir": str(tmp_path / "d")},
        window={"models": {"gpt-4o*": 8000}},
        pruning={"strategies": {"truncation": {"max_tool_output_tokens": 300}}},
        **KEYS,
    )
    url = base_url(proxy)
    messages = coding_session(3, 400)
    async with aiohttp.ClientSession() as http:
        await send(http, url, messages, "key-alice-0001")
    forwarded = fake.last("/v1/chat/completions").body.decode()
    refs = re.findall(r"\br[0-9a-f]{12}\b", forwarded)
    assert refs, "a long output was replaced by a placeholder with a ref"
    async with mcp(url, "key-alice-0001") as session:
        listed = await session.list_tools()
        assert {t.name for t in listed.tools} == {"recall", "notebook", "anchors", "cards"}
        originals = [text_of(await session.call_tool("recall", {"id": ref})) for ref in refs]
        assert any(MARKER in o for o in originals)  # the original came back
        bad = await session.call_tool("recall", {"id": "nonsense"})
        assert bad.isError and "no id Ruyi gave" in text_of(bad)
    async with mcp(url, "key-bob-0002") as session:  # another key's agent sees none of it
        other = await session.call_tool("recall", {"id": refs[0]})
        assert other.isError and MARKER not in text_of(other)


async def test_recall_by_query_after_an_archive(make_proxy: MakeProxy, fake: FakeUpstream, tmp_path: Path) -> None:
    proxy = await make_proxy(store={"data_dir": str(tmp_path / "d")}, window={"models": {"gpt-4o*": 8000}}, **KEYS)
    url = base_url(proxy)
    messages = coding_session(14, 150)
    cuts = [i for i, m in enumerate(messages) if m["role"] == "assistant"]
    async with aiohttp.ClientSession() as http:
        for cut in [*cuts[1:], len(messages)]:
            await send(http, url, messages[:cut], "key-alice-0001")
        async with http.get(url + "/ruyi/v1/sessions", headers={"X-Ruyi-Key": "key-alice-0001"}) as resp:
            sid = (await resp.json())["sessions"][0]["session_id"]
        async with http.get(url + f"/ruyi/v1/sessions/{sid}/archive", headers={"X-Ruyi-Key": "key-alice-0001"}) as resp:
            archive = await resp.json()
    assert archive["archives"], "the session archived"
    async with mcp(url, "key-alice-0001") as session:
        found = text_of(await session.call_tool("recall", {"query": "handler_0_3 route_3"}))
        assert "handler_0_3" in found and ("[ruyi:c" in found or "[turn:" in found)
        head, end = archive["archives"][0]["head"], archive["archives"][0]["end"]
        turns = text_of(await session.call_tool("recall", {"id": "archive:1"}))
        assert f"[turn:{head}]" in turns and MARKER in turns and end >= head


async def test_the_notebook_the_model_writes(make_proxy: MakeProxy, tmp_path: Path) -> None:
    proxy = await make_proxy(store={"data_dir": str(tmp_path / "d")}, **KEYS)
    url = base_url(proxy)
    headers = {"X-Ruyi-Key": "key-alice-0001"}
    async with aiohttp.ClientSession() as http:  # a person's entry first
        async with http.post(url + "/ruyi/v1/notebook/user", json={"text": "prefers small commits"}, headers=headers) as resp:
            assert resp.status == 201
    async with mcp(url, "key-alice-0001") as session:
        added = text_of(await session.call_tool("notebook", {"action": "add", "section": "environment", "text": "tests run with make test"}))
        assert "done: version" in added and "tests run with make test" in added
        read = text_of(await session.call_tool("notebook", {"action": "read"}))
        assert "1. prefers small commits  [person's]" in read and "1. tests run with make test" in read
        refused = await session.call_tool("notebook", {"action": "edit", "section": "user", "n": 1, "text": "likes big commits"})
        assert refused.isError and "a person's" in text_of(refused)
        bad = await session.call_tool("notebook", {"action": "add", "section": "nowhere", "text": "x"})
        assert bad.isError
        edited = text_of(await session.call_tool("notebook", {"action": "edit", "section": "environment", "n": 1, "text": "tests: make test -k"}))
        assert "tests: make test -k" in edited
    async with aiohttp.ClientSession() as http:
        async with http.get(url + "/ruyi/v1/notebook/versions", headers=headers) as resp:
            versions = (await resp.json())["versions"]
        assert [v["reason"] for v in versions][-2:] == ["add environment", "model edits environment 1"]
        async with http.post(url + f"/ruyi/v1/notebook/rollback/{versions[-2]['version']}", headers=headers) as resp:
            assert resp.status == 200
    async with mcp(url, "key-alice-0001") as session:
        assert "1. tests run with make test" in text_of(await session.call_tool("notebook", {"action": "read"}))
    async with mcp(url, "key-bob-0002") as session:
        assert "prefers small commits" not in text_of(await session.call_tool("notebook", {"action": "read"}))


async def test_anchors_proposed_pending_and_cards(make_proxy: MakeProxy, tmp_path: Path) -> None:
    proxy = await make_proxy(store={"data_dir": str(tmp_path / "d")}, **KEYS)
    url = base_url(proxy)
    async with mcp(url, "key-alice-0001") as session:
        proposed = text_of(
            await session.call_tool(
                "anchors", {"action": "propose", "type": "D", "title": "Use SQLite WAL", "fields": {"rationale": "readers never block the writer"}}
            )
        )
        assert "proposed D001 (pending" in proposed
        listed = text_of(await session.call_tool("anchors", {"action": "list"}))
        assert "D001 [pending] Use SQLite WAL" in listed
        cards = await session.call_tool("cards", {"query": "sqlite"})
        assert not cards.isError
    async with aiohttp.ClientSession() as http:
        async with http.get(url + "/ruyi/v1/anchors", headers={"X-Ruyi-Key": "key-alice-0001"}) as resp:
            assert [(a["id"], a["status"]) for a in (await resp.json())["anchors"]] == [("D001", "pending")]
    async with mcp(url, "key-bob-0002") as session:
        assert "D001" not in text_of(await session.call_tool("anchors", {"action": "list"}))


async def test_keys_are_required_when_configured(make_proxy: MakeProxy) -> None:
    proxy = await make_proxy(**KEYS)
    async with aiohttp.ClientSession() as http:
        async with http.post(
            base_url(proxy) + "/mcp",
            json={"jsonrpc": "2.0", "id": 1, "method": "tools/list"},
            headers={"Accept": "application/json, text/event-stream"},
        ) as resp:
            assert resp.status == 401


async def test_the_mcp_calls_are_counted_in_metrics(make_proxy: MakeProxy) -> None:
    proxy = await make_proxy()
    async with mcp(base_url(proxy)) as session:
        await session.call_tool("notebook", {"action": "read"})
        await session.call_tool("recall", {})
    async with aiohttp.ClientSession() as http:
        async with http.get(base_url(proxy) + "/metrics") as resp:
            metrics = await resp.text()
    assert 'ruyi_mcp_calls_total{outcome="ok",tool="notebook"} 1.0' in metrics
    assert 'ruyi_mcp_calls_total{outcome="refused",tool="recall"} 1.0' in metrics


@pytest.mark.parametrize("path", ["/mcp"])
async def test_no_key_from_outside_loopback_gets_nothing(path: str, tmp_path: Path, upstream: Any) -> None:
    from tests.conftest import config_for
    from tests.http.test_local_only import over_unix_socket

    async for http in over_unix_socket(config_for(base_url(upstream)), tmp_path / "r.sock"):
        async with http.post(
            "http://ruyi" + path, json={"jsonrpc": "2.0", "id": 1, "method": "tools/list"}, headers={"Accept": "application/json, text/event-stream"}
        ) as resp:
            assert resp.status == 403


async def test_placeholders_say_to_call_recall_when_the_request_offers_it(make_proxy: MakeProxy, fake: FakeUpstream) -> None:
    proxy = await make_proxy(window={"models": {"gpt-4o*": 8000}}, pruning={"strategies": {"truncation": {"max_tool_output_tokens": 300}}})
    tool = {
        "type": "function",
        "function": {
            "name": "mcp__ruyi__recall",
            "description": "Get back what Ruyi took out.",
            "parameters": {"type": "object", "properties": {"id": {"type": "string"}}},
        },
    }
    async with aiohttp.ClientSession() as http:
        for tools in ([], [tool]):
            body = {"model": "gpt-4o", "messages": coding_session(1, 400), "tools": tools}
            async with http.post(base_url(proxy) + "/v1/chat/completions", json=body, headers={"X-Ruyi-Agent": f"a{len(tools)}"}) as resp:
                assert resp.status == 200
    told = [r.json["messages"][-1]["content"] for r in fake.received if r.path == "/v1/chat/completions"]
    assert "original kept for a person or tool as ref r" in told[0] and "mcp__ruyi__recall" not in told[0]
    assert re.search(r"call mcp__ruyi__recall with id r[0-9a-f]{12} to get it back", told[1])


def test_the_archive_block_says_to_call_recall_when_the_request_offers_it() -> None:
    from proxy.longctx.block import archive_block

    plain = archive_block(2, 3, 40, 12, "the summary", [], 6, False)
    told = archive_block(2, 3, 40, 12, "the summary", [], 6, False, "mcp__ruyi__recall")
    assert "mcp__ruyi__recall" not in plain
    assert "call mcp__ruyi__recall yourself" in told and "archive:2" in told
    assert "mcp__ruyi__recall" in archive_block(2, 3, 40, 12, "摘要", [], 6, True, "mcp__ruyi__recall")


def test_the_reminder_names_recall_when_offered() -> None:
    from proxy.layout.sections import REMINDER_EN, reminder

    assert reminder(False) == REMINDER_EN and "mcp__ruyi__recall" in reminder(False, "mcp__ruyi__recall")
    assert "recall" in reminder(True, "recall")
