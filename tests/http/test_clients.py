"""The client libraries of the README's table, pointed at Ruyi: LangChain, litellm, the OpenAI Agents SDK's wire."""

from __future__ import annotations

import json
from typing import Any

import aiohttp
import openai
import pytest
from aiohttp.test_utils import TestServer

from tests.conftest import MakeProxy, base_url
from tests.fake_upstream import FakeUpstream

TOOL = {
    "type": "function",
    "function": {
        "name": "read_file",
        "description": "Read a file.",
        "parameters": {"type": "object", "properties": {"path": {"type": "string"}}, "required": ["path"]},
    },
}


async def sessions_of(proxy: TestServer, agent: str) -> list[dict[str, Any]]:
    async with aiohttp.ClientSession() as http:
        async with http.get(base_url(proxy) + "/ruyi/v1/sessions", headers={"X-Ruyi-Agent": agent}) as resp:
            sessions: list[dict[str, Any]] = (await resp.json())["sessions"]
            return sessions


def chat_requests(fake: FakeUpstream) -> list[dict[str, Any]]:
    return [r.json for r in fake.received if r.path == "/v1/chat/completions"]


async def test_langchain_chat_openai_with_base_url(make_proxy: MakeProxy, fake: FakeUpstream) -> None:
    from langchain_core.messages import HumanMessage, ToolMessage
    from langchain_openai import ChatOpenAI

    proxy = await make_proxy()
    llm = ChatOpenAI(model="gpt-4o", base_url=base_url(proxy) + "/v1", api_key="sk-client", default_headers={"X-Ruyi-Agent": "lc"})
    history: list[Any] = [HumanMessage("Read README.md")]
    asked = await llm.bind_tools([TOOL]).ainvoke(history)
    assert asked.tool_calls[0]["name"] == "read_file"
    history += [asked, ToolMessage("# Ruyi", tool_call_id=asked.tool_calls[0]["id"])]
    streamed = "".join([str(chunk.content) async for chunk in llm.astream(history)])
    assert streamed == fake.reply
    assert [len(r["messages"]) for r in chat_requests(fake)] == [1, 3]
    (session,) = await sessions_of(proxy, "lc")  # the answer continued the session the question began
    assert session["requests"] == 2


async def test_litellm_with_api_base(make_proxy: MakeProxy, fake: FakeUpstream, monkeypatch: pytest.MonkeyPatch) -> None:
    """Without tools: litellm 1.106's acompletion imports its MCP handler (and the ``mcp`` package) for any tools."""
    monkeypatch.setenv("LITELLM_LOCAL_MODEL_COST_MAP", "True")  # no fetch of the model map at import
    import litellm

    proxy = await make_proxy()
    common: dict[str, Any] = {
        "model": "openai/gpt-4o",
        "api_base": base_url(proxy) + "/v1",
        "api_key": "sk-client",
        "extra_headers": {"X-Ruyi-Agent": "litellm"},
    }
    messages: list[dict[str, Any]] = [{"role": "user", "content": "Read README.md"}]
    answer = await litellm.acompletion(messages=messages, **common)
    assert answer.choices[0].message.content == fake.reply
    messages += [{"role": "assistant", "content": fake.reply}, {"role": "user", "content": "Now summarise it."}]
    streamed = [chunk.choices[0].delta.content or "" async for chunk in await litellm.acompletion(messages=messages, stream=True, **common)]
    assert "".join(streamed) == fake.reply
    assert [len(r["messages"]) for r in chat_requests(fake)] == [1, 3]
    (session,) = await sessions_of(proxy, "litellm")
    assert session["requests"] == 2


# What the OpenAI Agents SDK (openai-agents 0.24) sent through Ruyi with OpenAIChatCompletionsModel: an agent's
# instructions as the system message, a strict function tool, then the tool's result; the same with stream=True.
# The SDK itself needs openai >= 3 and brings an MCP server stack, too heavy for the test extra: its requests are
# replayed here as it made them, with the official client.
AGENT_TOOL = {
    "type": "function",
    "function": {
        "name": "read_file",
        "description": "Read a file.",
        "strict": True,
        "parameters": {
            "properties": {"path": {"title": "Path", "type": "string"}},
            "required": ["path"],
            "title": "read_file_args",
            "type": "object",
            "additionalProperties": False,
        },
    },
}
AGENT_TURN: list[dict[str, Any]] = [
    {"content": "You are a coding agent.", "role": "system"},
    {"role": "user", "content": "Read README.md and summarise it."},
]
AGENT_RESULT: list[dict[str, Any]] = [
    {
        "role": "assistant",
        "content": None,
        "tool_calls": [{"id": "call_fake_1", "type": "function", "function": {"name": "read_file", "arguments": '{"path": "README.md"}'}}],
    },
    {"role": "tool", "tool_call_id": "call_fake_1", "content": "contents of README.md"},
]


@pytest.mark.parametrize("stream", [False, True])
async def test_agents_sdk_chat_completions_model_requests(make_proxy: MakeProxy, fake: FakeUpstream, stream: bool) -> None:
    proxy = await make_proxy()
    client = openai.AsyncOpenAI(base_url=base_url(proxy) + "/v1", api_key="sk-client", default_headers={"X-Ruyi-Agent": "agents"})
    for messages in (AGENT_TURN, AGENT_TURN + AGENT_RESULT):
        raw = await client.chat.completions.with_raw_response.create(model="gpt-4o", messages=messages, tools=[AGENT_TOOL], stream=stream)
        assert raw.headers["x-ruyi-session"] and raw.headers["x-ruyi-tokens-before"]  # measured: the rewriting endpoint
        if stream:
            async for _ in raw.parse():  # type: ignore[union-attr]
                pass
    assert chat_requests(fake)[-1]["messages"] == AGENT_TURN + AGENT_RESULT
    (session,) = await sessions_of(proxy, "agents")
    assert session["requests"] == 2


async def test_the_responses_api_is_measured_and_sent_as_is_when_nothing_needs_rewriting(make_proxy: MakeProxy, fake: FakeUpstream) -> None:
    """The Agents SDK's default model speaks /v1/responses: Ruyi measures it (a session, a tier) and, with nothing to
    rewrite, forwards the client's very bytes."""
    proxy = await make_proxy()
    body = json.dumps({"model": "gpt-4o", "include": [], "input": [{"content": "hi", "role": "user"}], "instructions": "Be brief.", "tools": []})
    async with aiohttp.ClientSession() as http:
        async with http.post(base_url(proxy) + "/v1/responses", data=body, headers={"Content-Type": "application/json"}) as resp:
            assert resp.status == 200
            assert "X-Ruyi-Session" in resp.headers and "X-Ruyi-Tier" in resp.headers
    assert fake.last().path == "/v1/responses" and fake.last().body == body.encode()
