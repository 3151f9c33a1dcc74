"""Sub-agents through the proxy: recognised from a pending task call (or X-Ruyi-Parent), given a byte-identical snapshot
of the parent, their results aggregated HIGH first; never across agents."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path
from typing import Any

import aiohttp

from proxy.keep.subagents import prompt_hash
from tests.api.test_anchors_api import FIELDS, call
from tests.conftest import MakeProxy, base_url
from tests.fake_upstream import FakeUpstream
from tests.rewrite.test_pruning import post

TOOLS = [{"type": "function", "function": {"name": "Task", "parameters": {"type": "object", "properties": {"prompt": {"type": "string"}}}}}]
PROMPTS = ("Find SQL injection risks in db.py", "List the public endpoints in api.py")
CHILD_SYSTEM = "You are a sub-agent: do the task, then answer."


def task_call(i: int) -> dict[str, Any]:
    return {
        "id": f"call_task_{i}",
        "type": "function",
        "function": {"name": "Task", "arguments": json.dumps({"description": "review", "prompt": PROMPTS[i], "subagent_type": "general"})},
    }


async def send(proxy: Any, messages: list[dict[str, Any]], agent: str = "a", headers: dict[str, str] | None = None) -> aiohttp.ClientResponse:
    async with aiohttp.ClientSession() as http:
        body = {"model": "gpt-4o", "messages": messages, "tools": TOOLS}
        resp = await http.post(base_url(proxy) + "/v1/chat/completions", json=body, headers={"X-Ruyi-Agent": agent, **(headers or {})})
        await resp.read()
        return resp


def child(i: int, turns: int = 0) -> list[dict[str, Any]]:
    msgs = [{"role": "system", "content": CHILD_SYSTEM}, {"role": "user", "content": PROMPTS[i]}]
    for t in range(turns):
        msgs += [{"role": "assistant", "content": f"looked at part {t}"}, {"role": "user", "content": "go on"}]
    return msgs


async def start_parent(proxy: Any, fake: FakeUpstream) -> str:
    async with aiohttp.ClientSession() as http:
        await call(http, "POST", base_url(proxy) + "/ruyi/v1/anchors", agent="a", json={"type": "D", "title": "Use SQLite", "fields": FIELDS})
    fake.tool_calls = [task_call(0), task_call(1)]
    resp = await send(proxy, [{"role": "system", "content": "You are the main agent."}, {"role": "user", "content": "Review the repo"}])
    fake.tool_calls = None
    return resp.headers["X-Ruyi-Session"]


async def test_parallel_children_get_the_same_snapshot_bytes_and_keep_them(make_proxy: MakeProxy, fake: FakeUpstream) -> None:
    proxy = await make_proxy()
    parent = await start_parent(proxy, fake)
    firsts = []
    for i in (0, 1):
        resp = await post(proxy, child(i), headers={"X-Ruyi-Agent": "a"})
        assert resp.headers["X-Ruyi-Session"] != parent
        firsts.append(fake.last().json["messages"][0]["content"])
    snapshot = firsts[0].split(CHILD_SYSTEM)[0]
    assert firsts[1].split(CHILD_SYSTEM)[0] == snapshot  # byte-identical: a shared cached prefix
    assert snapshot.startswith(f'<ruyi-snapshot parent="{parent}">') and "[D001] Use SQLite" in snapshot and "Review the repo" in snapshot
    assert len(snapshot) < 1000
    async with aiohttp.ClientSession() as http:  # the parent's state changes; a child keeps what it was given
        await call(http, "POST", base_url(proxy) + "/ruyi/v1/anchors", agent="a", json={"type": "D", "title": "Use WAL", "fields": FIELDS})
    await post(proxy, child(0, turns=1), headers={"X-Ruyi-Agent": "a"})
    assert fake.last().json["messages"][0]["content"] == firsts[0]
    assert fake.last().json["messages"][1:] == child(0, turns=1)[1:]


async def test_results_are_kept_with_their_importance_and_aggregated_high_first(make_proxy: MakeProxy, fake: FakeUpstream) -> None:
    proxy = await make_proxy()
    parent = await start_parent(proxy, fake)
    fake.reply = "Checked api.py: 12 public endpoints, listed in docs/api.md."
    await post(proxy, child(1), headers={"X-Ruyi-Agent": "a"})
    fake.reply = "[HIGH] SQL injection in db.py line 42: the query is built with an f-string."
    await post(proxy, child(0), headers={"X-Ruyi-Agent": "a"})
    async with aiohttp.ClientSession() as http:
        url = base_url(proxy) + f"/ruyi/v1/sessions/{parent}/children"
        status, normal = await call(http, "GET", url, agent="a")
        assert status == 200 and normal["counts"] == {"HIGH": 1, "MEDIUM": 1, "LOW": 0} and len(normal["children_known"]) == 2
        assert normal["text"].splitlines()[0].startswith("- [HIGH]") and "SQL injection" in normal["text"].splitlines()[0]
        status, compact = await call(http, "GET", url + "?form=compact", agent="a")
        assert len(compact["text"]) <= 500 and compact["text"].startswith("- [H]")
        status, tight = await call(http, "GET", url + "?budget=100", agent="a")
        assert tight["left_out"] == 1 and "SQL injection" in tight["text"]
        assert (await call(http, "GET", url + "?form=huge", agent="a"))[0] == 400
        assert (await call(http, "GET", url, agent="b"))[0] == 404


async def test_x_ruyi_parent_names_the_parent_and_other_agents_never_match(make_proxy: MakeProxy, fake: FakeUpstream) -> None:
    proxy = await make_proxy()
    parent = await start_parent(proxy, fake)
    await post(proxy, child(0), headers={"X-Ruyi-Agent": "b"})  # the same prompt from another agent: not a's child
    assert fake.last().json["messages"][0]["content"] == CHILD_SYSTEM
    await post(proxy, [{"role": "user", "content": "an unrelated task"}], headers={"X-Ruyi-Agent": "a"})
    assert fake.last().json["messages"] == [{"role": "user", "content": "an unrelated task"}]
    await post(proxy, [{"role": "user", "content": "a helper told its parent"}], headers={"X-Ruyi-Agent": "a", "X-Ruyi-Parent": parent})
    sent = fake.last().json["messages"]
    assert (
        sent[0]["role"] == "system"
        and sent[0]["content"].startswith(f'<ruyi-snapshot parent="{parent}">')
        and sent[1]["content"] == "a helper told its parent"
    )
    await post(proxy, [{"role": "user", "content": "names a stranger"}], headers={"X-Ruyi-Agent": "b", "X-Ruyi-Parent": parent})
    assert fake.last().json["messages"] == [{"role": "user", "content": "names a stranger"}]


async def test_a_restart_between_the_task_call_and_the_childs_first_request_still_recognises_the_child(
    make_proxy: MakeProxy, fake: FakeUpstream, data_dir: Path
) -> None:
    first = await make_proxy()
    parent = await start_parent(first, fake)  # the parent's answer calls Task twice; no child has asked yet
    await first.close()  # Ruyi stops (what answers gave is remembered before it goes) ...
    with sqlite3.connect(data_dir / "ruyi.db") as db:
        kept = db.execute("SELECT agent_id, session_id, prompt_hash FROM task_calls").fetchall()
    assert sorted(kept) == sorted(("a", parent, prompt_hash(p)) for p in PROMPTS)  # the prompts' hashes, not their text
    second = await make_proxy()  # ... and a new one starts on the same file
    resp = await post(second, child(0), headers={"X-Ruyi-Agent": "a"})
    assert resp.headers["X-Ruyi-Session"] != parent
    assert fake.last().json["messages"][0]["content"].startswith(f'<ruyi-snapshot parent="{parent}">')
    fake.reply = "[HIGH] found it"
    await post(second, child(1), headers={"X-Ruyi-Agent": "a"})
    async with aiohttp.ClientSession() as http:
        status, out = await call(http, "GET", base_url(second) + f"/ruyi/v1/sessions/{parent}/children", agent="a")
    assert status == 200 and len(out["children_known"]) == 2 and out["counts"]["HIGH"] == 1


async def test_on_postgres_a_restart_still_recognises_the_child_from_the_kept_task_calls(
    make_proxy: MakeProxy, fake: FakeUpstream, pg_url: str
) -> None:
    store = {"backend": "postgres", "url": pg_url}
    first = await make_proxy(store=store)
    parent = await start_parent(first, fake)
    await first.close()
    second = await make_proxy(store=store)  # a new Ruyi on the same database
    resp = await post(second, child(0), headers={"X-Ruyi-Agent": "a"})
    assert resp.headers["X-Ruyi-Session"] != parent
    assert fake.last().json["messages"][0]["content"].startswith(f'<ruyi-snapshot parent="{parent}">')


async def test_a_claude_code_child_with_system_reminders_around_its_prompt_is_recognised_and_shows_its_parent(
    make_proxy: MakeProxy, fake: FakeUpstream
) -> None:
    from tests.conversation.agent_bodies import CLAUDE_REMINDER_AFTER, CLAUDE_REMINDER_BEFORE

    proxy = await make_proxy()
    parent = await start_parent(proxy, fake)
    blocks: list[dict[str, Any]] = [
        {"role": "system", "content": CHILD_SYSTEM},
        {
            "role": "user",
            "content": [
                {"type": "text", "text": CLAUDE_REMINDER_BEFORE},
                {"type": "text", "text": PROMPTS[0]},
                {"type": "text", "text": CLAUDE_REMINDER_AFTER},
            ],
        },
    ]
    one_text: list[dict[str, Any]] = [
        {"role": "system", "content": CHILD_SYSTEM},
        {"role": "user", "content": CLAUDE_REMINDER_BEFORE + PROMPTS[1] + "\n" + CLAUDE_REMINDER_AFTER},
    ]
    for opening in (blocks, one_text):
        resp = await post(proxy, opening, headers={"X-Ruyi-Agent": "a"})
        child_id = resp.headers["X-Ruyi-Session"]
        assert child_id != parent
        assert fake.last().json["messages"][0]["content"].startswith(f'<ruyi-snapshot parent="{parent}">')
        async with aiohttp.ClientSession() as http:
            got = await http.get(base_url(proxy) + f"/ruyi/v1/sessions/{child_id}", headers={"X-Ruyi-Agent": "a"})
            assert got.status == 200 and (await got.json())["parent_id"] == parent
            listed = await http.get(base_url(proxy) + "/ruyi/v1/sessions", headers={"X-Ruyi-Agent": "a"})
            assert {s["session_id"]: s["parent_id"] for s in (await listed.json())["sessions"]}[child_id] == parent


async def test_a_child_sees_its_own_notebook_never_its_parents_as_its_own(make_proxy: MakeProxy, fake: FakeUpstream) -> None:
    proxy = await make_proxy()
    async with aiohttp.ClientSession() as http:
        await call(http, "POST", base_url(proxy) + "/ruyi/v1/notebook/user", agent="a", json={"text": "PARENT-ONLY prefers tabs"})
    parent = await start_parent(proxy, fake)
    first = await send(proxy, child(0))
    child_id = first.headers["X-Ruyi-Session"]
    assert child_id != parent
    sent = json.dumps(fake.last("/v1/chat/completions").json)
    assert "PARENT-ONLY" not in sent, "the parent's notebook is not the child's own"
    async with aiohttp.ClientSession() as http:  # the child writes its own notebook; it reaches the child's prompts
        await call(
            http, "POST", base_url(proxy) + f"/ruyi/v1/notebook/environment?session={child_id}", agent="a", json={"text": "CHILD-OWN uses pytest -x"}
        )
    await send(proxy, [{"role": "system", "content": "You are another sub-agent."}, {"role": "user", "content": PROMPTS[1]}])
    await send(proxy, child(0, 1))
    assert "PARENT-ONLY" not in json.dumps(fake.last("/v1/chat/completions").json)
