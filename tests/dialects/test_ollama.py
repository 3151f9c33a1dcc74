"""Ollama's native API through Ruyi with the official ``ollama`` client: chat, generate, passthrough."""

from __future__ import annotations

import json

import ollama

from tests.conftest import MakeProxy, base_url
from tests.fake_upstream import FakeUpstream

TOOLS = [
    {
        "type": "function",
        "function": {"name": "read_file", "description": "read", "parameters": {"type": "object", "properties": {"path": {"type": "string"}}}},
    }
]


async def test_chat_streams_ndjson(make_proxy: MakeProxy, fake: FakeUpstream) -> None:
    proxy = await make_proxy("ollama")
    client = ollama.AsyncClient(host=base_url(proxy))
    parts = [p async for p in await client.chat(model="llama3.1:8b", messages=[{"role": "user", "content": "hi"}], stream=True)]
    assert "".join(p.message.content or "" for p in parts) == fake.reply
    assert parts[-1].done and parts[-1].prompt_eval_count
    assert fake.last("/api/chat").json["messages"] == [{"role": "user", "content": "hi"}]


async def test_chat_not_streamed_with_tool_calls(make_proxy: MakeProxy, fake: FakeUpstream) -> None:
    proxy = await make_proxy("ollama")
    client = ollama.AsyncClient(host=base_url(proxy))
    result = await client.chat(model="llama3.1:8b", messages=[{"role": "user", "content": "read it"}], tools=TOOLS, stream=False)
    assert result.message.tool_calls and result.message.tool_calls[0].function.name == "read_file"
    assert fake.last("/api/chat").json["stream"] is False


async def test_tool_history_is_forwarded_byte_for_byte(make_proxy: MakeProxy, fake: FakeUpstream) -> None:
    proxy = await make_proxy("ollama")
    client = ollama.AsyncClient(host=base_url(proxy))
    messages = [
        {"role": "user", "content": "read it"},
        {"role": "assistant", "content": "", "tool_calls": [{"function": {"name": "read_file", "arguments": {"path": "a.py"}}}]},
        {"role": "tool", "content": "print(1)", "tool_name": "read_file"},
    ]
    await client.chat(model="llama3.1:8b", messages=messages, stream=False)
    sent = fake.last("/api/chat").json["messages"]
    assert sent[1]["tool_calls"][0]["function"]["arguments"] == {"path": "a.py"}
    assert sent[2]["tool_name"] == "read_file"


async def test_generate_streams_and_not(make_proxy: MakeProxy, fake: FakeUpstream) -> None:
    proxy = await make_proxy("ollama")
    client = ollama.AsyncClient(host=base_url(proxy))
    parts = [p async for p in await client.generate(model="llama3.1:8b", prompt="hi", stream=True)]
    assert "".join(p.response for p in parts) == fake.reply
    whole = await client.generate(model="llama3.1:8b", prompt="hi", stream=False)
    assert whole.response == fake.reply and whole.context == [1, 2, 3]


async def test_passthrough_endpoints(make_proxy: MakeProxy, fake: FakeUpstream) -> None:
    proxy = await make_proxy("ollama")
    client = ollama.AsyncClient(host=base_url(proxy))
    tags = await client.list()
    assert tags.models[0].model == "llama3.1:8b"
    shown = await client.show("llama3.1:8b")
    assert shown.modelinfo and shown.modelinfo["llama.context_length"] == fake.context_length
    statuses = [p.status async for p in await client.pull("llama3.1:8b", stream=True)]
    assert statuses == ["pulling manifest", "verifying", "success"]
    assert json.loads(fake.last("/api/pull").body)["model"] == "llama3.1:8b"


async def test_openai_compat_path_on_an_ollama_route(make_proxy: MakeProxy, fake: FakeUpstream) -> None:
    import openai

    proxy = await make_proxy("ollama")
    client = openai.AsyncOpenAI(base_url=base_url(proxy) + "/v1", api_key="ollama")
    result = await client.chat.completions.create(model="llama3.1:8b", messages=[{"role": "user", "content": "hi"}])
    assert result.choices[0].message.content == fake.reply
    assert fake.last().path == "/v1/chat/completions"
