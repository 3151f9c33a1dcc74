"""Tests for proxy/dialects/stream.py and each dialect's assembler: whole lines relayed, the answer assembled on the side."""

from __future__ import annotations

import json
import random

import aiohttp
from aiohttp.test_utils import TestServer

from proxy.dialects.stream import LineRelay, assemble_body, assembler_for
from tests.conftest import base_url
from tests.fake_upstream import FakeUpstream

TOOLS = [{"type": "function", "function": {"name": "read_file", "parameters": {"type": "object"}}}]


async def fetch(upstream: TestServer, path: str, body: dict[str, object]) -> bytes:
    async with aiohttp.ClientSession() as http:
        async with http.post(base_url(upstream) + path, json=body) as resp:
            return await resp.read()


def reassemble(wire: str, raw: bytes, seed: int) -> tuple[bytes, object]:
    rng, relay, asm, out, i = random.Random(seed), LineRelay(), assembler_for(wire), b"", 0
    while i < len(raw):
        step = rng.randint(1, 9)
        data = relay.feed(raw[i : i + step])
        asm.feed_lines(data)
        out += data
        i += step
    tail = relay.flush()
    asm.feed_lines(tail)
    return out + tail, asm.result


async def test_openai_stream_with_tool_call_and_usage(upstream: TestServer, fake: FakeUpstream) -> None:
    body = {"model": "m", "messages": [{"role": "user", "content": "x"}], "tools": TOOLS, "stream": True, "stream_options": {"include_usage": True}}
    raw = await fetch(upstream, "/v1/chat/completions", body)
    for seed in range(20):
        relayed, result = reassemble("openai", raw, seed)
        assert relayed == raw  # nothing added, dropped or re-encoded
        assert result.tool_calls == [  # type: ignore[attr-defined]
            {"id": "call_fake_1", "type": "function", "function": {"name": "read_file", "arguments": '{"path": "README.md"}'}}
        ]
        assert result.usage["prompt_tokens"] > 0 and result.done and result.finish_reason == "tool_calls"  # type: ignore[attr-defined]


async def test_openai_stream_text(upstream: TestServer, fake: FakeUpstream) -> None:
    raw = await fetch(upstream, "/v1/chat/completions", {"model": "m", "messages": [{"role": "user", "content": "x"}], "stream": True})
    _, result = reassemble("openai", raw, 1)
    assert result.message() == {"role": "assistant", "content": fake.reply}  # type: ignore[attr-defined]


async def test_ollama_stream_text_and_final_counts(upstream: TestServer, fake: FakeUpstream) -> None:
    raw = await fetch(upstream, "/api/chat", {"model": "m", "messages": [{"role": "user", "content": "x"}]})
    relayed, result = reassemble("ollama", raw, 3)
    assert relayed == raw
    assert result.content == fake.reply and result.done  # type: ignore[attr-defined]
    assert result.usage["prompt_eval_count"] > 0  # type: ignore[attr-defined]


async def test_ollama_tool_call_arguments_become_json(upstream: TestServer) -> None:
    raw = await fetch(upstream, "/api/chat", {"model": "m", "messages": [{"role": "user", "content": "x"}], "tools": TOOLS})
    _, result = reassemble("ollama", raw, 5)
    assert json.loads(result.tool_calls[0]["function"]["arguments"]) == {"path": "README.md"}  # type: ignore[attr-defined]


async def test_whole_bodies(upstream: TestServer, fake: FakeUpstream) -> None:
    raw = await fetch(upstream, "/v1/chat/completions", {"model": "m", "messages": [{"role": "user", "content": "x"}]})
    assert assemble_body("openai", raw).content == fake.reply
    raw = await fetch(upstream, "/api/generate", {"model": "m", "prompt": "x", "stream": False})
    assert assemble_body("ollama", raw).content == fake.reply
    assert assemble_body("openai", b"not json").content == ""
