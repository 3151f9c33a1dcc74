"""Compaction through the proxy: only while the agent is idle, through the summarizer when one is configured, and an
unusable answer changes nothing."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import aiohttp
from aiohttp.test_utils import TestServer

from proxy import appkeys
from proxy.keep.keeper import Keeper
from proxy.keep.options import NotebookOptions
from tests.api.test_anchors_api import call
from tests.conftest import MakeProxy, base_url
from tests.fake_upstream import FakeUpstream
from tests.rewrite.test_pruning import post


async def fill(proxy: Any, agent: str, section: str = "history", n: int = 10) -> dict[str, Any]:
    async with aiohttp.ClientSession() as http:
        for i in range(n):
            status, nb = await call(
                http, "POST", base_url(proxy) + f"/ruyi/v1/notebook/{section}", agent=agent, json={"text": f"{agent} milestone {i}"}
            )
            assert status == 201
    return nb


async def notebook(proxy: Any, agent: str) -> dict[str, Any]:
    async with aiohttp.ClientSession() as http:
        return (await call(http, "GET", base_url(proxy) + "/ruyi/v1/notebook", agent=agent))[1]


async def test_compaction_waits_while_a_request_of_the_agent_or_its_sub_agent_is_in_flight(make_proxy: MakeProxy, fake: FakeUpstream) -> None:
    proxy = await make_proxy(notebook={"idle_seconds": 0})
    keeper = proxy.app[appkeys.KEEPER]
    assert (await fill(proxy, "a"))["pending"] and (await fill(proxy, "b"))["pending"]
    fake.fault = "hold"
    in_flight = asyncio.create_task(post(proxy, [{"role": "user", "content": "hi"}], headers={"X-Ruyi-Agent": "a/helper"}))
    await fake.wait_for()
    assert await keeper.compact_idle() == ["b"]  # a's sub-agent is busy: a waits; b is idle
    assert (await notebook(proxy, "a"))["pending"] is True
    fake.held.set()
    assert (await in_flight).status == 200
    assert await keeper.compact_idle() == ["a"]
    nb = await notebook(proxy, "a")
    assert nb["pending"] is False and [e["text"] for e in nb["sections"]["history"]["entries"]] == [
        "earlier: " + "; ".join(f"a milestone {i}" for i in range(5)),
        *(f"a milestone {i}" for i in range(5, 10)),
    ]


def summarizer(upstream: TestServer) -> dict[str, Any]:
    return {"model": "openai/gpt-4o", "api_base": base_url(upstream) + "/v1", "api_key": "sk-summarizer-test", "failures_to_open": 100}


async def test_an_unusable_answer_leaves_every_entry_and_waits_to_retry(make_proxy: MakeProxy, fake: FakeUpstream, upstream: TestServer) -> None:
    proxy = await make_proxy(summarizer=summarizer(upstream), notebook={"idle_seconds": 0, "retry_seconds": 3600})
    keeper = proxy.app[appkeys.KEEPER]
    before = await fill(proxy, "a")
    for reply in ("", "Sure! Here is the compacted notebook.", json.dumps({"history": []}), json.dumps({"history": ["x" * 500]})):
        fake.reply = reply
        async with aiohttp.ClientSession() as http:
            status, out = await call(http, "POST", base_url(proxy) + "/ruyi/v1/notebook/compact", agent="a")
        assert status == 502 and out["compacted"] is False and out["how"] == "unusable"
        now = await notebook(proxy, "a")
        assert now["version"] == before["version"] and now["sections"] == before["sections"] and now["pending"] is True
    assert await keeper.compact_idle() == []  # the retry waits for its backoff
    sent = [r.json for r in fake.received if r.path == "/v1/chat/completions"]
    assert sent and sent[-1]["messages"][0]["role"] == "system" and "a milestone 9" in sent[-1]["messages"][1]["content"]


async def test_a_good_answer_rewrites_each_section_to_its_conclusions(make_proxy: MakeProxy, fake: FakeUpstream, upstream: TestServer) -> None:
    proxy = await make_proxy(summarizer=summarizer(upstream), notebook={"idle_seconds": 0})
    await fill(proxy, "a")
    await fill(proxy, "a", "user", 2)
    fake.reply = json.dumps({"user": ["a's preferences (uncertain)"], "history": ["milestones 0-9 reached"]})
    assert await proxy.app[appkeys.KEEPER].compact_idle() == ["a"]
    nb = await notebook(proxy, "a")
    assert [e["text"] for e in nb["sections"]["history"]["entries"]] == ["milestones 0-9 reached"]
    assert nb["sections"]["user"]["entries"][0] == {**nb["sections"]["user"]["entries"][0], "text": "a's preferences (uncertain)", "by": "compacted"}
    assert nb["pending"] is False and (await notebook(proxy, "b"))["version"] == 0


def test_a_sub_agents_prune_batch_leaves_its_pool_line_in_its_own_notebook(tmp_path: Path) -> None:
    keeper = Keeper(tmp_path / "ruyi.db", NotebookOptions(), None)
    keeper.sessions.keep_snapshot("a", "kid", "parent", '<ruyi-snapshot parent="parent">…</ruyi-snapshot>')
    report = {"batch": "applied", "strategies": {"dedup": {"items": 2, "tokens_saved": 900}}, "tier_before": "prune", "tier_after": "normal"}
    keeper.remember("a", "kid", [{"role": "user", "content": "look at db.py"}], {"role": "assistant", "content": "done"}, report)
    assert [e["text"][17:] for e in keeper.notebook.current("a", "kid").body["dynamic"]] == [
        "session kid: prune batch (applied) cleared 2 item(s), 900 tokens; prune → normal"
    ]
    assert keeper.notebook.current("a").version == 0  # the agent's notebook never changed
    keeper.remember("a", "parent", [{"role": "user", "content": "review"}], {"role": "assistant", "content": "ok"}, report)
    assert (
        keeper.notebook.current("a")
        .body["dynamic"][0]["text"]
        .endswith("session parent: prune batch (applied) cleared 2 item(s), 900 tokens; prune → normal")
    )
    assert keeper.notebook.current("a", "kid").version == 1
    keeper.close()


def edit(call_id: str, path: str) -> list[dict[str, Any]]:
    """An assistant's write of ``path`` and its tool result."""
    arguments = json.dumps({"command": f"cat > {path} << 'EOF'\nx = 1\nEOF"})
    call = {"id": call_id, "type": "function", "function": {"name": "bash", "arguments": arguments}}
    return [{"role": "assistant", "content": None, "tool_calls": [call]}, {"role": "tool", "tool_call_id": call_id, "content": ""}]


