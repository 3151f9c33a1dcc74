"""The OpenAI Agents SDK's default model (Responses, through its OpenAI provider) with a function tool, run by
``Runner.run`` through Ruyi: in front of an upstream speaking the Responses API, and of a chat-only one with
``translate: true``. The SDK sends the whole input each turn (no ``previous_response_id``), so Ruyi sees, measures and
keeps the conversation as one session."""

from __future__ import annotations

import json
from typing import Any

import aiohttp
import openai
import pytest
from agents import Agent, RunConfig, Runner, function_tool
from agents.models.openai_provider import OpenAIProvider

from tests.conftest import MakeProxy, base_url
from tests.fake_upstream import FakeUpstream

READ_FILE_CALLS: list[str] = []


@function_tool
def read_file(path: str) -> str:
    """Read a file of the repository.

    Args:
        path: The file's path.
    """
    READ_FILE_CALLS.append(path)
    return f"# {path}\nRuyi rewrites context for agents."


@pytest.fixture(autouse=True)
def no_tracing(monkeypatch: pytest.MonkeyPatch) -> None:
    """The SDK exports traces to OpenAI unless told not to: nothing leaves 127.0.0.1."""
    monkeypatch.setenv("OPENAI_AGENTS_DISABLE_TRACING", "1")
    READ_FILE_CALLS.clear()


@pytest.mark.parametrize("speaks", ["responses", "chat-only"])
async def test_the_agents_sdk_default_model_runs_a_tool_through_ruyi(make_proxy: MakeProxy, fake: FakeUpstream, speaks: str) -> None:
    proxy = await make_proxy(default_route={"translate": True} if speaks == "chat-only" else {})
    client = openai.AsyncOpenAI(base_url=base_url(proxy) + "/v1", api_key="sk-test", max_retries=0)
    agent = Agent(name="Reader", instructions="Answer from the files.", tools=[read_file])  # no model named: the SDK's default
    config = RunConfig(model_provider=OpenAIProvider(openai_client=client), tracing_disabled=True)
    result = await Runner.run(agent, "What does the README say?", run_config=config)
    await client.close()
    assert result.final_output == fake.reply
    assert READ_FILE_CALLS == ["README.md"]  # the model's call reached the tool, its output went back
    if speaks == "responses":
        sent = [r.json for r in fake.received if r.path == "/v1/responses"]
        assert len(sent) == 2 and not any(b.get("previous_response_id") for b in sent)  # the whole input, every turn
        last = sent[-1]["input"]
        assert [i.get("type", "message") for i in last] == ["message", "function_call", "function_call_output"]
        assert last[1]["call_id"] == last[2]["call_id"] and "Ruyi rewrites" in json.dumps(last[2]["output"])
    else:
        sent = [r.json for r in fake.received if r.path == "/v1/chat/completions"]
        assert len(sent) == 2 and not [r for r in fake.received if r.path == "/v1/responses"]
        messages: list[dict[str, Any]] = sent[-1]["messages"]
        assert [m["role"] for m in messages] == ["system", "user", "assistant", "tool"]
        assert messages[2]["tool_calls"][0]["id"] == messages[3]["tool_call_id"]
    async with aiohttp.ClientSession() as http:
        async with http.get(base_url(proxy) + "/ruyi/v1/sessions", headers={"Authorization": "Bearer sk-test"}) as resp:
            listed = (await resp.json())["sessions"]
    assert [s["requests"] for s in listed] == [2]  # one Ruyi session: the second turn continues the first
