"""A small window: the newest turn's big texts cut to fit, and a request that cannot fit refused in the client's format."""

from __future__ import annotations

import re
from typing import Any

import aiohttp
import anthropic
import ollama
import openai
import pytest

from tests.conftest import MakeProxy, base_url
from tests.fake_upstream import FakeUpstream

SMALL = {"models": {"gpt-4o*": 4096, "claude-*": 4096, "smollm*": 4096}, "ask_server": False}
USABLE = 4096 - 2000  # less the answer's reserve


def lines(tag: str, n: int) -> str:
    return "\n".join(f"{tag} line {i}: value_{i} = compute({i}, {i * 7})" for i in range(n))


def session(thinking: str) -> list[dict[str, Any]]:
    """A first request whose newest turn is the agent's own long reasoning before a call, then the call's short output."""
    call = {"id": "call_1", "type": "function", "function": {"name": "bash", "arguments": '{"command": "make"}'}}
    return [
        {"role": "system", "content": "You are a coding agent."},
        {"role": "user", "content": "Why does the build fail?"},
        {"role": "assistant", "content": thinking, "tool_calls": [call]},
        {"role": "tool", "tool_call_id": "call_1", "content": "make: *** [all] Error 1"},
    ]


async def test_the_newest_turn_too_big_for_a_4k_window_is_cut_and_its_original_kept(make_proxy: MakeProxy, fake: FakeUpstream) -> None:
    proxy = await make_proxy(window=SMALL)
    messages = session(lines("log", 300))  # the agent's own words, about 5,000 tokens: the newest turn, never pruned
    async with aiohttp.ClientSession() as http:
        async with http.post(base_url(proxy) + "/v1/chat/completions", json={"model": "gpt-4o", "messages": messages}) as r:
            assert r.status == 200
            after, before = int(r.headers["X-Ruyi-Tokens-After"]), int(r.headers["X-Ruyi-Tokens-Before"])
        sent = fake.last().json["messages"]
        assert before > 4096 >= USABLE >= after, "under the usable window, not only the window"
        assert sent[:2] == messages[:2] and sent[3] == messages[3], "the system text, the task and the output are untouched"
        assert sent[2]["tool_calls"] == messages[2]["tool_calls"]
        cut = sent[2]["content"]
        assert cut.startswith("[ruyi: cut from") and "log line 0:" in cut and "log line 299:" in cut and "log line 150:" not in cut
        ref = re.search(r"ref (r[0-9a-f]{12})", cut)
        assert ref is not None
        async with http.get(base_url(proxy) + f"/ruyi/v1/refs/{ref.group(1)}") as r:
            assert r.status == 200 and messages[2]["content"] in (await r.json()).values()


async def test_a_request_whose_task_alone_is_over_the_window_is_refused_as_openai_refuses_it(make_proxy: MakeProxy, fake: FakeUpstream) -> None:
    proxy = await make_proxy(window=SMALL)
    client = openai.AsyncOpenAI(base_url=base_url(proxy) + "/v1", api_key="sk-test", max_retries=0)
    with pytest.raises(openai.BadRequestError) as caught:
        await client.chat.completions.create(model="gpt-4o", messages=[{"role": "user", "content": "Review this: " + lines("code", 400)}])
    assert caught.value.code == "context_length_exceeded"
    message = str(caught.value)
    assert "maximum context length is 4096 tokens" in message and "the system text and the task" in message
    assert caught.value.response.headers["X-Ruyi-Window-Source"] == "config"
    assert [r for r in fake.received if r.path.endswith("/chat/completions")] == [], "nothing was sent over the window"
    async with aiohttp.ClientSession() as http, http.get(base_url(proxy) + "/ruyi/v1/stats") as r:
        stats = await r.json()
    assert stats["refused"] == {"unfit": 1} and "unfit" not in stats["failed_open"]