async def test_a_sessions_answers_are_remembered_in_the_order_they_came(tmp_path: Path) -> None:
    """The first answer's work is slow to start (a busy worker pool): the second, ready first, waits for it, so the
    facts fold in the same messages in the same order as when the threads are quick (files most recent last)."""
    slow_once = [0.3]

    async def run(fn: Any, *args: Any) -> Any:
        if fn.__name__ == "remember" and slow_once:
            await asyncio.sleep(slow_once.pop())
        return await asyncio.to_thread(fn, *args)

    keeper = Keeper(tmp_path / "ruyi.db", NotebookOptions(), None, run=run)
    first = [{"role": "system", "content": "You edit files."}, {"role": "user", "content": "Fix the parser."}, *edit("c1", "a.py")]
    second = [*first, *edit("c2", "b.py")]
    third = [*second, *edit("c3", "c.py")]
    answer = {"role": "assistant", "content": "Next."}
    tasks = [
        keeper.remember_later("a", "s", request[start:], answer, None, None, (request, start), None)
        for request, start in ((first, 0), (second, len(first)), (third, len(second)))
    ]
    await asyncio.gather(*tasks)
    assert [path for path, _ in keeper.sessions.facts("a", "s")["files"]] == ["a.py", "b.py", "c.py"]
    assert keeper.remember_failed == 0 and len(keeper.tasks) == 0 and keeper.tasks.sessions() == 0
    keeper.close()
