"""OpenAI chat completions through Ruyi with the official client: sync, async, streaming, tool calls."""

from __future__ import annotations

import asyncio
import json

import aiohttp
import openai
import pytest
from aiohttp.test_utils import TestServer

from tests.conftest import MakeProxy, base_url
from tests.fake_upstream import FakeUpstream

MESSAGES = [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Say hello."}]
TOOLS = [{"type": "function", "function": {"name": "read_file", "parameters": {"type": "object", "properties": {"path": {"type": "string"}}}}}]


async def test_async_client_non_streaming(make_proxy: MakeProxy, fake: FakeUpstream) -> None:
    proxy = await make_proxy()
    client = openai.AsyncOpenAI(base_url=base_url(proxy) + "/v1", api_key="sk-client-key-123456")
    result = await client.chat.completions.create(model="gpt-4o", messages=MESSAGES)  # type: ignore[arg-type]
    assert result.choices[0].message.content == fake.reply
    assert result.usage is not None and result.usage.prompt_tokens > 0
    got = fake.last("/v1/chat/completions")
    assert got.json["messages"] == MESSAGES
    assert got.headers["Authorization"] == "Bearer sk-client-key-123456"


async def test_sync_client_streaming(make_proxy: MakeProxy, fake: FakeUpstream) -> None:
    proxy = await make_proxy()

    def run() -> str:
        client = openai.OpenAI(base_url=base_url(proxy) + "/v1", api_key="k")
        stream = client.chat.completions.create(model="gpt-4o", messages=MESSAGES, stream=True)  # type: ignore[arg-type]
        return "".join(c.choices[0].delta.content or "" for c in stream if c.choices)

    assert await asyncio.to_thread(run) == fake.reply


async def test_async_streaming_with_usage_and_tool_calls(make_proxy: MakeProxy, fake: FakeUpstream) -> None:
    proxy = await make_proxy()
    client = openai.AsyncOpenAI(base_url=base_url(proxy) + "/v1", api_key="k")
    stream = await client.chat.completions.create(model="gpt-4o", messages=MESSAGES, tools=TOOLS, stream=True, stream_options={"include_usage": True})
    args, names, usage = "", "", None
    async for chunk in stream:
        if chunk.usage:
            usage = chunk.usage
        for choice in chunk.choices:
            for call in choice.delta.tool_calls or ():
                names += call.function.name or "" if call.function else ""
                args += call.function.arguments or "" if call.function else ""
    assert names == "read_file"
    assert json.loads(args) == {"path": "README.md"}
    assert usage is not None and usage.prompt_tokens > 0


async def test_forwarded_body_is_byte_identical(make_proxy: MakeProxy, fake: FakeUpstream, upstream: TestServer) -> None:
    proxy = await make_proxy()
    raw = b'{"model":"gpt-4o",  "messages":[{"role":"user","content":"caf\\u00e9"}],"x_unknown":{"keep":[1,2]}}'
    async with aiohttp.ClientSession() as http:
        async with http.post(base_url(proxy) + "/v1/chat/completions", data=raw, headers={"Content-Type": "application/json"}) as resp:
            assert (await resp.json())["choices"][0]["message"]["content"] == fake.reply
    assert fake.last().body == raw


async def test_the_upstreams_request_id_is_relayed_and_ruyis_own_has_its_header(make_proxy: MakeProxy, fake: FakeUpstream) -> None:
    """The OpenAI SDK's ``_request_id`` is the provider's (support tickets need it); Ruyi's is X-Ruyi-Request-Id."""
    proxy = await make_proxy()
    client = openai.AsyncOpenAI(base_url=base_url(proxy) + "/v1", api_key="k", max_retries=0)
    given = await client.chat.completions.with_raw_response.create(model="m", messages=MESSAGES, extra_headers={"X-Request-Id": "abc-123"})  # type: ignore[arg-type]
    assert given.request_id == "req_fake_upstream_0001" and given.parse()._request_id == "req_fake_upstream_0001"
    assert given.headers["x-ruyi-request-id"] == "abc-123"  # the client's own id names the request in Ruyi's log
    fresh = await client.chat.completions.with_raw_response.create(model="m", messages=MESSAGES, stream=True)  # type: ignore[arg-type]
    assert fresh.headers["x-request-id"] == "req_fake_upstream_0001" and len(fresh.headers["x-ruyi-request-id"]) == 32
    fake.fault, fake.status = "status", 400
    with pytest.raises(openai.BadRequestError) as err:
        await client.chat.completions.create(model="m", messages=MESSAGES)  # type: ignore[arg-type]
    assert err.value.request_id == "req_fake_upstream_0001"
    fake.request_id = None  # an upstream that sends none (Ollama): X-Request-Id is Ruyi's, as is an error of Ruyi's own
    fake.fault = None
    quiet = await client.chat.completions.with_raw_response.create(model="m", messages=MESSAGES)  # type: ignore[arg-type]
    assert quiet.request_id == quiet.headers["x-ruyi-request-id"]
    with pytest.raises(openai.BadRequestError) as err:
        await client.chat.completions.create(model="", messages=MESSAGES)  # type: ignore[arg-type]
    assert err.value.request_id is not None and err.value.response.headers["x-ruyi-request-id"] == err.value.request_id
