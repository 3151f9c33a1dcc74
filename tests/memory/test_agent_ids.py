"""Sessions from the agent's own id: a resumed Claude Code conversation (``claude -c``, its reminders rewritten)
continues its Ruyi session; its sub-agents and side requests, sent with the same id, stay sessions of their own. Codex's
id (its ``session-id`` header, ``prompt_cache_key``) names its session, within the caller's agent."""

from __future__ import annotations

import json
from typing import Any

import aiohttp
import openai
import pytest
from multidict import CIMultiDict

from memory.agent_ids import conversation_of
from tests.conftest import MakeProxy, base_url
from tests.conversation.agent_bodies import CLAUDE_REMINDER_BEFORE, REQUEST
from tests.fake_upstream import FakeUpstream
from tests.longctx.sessions import turn

SYSTEM = "You are Claude Code, Anthropic's official CLI for Claude."


async def send(proxy: Any, messages: list[dict[str, Any]], claude_session: str | None) -> str:
    headers = {"X-Ruyi-Agent": "cc"}
    if claude_session is not None:
        headers["X-Claude-Code-Session-Id"] = claude_session
    async with aiohttp.ClientSession() as http:
        resp = await http.post(base_url(proxy) + "/v1/chat/completions", headers=headers, json={"model": "gpt-4o", "messages": messages})
        await resp.read()
        assert resp.status == 200
        return resp.headers["X-Ruyi-Session"]


def conversation(date: str, turns: int) -> list[dict[str, Any]]:
    first = {"role": "user", "content": CLAUDE_REMINDER_BEFORE.replace("2026-11-27", date) + REQUEST}
    out = [{"role": "system", "content": SYSTEM}, first]
    for t in range(turns):
        out += turn(t, lines=4)
    return out


async def test_a_resumed_conversation_continues_its_session_and_sub_agents_stay_apart(make_proxy: MakeProxy, fake: FakeUpstream) -> None:
    proxy = await make_proxy()
    ids = {await send(proxy, conversation("2026-11-27", t), "cc-1") for t in range(1, 6)}
    assert len(ids) == 1
    main = ids.pop()
    side = await send(proxy, [{"role": "system", "content": "Write a 5-word title."}, {"role": "user", "content": REQUEST}], "cc-1")
    child = await send(proxy, [{"role": "system", "content": "You are a sub-agent."}, {"role": "user", "content": "Find the tests"}], "cc-1")
    assert side != main and child != main and side != child
    resumed = await send(proxy, conversation("2026-11-28", 7), "cc-1")  # the next day: the reminder changed
    assert resumed == main
    elsewhere = await send(proxy, conversation("2026-11-29", 8), "cc-2")  # another conversation of the agent: not resumed
    assert elsewhere != main
    anonymous = await send(proxy, conversation("2026-11-30", 8), None)  # without the id, the chain index alone decides
    assert anonymous != main


CODEX_TASK = [{"role": "user", "content": "Fix the failing test."}]


def codex_turns(turns: int) -> list[dict[str, Any]]:
    """A Codex conversation's input after ``turns`` shell calls."""
    items: list[dict[str, Any]] = list(CODEX_TASK)
    for n in range(turns):
        items += [
            {"type": "function_call", "call_id": f"call_{n}", "name": "shell", "arguments": json.dumps({"command": ["ls", f"d{n}"]})},
            {"type": "function_call_output", "call_id": f"call_{n}", "output": f"file_{n}.py"},
        ]
    return items


async def codex_send(proxy: Any, agent: str, items: list[dict[str, Any]], *, key: str | None = None, header: str | None = None) -> str:
    """One Responses request from the openai client, as Codex sends it: its id as ``prompt_cache_key`` and/or a header."""
    client = openai.AsyncOpenAI(base_url=base_url(proxy) + "/v1", api_key="sk-test", max_retries=0, default_headers={"X-Ruyi-Agent": agent})
    extra = {"session-id": header} if header is not None else None
    raw = await client.responses.with_raw_response.create(
        model="gpt-5-codex",
        instructions="You are Codex.",
        input=items,  # type: ignore[arg-type]
        prompt_cache_key=key if key is not None else openai.omit,
        extra_headers=extra,
    )
    raw.parse()
    await client.close()
    return raw.headers["X-Ruyi-Session"]


async def sessions_of(proxy: Any, agent: str) -> dict[str, int]:
    async with aiohttp.ClientSession() as http:
        async with http.get(base_url(proxy) + "/ruyi/v1/sessions", headers={"X-Ruyi-Agent": agent}) as resp:
            return {s["session_id"]: s["requests"] for s in (await resp.json())["sessions"]}


@pytest.mark.parametrize("sent_as", ["prompt_cache_key", "header"])
async def test_codex_ids_name_its_sessions_within_the_agent(make_proxy: MakeProxy, fake: FakeUpstream, sent_as: str) -> None:
    proxy = await make_proxy()

    async def send(agent: str, items: list[dict[str, Any]], codex_id: str) -> str:
        given = {"key": codex_id} if sent_as == "prompt_cache_key" else {"header": codex_id}
        return await codex_send(proxy, agent, items, **given)

    first = await send("codex", codex_turns(1), "019a-aaaa")
    second = await send("codex", codex_turns(1), "019a-bbbb")  # the very same input under another id: another session
    assert (first, second) == ("019a-aaaa", "019a-bbbb")
    await send("codex", codex_turns(2), "019a-bbbb")
    anonymous = await codex_send(proxy, "codex", codex_turns(3))  # no id: the chain index decides (it continues bbbb's)
    assert anonymous == "019a-bbbb"
    compacted = [{"role": "user", "content": "Summary of the work so far: ls in d0."}, *codex_turns(4)[len(CODEX_TASK) :]]
    again = await send("codex", compacted, "019a-aaaa")  # after a gap, its history rewritten by Codex's own compaction
    assert again == first
    assert await sessions_of(proxy, "codex") == {"019a-aaaa": 2, "019a-bbbb": 3}
    elsewhere = await send("other-agent", codex_turns(5), "019a-aaaa")  # another agent's request with the same id
    assert elsewhere == "019a-aaaa"  # the same name, within that agent: a session of its own
    assert await sessions_of(proxy, "other-agent") == {"019a-aaaa": 1}
    assert (await sessions_of(proxy, "codex"))["019a-aaaa"] == 2


def test_which_id_names_a_conversation() -> None:
    """Codex's thread id before its session id (a sub-agent's thread is its own conversation), either before the body's
    key; an id that looks like a secret is never the session's name; Claude Code's id names nothing."""
    both = {"thread-id": "thread-2", "session-id": "root-1"}
    assert conversation_of(both, {"prompt_cache_key": "key-3"}) == "thread-2"
    assert conversation_of(CIMultiDict({"Session-Id": "root-1"}), {"prompt_cache_key": "key-3"}) == "root-1"
    assert conversation_of({"session_id": "old-codex"}, {}) == "old-codex"
    assert conversation_of({}, {"prompt_cache_key": "key-3"}) == "key-3"
    secret = conversation_of({}, {"prompt_cache_key": "sk-proj-" + "a1B2c3D4" * 6})
    assert secret is not None and secret.startswith("h-") and "a1B2" not in secret
    assert conversation_of({"X-Claude-Code-Session-Id": "cc-1"}, {"prompt_cache_key": 7}) is None
