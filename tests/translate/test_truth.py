"""Translations that tell the truth (issue 28): Anthropic's own 400s for what Anthropic refuses, the whole cause of a
translation error, the model as the client named it (no litellm prefix), ``request-id`` for Anthropic clients; Ollama
clients reach an OpenAI-compatible server with ``translate: true``."""

from __future__ import annotations

import json
from typing import Any

import aiohttp
import anthropic
import ollama
import pytest

from tests.conftest import MakeProxy, base_url
from tests.fake_upstream import FakeUpstream


@pytest.fixture(autouse=True)
def no_model_map_fetch(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("LITELLM_LOCAL_MODEL_COST_MAP", "True")


@pytest.mark.parametrize(
    ("body", "words"),
    [
        ({"model": "smollm2", "messages": [{"role": "user", "content": "hi"}]}, "max_tokens"),
        ({"model": "smollm2", "max_tokens": 5, "messages": [{"role": "system", "content": "hi"}]}, "messages.0.role"),
        ({"model": "smollm2", "max_tokens": 5, "messages": []}, "messages"),
    ],
)
async def test_what_anthropic_refuses_is_refused_with_anthropics_400(
    make_proxy: MakeProxy, fake: FakeUpstream, body: dict[str, Any], words: str
) -> None:
    proxy = await make_proxy("openai", default_route={"translate": True})
    async with aiohttp.ClientSession() as http:
        async with http.post(base_url(proxy) + "/v1/messages", json=body, headers={"x-api-key": "k"}) as resp:
            answer = await resp.json()
    assert resp.status == 400, answer
    assert answer["type"] == "error" and answer["error"]["type"] == "invalid_request_error" and words in answer["error"]["message"]
    assert resp.headers.get("request-id")
    assert [r for r in fake.received if r.method == "POST"] == []  # only the window probes reached it


async def test_the_model_is_the_clients_and_request_id_is_set(make_proxy: MakeProxy, fake: FakeUpstream) -> None:
    proxy = await make_proxy("openai", default_route={"translate": True})
    client = anthropic.AsyncAnthropic(base_url=base_url(proxy), api_key="k", max_retries=0)
    whole = await client.messages.create(model="smollm2", max_tokens=20, messages=[{"role": "user", "content": "Hello"}])
    assert whole.model == "smollm2" and whole._request_id
    async with client.messages.stream(model="smollm2", max_tokens=20, messages=[{"role": "user", "content": "Hello"}]) as stream:
        events = [event async for event in stream]
        final = await stream.get_final_message()
    started = [e for e in events if e.type == "message_start"]
    assert started and started[0].message.model == "smollm2" and final.model == "smollm2"


async def test_a_translation_error_keeps_its_whole_cause(make_proxy: MakeProxy, fake: FakeUpstream) -> None:
    proxy = await make_proxy("openai", default_route={"translate": True})
    fake.fault, fake.status = "status", 400
    fake.status_body = {
        "error": {
            "message": "1 validation error for Request\nbody.messages.0.content\n  content should be a valid string",
            "type": "invalid_request_error",
            "code": None,
        }
    }
    client = anthropic.AsyncAnthropic(base_url=base_url(proxy), api_key="k", max_retries=0)
    with pytest.raises(anthropic.BadRequestError) as bad:
        await client.messages.create(model="smollm2", max_tokens=20, messages=[{"role": "user", "content": "Hello"}])
    assert "content should be a valid string" in str(bad.value)


async def test_an_ollama_client_reaches_an_openai_compatible_server(make_proxy: MakeProxy, fake: FakeUpstream) -> None:
    proxy = await make_proxy("openai", default_route={"translate": True})
    client = ollama.AsyncClient(host=base_url(proxy))
    whole = await client.chat(model="smollm2", messages=[{"role": "user", "content": "Hello"}], stream=False, options={"num_predict": 30})
    assert whole.message.content == fake.reply and whole.done and whole.model == "smollm2"
    sent = fake.last("/v1/chat/completions").json
    assert sent["model"] == "smollm2" and sent["max_tokens"] == 30 and sent["messages"][0]["content"] == "Hello"
    parts = [p async for p in await client.chat(model="smollm2", messages=[{"role": "user", "content": "Hi"}], stream=True)]
    assert "".join(p.message.content or "" for p in parts) == fake.reply and parts[-1].done
    tool = {
        "type": "function",
        "function": {
            "name": "read_file",
            "description": "Read a file.",
            "parameters": {"type": "object", "properties": {"path": {"type": "string"}}},
        },
    }
    asked = await client.chat(model="smollm2", messages=[{"role": "user", "content": "Read it"}], tools=[tool], stream=False)
    assert asked.message.tool_calls and asked.message.tool_calls[0].function.arguments == {"path": "README.md"}
    generated = await client.generate(model="smollm2", prompt="Say hello", stream=False)
    assert generated.response == fake.reply
    streamed = [p async for p in await client.generate(model="smollm2", prompt="Say hello", stream=True)]
    assert "".join(p.response for p in streamed) == fake.reply


async def test_an_ollama_client_to_an_openai_route_without_translation_names_both_endpoints(make_proxy: MakeProxy) -> None:
    proxy = await make_proxy("openai")
    async with aiohttp.ClientSession() as http:
        async with http.post(base_url(proxy) + "/api/generate", json={"model": "m", "prompt": "x"}) as resp:
            text = json.dumps(await resp.json())
    assert resp.status == 400 and "/api/generate" in text and "translate: true" in text
