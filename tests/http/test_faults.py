"""Bad input and upstream faults: clear errors in the client's wire format, clean stream ends, no leaks."""

from __future__ import annotations

import asyncio
import json

import aiohttp
import ollama
import openai
import pytest
from aiohttp.test_utils import TestServer

from proxy import appkeys
from tests.conftest import MakeProxy, base_url, config_for, free_port
from tests.fake_upstream import FakeUpstream

MESSAGES = [{"role": "user", "content": "hi"}]


async def post(server: TestServer, path: str, data: bytes | str, headers: dict[str, str] | None = None) -> tuple[int, object]:
    async with aiohttp.ClientSession() as http:
        async with http.post(base_url(server) + path, data=data, headers=headers or {"Content-Type": "application/json"}) as resp:
            return resp.status, await resp.json(content_type=None)


@pytest.mark.parametrize("body", [b"{not json", b"[1, 2]", b'"text"'])
async def test_malformed_body_is_400_in_each_format(make_proxy: MakeProxy, fake: FakeUpstream, body: bytes) -> None:
    proxy = await make_proxy("ollama")
    status, payload = await post(proxy, "/v1/chat/completions", body)
    assert status == 400
    assert isinstance(payload, dict) and payload["error"]["type"] == "invalid_request_error"
    assert payload["error"]["code"] in ("invalid_json", "invalid_body") and payload["error"]["message"]
    status, payload = await post(proxy, "/api/chat", body)
    assert status == 400 and isinstance(payload, dict) and isinstance(payload["error"], str)
    assert fake.received == []


async def test_body_over_the_limit_is_413(make_proxy: MakeProxy, fake: FakeUpstream) -> None:
    proxy = await make_proxy(limits={"max_body_bytes": 4096})
    big = json.dumps({"model": "m", "messages": [{"role": "user", "content": "x" * 10000}]})
    status, payload = await post(proxy, "/v1/chat/completions", big)
    assert status == 413 and payload["error"]["code"] == "body_too_large"  # type: ignore[index]
    status, payload = await post(proxy, "/api/chat", big)
    assert status == 413 and "limit" in payload["error"]  # type: ignore[index]
    assert fake.received == []


async def test_refused_connection_is_502_naming_the_upstream(aiohttp_server: object) -> None:
    from proxy.http.app import make_app

    port = free_port()
    proxy = await aiohttp_server(make_app(config_for(f"http://127.0.0.1:{port}/v1"), probe_upstream=False))  # type: ignore[operator]
    client = openai.AsyncOpenAI(base_url=base_url(proxy) + "/v1", api_key="k", max_retries=0)
    with pytest.raises(openai.APIStatusError) as err:
        await client.chat.completions.create(model="m", messages=MESSAGES)  # type: ignore[arg-type]
    assert err.value.status_code == 502
    assert f"127.0.0.1:{port}" in err.value.message
    oproxy = await aiohttp_server(make_app(config_for(f"http://127.0.0.1:{port}", "ollama"), probe_upstream=False))  # type: ignore[operator]
    oclient = ollama.AsyncClient(host=base_url(oproxy))
    with pytest.raises(ollama.ResponseError) as oerr:
        await oclient.chat(model="m", messages=MESSAGES, stream=False)
    assert oerr.value.status_code == 502 and f"127.0.0.1:{port}" in oerr.value.error


async def test_upstream_too_slow_is_504(make_proxy: MakeProxy, fake: FakeUpstream) -> None:
    fake.fault, fake.delay = "delay", 2.0
    proxy = await make_proxy(upstream={"read_timeout_seconds": 0.3})
    client = openai.AsyncOpenAI(base_url=base_url(proxy) + "/v1", api_key="k", max_retries=0)
    with pytest.raises(openai.APIStatusError) as err:
        await client.chat.completions.create(model="m", messages=MESSAGES)  # type: ignore[arg-type]
    assert err.value.status_code == 504


async def test_upstream_error_status_is_relayed_unchanged(make_proxy: MakeProxy, fake: FakeUpstream) -> None:
    fake.fault, fake.status = "status", 429
    fake.status_body = {"error": {"message": "slow down", "type": "rate_limit", "code": "rate_limit_exceeded"}}
    proxy = await make_proxy()
    status, payload = await post(proxy, "/v1/chat/completions", json.dumps({"model": "m", "messages": MESSAGES, "stream": True}))
    assert status == 429 and payload == fake.status_body


async def test_cut_sse_stream_ends_with_an_error_event(make_proxy: MakeProxy, fake: FakeUpstream) -> None:
    fake.fault = "cut"
    proxy = await make_proxy()
    client = openai.AsyncOpenAI(base_url=base_url(proxy) + "/v1", api_key="k", max_retries=0)
    got = []
    with pytest.raises(openai.APIError) as err:
        async for chunk in await client.chat.completions.create(model="m", messages=MESSAGES, stream=True):  # type: ignore[arg-type]
            got.extend(c.delta.content for c in chunk.choices)
    assert "closed the stream" in str(err.value)
    assert got  # what arrived before the cut was relayed


async def test_cut_ndjson_stream_ends_with_an_error_line(make_proxy: MakeProxy, fake: FakeUpstream) -> None:
    fake.fault = "cut"
    proxy = await make_proxy("ollama")
    client = ollama.AsyncClient(host=base_url(proxy))
    with pytest.raises(ollama.ResponseError) as err:
        async for _ in await client.chat(model="m", messages=MESSAGES, stream=True):
            pass
    assert "closed the stream" in err.value.error


async def test_client_disconnects_release_upstream_connections(make_proxy: MakeProxy, fake: FakeUpstream) -> None:
    fake.fault, fake.chunk_delay = "slow", 0.2
    proxy = await make_proxy()
    body = json.dumps({"model": "m", "messages": MESSAGES, "stream": True})
    for _ in range(25):
        async with aiohttp.ClientSession() as http:
            resp = await http.post(base_url(proxy) + "/v1/chat/completions", data=body, headers={"Content-Type": "application/json"})
            await resp.content.readany()  # the first event arrived; now walk away
            resp.close()
    connector = proxy.app[appkeys.CLIENT].connector
    for _ in range(100):
        if fake.active_streams == 0 and not connector._acquired:  # the pool's own bookkeeping
            break
        await asyncio.sleep(0.05)
    assert fake.active_streams == 0
    assert not connector._acquired
    assert fake.finished_streams == 0


@pytest.mark.parametrize("depth", [2000, 100_000])  # about 990 already fails on the event loop's stack
async def test_deeply_nested_json_is_400_in_each_format(make_proxy: MakeProxy, fake: FakeUpstream, depth: int) -> None:
    proxy = await make_proxy("ollama")
    body = '{"model": "m", "messages": [{"role": "user", "content": "hi", "extra": ' + "[" * depth + "]" * depth + "}]}"
    status, payload = await post(proxy, "/v1/chat/completions", body)
    assert status == 400 and payload["error"]["code"] == "invalid_json" and "nest" in payload["error"]["message"]  # type: ignore[index]
    status, payload = await post(proxy, "/api/chat", body)
    assert status == 400 and isinstance(payload, dict) and "nest" in payload["error"]
    assert fake.received == []


async def test_nesting_that_parses_goes_through(make_proxy: MakeProxy, fake: FakeUpstream) -> None:
    proxy = await make_proxy()
    body = '{"model": "m", "messages": [{"role": "user", "content": "hi", "extra": ' + "[" * 600 + "]" * 600 + "}]}"
    status, _ = await post(proxy, "/v1/chat/completions", body)
    assert status == 200 and fake.last().body == body.encode()
