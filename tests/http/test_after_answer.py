"""A client that closes its connection the moment a stream ends still gets its audit record and its S0 turns."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path
from typing import Any

import aiohttp
import openai
from aiohttp.test_utils import TestServer

from memory.store.sqlite_schema import unpack
from tests.conftest import MakeProxy, base_url
from tests.fake_upstream import FakeUpstream

ROUNDS = 20


def body(n: int, stream: bool = True) -> dict[str, Any]:
    return {"model": "gpt-4o", "stream": stream, "messages": [{"role": "user", "content": f"question number {n}: what is {n} + {n}?"}]}


async def raw_stream_then_close(proxy: TestServer, n: int) -> str:
    """Read the stream up to its final event, then drop the connection at once; the request id."""
    async with aiohttp.ClientSession() as http:
        resp = await http.post(base_url(proxy) + "/v1/chat/completions", json=body(n), headers={"X-Request-Id": f"raw-{n}"})
        assert resp.status == 200
        async for line in resp.content:
            if line.strip() == b"data: [DONE]":
                break
        else:
            raise AssertionError("the stream never ended")
        resp.close()  # the connection, not released to the pool: closed under the proxy's feet
        return f"raw-{n}"


async def openai_stream_then_close(client: openai.AsyncOpenAI, n: int) -> str:
    """The official client, its raw stream read to the final event and closed at once."""
    async with client.chat.completions.with_streaming_response.create(
        model="gpt-4o", stream=True, messages=body(n)["messages"], extra_headers={"X-Request-Id": f"openai-{n}"}
    ) as resp:
        async for line in resp.iter_lines():
            if line.strip() == "data: [DONE]":
                break
        else:
            raise AssertionError("the stream never ended")
    return f"openai-{n}"


def audited(data_dir: Path) -> dict[str, dict[str, Any]]:
    with sqlite3.connect(data_dir / "ruyi.db") as db:
        return {rid: unpack(body) for rid, body in db.execute("SELECT request_id, body FROM audit")}


def answers_kept(data_dir: Path) -> list[str]:
    with sqlite3.connect(data_dir / "ruyi.db") as db:
        return [json.dumps(unpack(body)) for (body,) in db.execute("SELECT body FROM turns WHERE role = 'assistant'")]


async def test_every_stream_closed_at_its_end_is_audited_and_kept(make_proxy: MakeProxy, fake: FakeUpstream, data_dir: Path) -> None:
    fake.chunk_delay = 0.01  # after its final event too: the upstream's end comes after the client has left
    proxy = await make_proxy()  # aiohttp's test server cancels the handler of a client that goes away, as `ruyi serve` does
    ids = [await raw_stream_then_close(proxy, n) for n in range(ROUNDS)]
    client = openai.AsyncOpenAI(base_url=base_url(proxy) + "/v1", api_key="sk-test", max_retries=0)
    ids += [await openai_stream_then_close(client, n) for n in range(ROUNDS, 2 * ROUNDS)]
    await client.close()
    await proxy.close()  # the shutdown drains every request's after-answer work, then the store's queue
    records = audited(data_dir)
    assert sorted(records) == sorted(ids)
    assert {r["status"] for r in records.values()} == {200}  # the whole answer came: the client's close loses nothing
    kept = answers_kept(data_dir)
    assert len(kept) == 2 * ROUNDS and all(fake.reply in text for text in kept)  # S0: each answer's raw turn


async def test_a_client_gone_mid_stream_is_recorded_as_499_with_what_came(make_proxy: MakeProxy, fake: FakeUpstream, data_dir: Path) -> None:
    fake.chunk_delay = 0.2  # the client leaves after the first event, long before the last
    proxy = await make_proxy()  # aiohttp's test server cancels the handler of a client that goes away, as `ruyi serve` does
    async with aiohttp.ClientSession() as http:
        resp = await http.post(base_url(proxy) + "/v1/chat/completions", json=body(1), headers={"X-Request-Id": "gone"})
        first = await resp.content.readline()
        assert first.startswith(b"data: ")
        resp.close()
    await proxy.close()
    record = audited(data_dir)["gone"]
    assert record["status"] == 499
