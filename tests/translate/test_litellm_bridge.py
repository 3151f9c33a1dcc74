"""Across dialects through litellm for a route with ``translate: true``: the official anthropic client to an
OpenAI-compatible upstream, the official openai client to an Anthropic upstream, streamed and whole; a route's key."""

from __future__ import annotations

import json
from typing import Any

import anthropic
import openai
import pytest

from tests.conftest import MakeProxy, base_url, config_for
from tests.fake_upstream import FakeUpstream

BILLING = "x-anthropic-billing-header: cc_version=2.1.37.0d9; cc_entrypoint=cli; cch=fa690;"


@pytest.fixture(autouse=True)
def no_model_map_fetch(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("LITELLM_LOCAL_MODEL_COST_MAP", "True")


async def test_an_anthropic_client_reaches_an_openai_upstream_through_litellm(make_proxy: MakeProxy, fake: FakeUpstream) -> None:
    proxy = await make_proxy("openai", default_route={"translate": True})
    client = anthropic.AsyncAnthropic(base_url=base_url(proxy), api_key="sk-client", max_retries=0)
    system: Any = [{"type": "text", "text": BILLING}, {"type": "text", "text": "You are Claude Code.", "cache_control": {"type": "ephemeral"}}]
    whole = await client.messages.create(model="gpt-4o", max_tokens=50, system=system, messages=[{"role": "user", "content": "Hello"}])
    assert whole.content[0].text == fake.reply  # type: ignore[union-attr]
    received = fake.last("/v1/chat/completions").json
    assert "billing" not in json.dumps(received)  # dropped for another provider
    assert "You are Claude Code." in json.dumps(received["messages"][0])
    async with client.messages.stream(model="gpt-4o", max_tokens=50, messages=[{"role": "user", "content": "Hello again"}]) as stream:
        text = "".join([t async for t in stream.text_stream])
    assert text == fake.reply
    read: Any = {"name": "read_file", "description": "Read a file.", "input_schema": {"type": "object", "properties": {"path": {"type": "string"}}}}
    asked = await client.messages.create(model="gpt-4o", max_tokens=50, tools=[read], messages=[{"role": "user", "content": "Read it"}])
    assert asked.content[-1].type == "tool_use" and asked.content[-1].input == {"path": "README.md"}


async def test_an_openai_client_reaches_an_anthropic_upstream_through_litellm(make_proxy: MakeProxy, fake: FakeUpstream) -> None:
    proxy = await make_proxy("anthropic", default_route={"translate": True})
    client = openai.AsyncOpenAI(base_url=base_url(proxy) + "/v1", api_key="sk-ant-client", max_retries=0)
    whole = await client.chat.completions.create(model="claude-opus-4-5", messages=[{"role": "user", "content": "Hello"}], max_tokens=50)
    assert whole.choices[0].message.content == fake.reply
    sent = fake.last("/v1/messages").json
    assert sent["model"] == "claude-opus-4-5" and sent["messages"] == [{"role": "user", "content": [{"type": "text", "text": "Hello"}]}]
    stream = await client.chat.completions.create(model="claude-opus-4-5", messages=[{"role": "user", "content": "Hi"}], max_tokens=50, stream=True)
    text = "".join([chunk.choices[0].delta.content or "" async for chunk in stream if chunk.choices])
    assert text == fake.reply


async def test_an_openai_client_to_an_anthropic_route_without_translation_gets_a_clear_400(make_proxy: MakeProxy) -> None:
    proxy = await make_proxy("anthropic")
    client = openai.AsyncOpenAI(base_url=base_url(proxy) + "/v1", api_key="sk", max_retries=0)
    with pytest.raises(openai.BadRequestError) as bad:
        await client.chat.completions.create(model="claude-opus-4-5", messages=[{"role": "user", "content": "x"}])
    message = str(bad.value)
    assert "default route" in message and "Anthropic Messages" in message and "OpenAI chat" in message and "translate: true" in message


async def test_an_anthropic_routes_key_goes_as_x_api_key(
    make_proxy: MakeProxy, fake: FakeUpstream, upstream: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("ROUTE_KEY", "sk-ant-route")
    proxy = await make_proxy(config=config_for(base_url(upstream), "anthropic", default_route={"api_key": "env:ROUTE_KEY"}))
    client = anthropic.AsyncAnthropic(base_url=base_url(proxy), api_key="sk-ant-client", max_retries=0)
    await client.messages.create(model="claude-opus-4-5", max_tokens=5, messages=[{"role": "user", "content": "x"}])
    headers = {k.lower(): v for k, v in fake.last("/v1/messages").headers.items()}
    assert headers["x-api-key"] == "sk-ant-route" and "authorization" not in headers


async def test_an_ollama_client_reaches_an_anthropic_upstream_through_litellm(make_proxy: MakeProxy, fake: FakeUpstream) -> None:
    import ollama

    proxy = await make_proxy("anthropic", default_route={"translate": True})
    client = ollama.AsyncClient(host=base_url(proxy), headers={"x-api-key": "sk-ant-client"})  # or the route's api_key
    whole = await client.chat(model="claude-opus-4-5", messages=[{"role": "user", "content": "Hello"}], stream=False, options={"num_predict": 50})
    assert whole.message.content == fake.reply and whole.done
    sent = fake.last("/v1/messages").json
    assert sent["max_tokens"] == 50 and sent["messages"][0]["role"] == "user"
    parts = [part async for part in await client.chat(model="claude-opus-4-5", messages=[{"role": "user", "content": "Hi"}], stream=True)]
    assert "".join(p.message.content or "" for p in parts) == fake.reply and parts[-1].done
    tool = {
        "type": "function",
        "function": {
            "name": "read_file",
            "description": "Read a file.",
            "parameters": {"type": "object", "properties": {"path": {"type": "string"}}},
        },
    }
    asked = await client.chat(model="claude-opus-4-5", messages=[{"role": "user", "content": "Read it"}], tools=[tool], stream=False)
    assert asked.message.tool_calls and asked.message.tool_calls[0].function.arguments == {"path": "README.md"}
    generated = await client.generate(model="claude-opus-4-5", prompt="Say hello", stream=False)
    assert generated.response == fake.reply


async def test_an_anthropic_client_reaches_an_ollama_upstream_through_litellm(make_proxy: MakeProxy, fake: FakeUpstream) -> None:
    proxy = await make_proxy("ollama", default_route={"translate": True})
    client = anthropic.AsyncAnthropic(base_url=base_url(proxy), api_key="unused", max_retries=0)
    whole = await client.messages.create(
        model="llama3.1:8b", max_tokens=50, system=BILLING + "\nBe brief.", messages=[{"role": "user", "content": "Hello"}]
    )
    assert whole.content[0].text == fake.reply  # type: ignore[union-attr]
    sent = fake.last("/v1/chat/completions").json  # Ollama's OpenAI-compatible endpoint
    assert "billing" not in json.dumps(sent) and "Be brief." in json.dumps(sent)
