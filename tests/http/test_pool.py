"""The upstream pool: sized for agents that stream, and a bounded wait for a connection that ends in a clear 503."""

from __future__ import annotations

import asyncio
import json

import aiohttp
import ollama
import openai
import pytest
from aiohttp.test_utils import TestServer

from proxy import appkeys
from tests.conftest import MakeProxy, base_url
from tests.fake_upstream import FakeUpstream

MESSAGES = [{"role": "user", "content": "hi"}]
HANG_GUARD = aiohttp.ClientTimeout(total=60)
"""Not a timed assertion: a request that would hang fails the test instead of stalling the suite."""


async def open_stream(http: aiohttp.ClientSession, proxy: TestServer) -> aiohttp.ClientResponse:
    body = json.dumps({"model": "m", "messages": MESSAGES, "stream": True})
    resp = await http.post(base_url(proxy) + "/v1/chat/completions", data=body, headers={"Content-Type": "application/json"})
    assert resp.status == 200
    assert (await resp.content.readline()).startswith(b"data: ")
    return resp


@pytest.mark.timeout(180)  # 130 streams opened at once through Ruyi: slow on a loaded 2-core machine, never hung
async def test_more_streaming_agents_than_the_old_pool_held_all_get_their_first_chunk(make_proxy: MakeProxy, fake: FakeUpstream) -> None:
    fake.reply, fake.chunk_delay = " ".join(["word"] * 400), 0.05  # each stream lasts far longer than this test needs
    proxy = await make_proxy()
    guard = aiohttp.ClientTimeout(total=170)  # the opening of 130 streams at once, on a slow machine: still bounded
    async with aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=0), timeout=guard) as http:
        streams = await asyncio.gather(*(open_stream(http, proxy) for _ in range(130)))
        assert fake.active_streams == 130  # all open at once: none waited for another to finish
        for resp in streams:
            resp.close()


async def test_a_full_pool_answers_503_in_each_wire_format_after_a_bounded_wait(make_proxy: MakeProxy, fake: FakeUpstream) -> None:
    fake.reply, fake.chunk_delay = " ".join(["word"] * 400), 0.05
    proxy = await make_proxy(upstream={"max_connections": 2, "pool_wait_seconds": 0.2})
    async with aiohttp.ClientSession(timeout=HANG_GUARD) as http:
        streams = [await open_stream(http, proxy), await open_stream(http, proxy)]
        client = openai.AsyncOpenAI(base_url=base_url(proxy) + "/v1", api_key="k", max_retries=0, timeout=60)
        with pytest.raises(openai.APIStatusError) as err:
            await client.chat.completions.create(model="m", messages=MESSAGES)  # type: ignore[arg-type]
        assert err.value.status_code == 503
        assert err.value.code == "upstream_pool_exhausted" and "max_connections" in err.value.message
        assert err.value.response.headers["Retry-After"] == "1"
        async with http.get(base_url(proxy) + "/v1/models") as resp:  # passthrough takes a slot too
            assert resp.status == 503 and (await resp.json())["error"]["code"] == "upstream_pool_exhausted"
        async with http.get(base_url(proxy) + "/ruyi/v1/stats") as resp:
            assert (await resp.json())["upstream_pool"] == {"max_connections": 2, "in_use": 2, "refused": 2}
        for resp in streams:
            resp.close()
        received = len(fake.received)
        completion = await client.chat.completions.create(model="m", messages=MESSAGES)  # type: ignore[arg-type]
        assert completion.choices[0].message.content  # slots come back when streams end
        assert len(fake.received) == received + 1


async def test_a_full_pool_answers_503_to_ollama_clients_in_their_format(make_proxy: MakeProxy, fake: FakeUpstream) -> None:
    fake.reply, fake.chunk_delay = " ".join(["word"] * 400), 0.05
    proxy = await make_proxy("ollama", upstream={"max_connections": 1, "pool_wait_seconds": 0.2})
    async with aiohttp.ClientSession(timeout=HANG_GUARD) as http:
        body = json.dumps({"model": "m", "messages": MESSAGES})
        resp = await http.post(base_url(proxy) + "/api/chat", data=body)
        assert resp.status == 200 and (await resp.content.readline()).startswith(b"{")
        with pytest.raises(ollama.ResponseError) as err:
            await ollama.AsyncClient(host=base_url(proxy)).chat(model="m", messages=MESSAGES, stream=False)
        assert err.value.status_code == 503 and "upstream connections" in err.value.error
        resp.close()
    assert proxy.app[appkeys.SLOTS].refused == 1