async def test_anthropic_clients_get_prompt_is_too_long(make_proxy: MakeProxy, fake: FakeUpstream) -> None:
    proxy = await make_proxy("anthropic", window=SMALL)
    client = anthropic.AsyncAnthropic(base_url=base_url(proxy), api_key="sk-ant-test", max_retries=0)
    with pytest.raises(anthropic.BadRequestError) as caught:
        await client.messages.create(model="claude-opus-4-5", max_tokens=100, messages=[{"role": "user", "content": lines("doc", 400)}])
    body = caught.value.body
    assert isinstance(body, dict) and body["type"] == "error" and body["error"]["type"] == "invalid_request_error"
    assert body["error"]["message"].startswith("prompt is too long: ") and "> 4096 maximum" in body["error"]["message"]
    assert [r for r in fake.received if r.path == "/v1/messages"] == []


async def test_ollama_clients_get_their_error_shape(make_proxy: MakeProxy, fake: FakeUpstream) -> None:
    proxy = await make_proxy("ollama", window=SMALL)
    client = ollama.AsyncClient(host=base_url(proxy))
    with pytest.raises(ollama.ResponseError) as caught:
        await client.chat(model="smollm2", messages=[{"role": "user", "content": lines("doc", 400)}])
    assert caught.value.status_code == 400 and "maximum context length is 4096 tokens" in caught.value.error
    assert [r for r in fake.received if r.path == "/api/chat"] == []


@pytest.mark.parametrize("window", [{"context_window": 4096, "ask_server": False}, {**SMALL, "refuse_over": False}])
async def test_a_guessed_window_or_refuse_over_off_sends_it_as_it_is(make_proxy: MakeProxy, fake: FakeUpstream, window: dict[str, Any]) -> None:
    proxy = await make_proxy(window=window)
    client = openai.AsyncOpenAI(base_url=base_url(proxy) + "/v1", api_key="sk-test", max_retries=0)
    model = "gpt-4o" if "models" in window else "my-own-finetune"  # a model nothing knows: the window is a guess
    await client.chat.completions.create(model=model, messages=[{"role": "user", "content": "Review this: " + lines("code", 400)}])
    assert fake.last().json["messages"][0]["content"].startswith("Review this: ")


@pytest.mark.parametrize("wire", ["anthropic", "responses"])
async def test_the_cut_is_written_back_into_anthropic_and_responses_bodies(make_proxy: MakeProxy, fake: FakeUpstream, wire: str) -> None:
    thinking = "I will run make. " + lines("plan", 300)  # the agent's own words, far over the usable window
    async with aiohttp.ClientSession() as http:
        if wire == "anthropic":
            proxy = await make_proxy("anthropic", window=SMALL)
            body: dict[str, Any] = {
                "model": "claude-opus-4-5",
                "max_tokens": 100,
                "messages": [
                    {"role": "user", "content": "Why does the build fail?"},
                    {
                        "role": "assistant",
                        "content": [
                            {"type": "text", "text": thinking},
                            {"type": "tool_use", "id": "toolu_1", "name": "bash", "input": {"command": "make"}},
                        ],
                    },
                    {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "toolu_1", "content": "Error 1"}]},
                ],
            }
            path = "/v1/messages"
        else:
            proxy = await make_proxy(window=SMALL)
            body = {
                "model": "gpt-4o",
                "input": [
                    {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "Why does the build fail?"}]},
                    {"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": thinking}]},
                    {"type": "function_call", "call_id": "call_1", "name": "bash", "arguments": '{"command": "make"}'},
                    {"type": "function_call_output", "call_id": "call_1", "output": "Error 1"},
                ],
            }
            path = "/v1/responses"
        async with http.post(base_url(proxy) + path, json=body) as r:
            assert r.status == 200, await r.text()
            assert int(r.headers["X-Ruyi-Tokens-After"]) <= USABLE
    sent = fake.last().json
    if wire == "anthropic":
        assert fake.anthropic_refused == [] and sent["messages"][0] == body["messages"][0] and sent["messages"][2] == body["messages"][2]
        text, call = sent["messages"][1]["content"][0]["text"], sent["messages"][1]["content"][1]
        assert call == body["messages"][1]["content"][1], "the call goes as it came"
    else:
        assert sent["input"][0] == body["input"][0] and sent["input"][2:] == body["input"][2:]
        text = sent["input"][1]["content"][0]["text"]
    assert text.startswith("[ruyi: cut from") and "I will run make." in text and "plan line 299:" in text
