"""Sessions from the agent's own id: a resumed Claude Code conversation (``claude -c``, its reminders rewritten)
continues its Ruyi session; its sub-agents and side requests, sent with the same id, stay sessions of their own."""

from __future__ import annotations

from typing import Any

import aiohttp

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
        resp = await http.post(base_url(proxy) + "/v1/chat/completions", headers=headers,
                               json={"model": "gpt-4o", "messages": messages})
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
