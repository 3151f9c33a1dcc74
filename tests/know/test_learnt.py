"""Windows learnt from the server's refusals: each server's phrasing parsed for its limit and count; against a fake
server that refuses above its own limit with another tokenizer's count, a long session needs a few refusals, not one a
request, and every request is answered."""

from __future__ import annotations

import json
from typing import Any

import aiohttp
import pytest

from proxy.know.learnt import stated_limit
from tests.conftest import MakeProxy, base_url
from tests.fake_upstream import FakeUpstream


@pytest.mark.parametrize(
    ("body", "expected"),
    [
        (
            {
                "error": {
                    "message": "This model's maximum context length is 2048 tokens. However, you requested 2209 tokens (2209 in the messages, 0 in the completion).",
                    "code": "context_length_exceeded",
                }
            },
            (2048, 2209),
        ),
        ({"error": {"message": "This model's maximum context length is 8192 tokens. However, your request has 9000 input tokens."}}, (8192, 9000)),
        (
            {
                "error": {
                    "type": "exceed_context_size_error",
                    "message": "request (4476 tokens) exceeds the available context size (4096 tokens)",
                    "n_prompt_tokens": 4476,
                    "n_ctx": 4096,
                }
            },
            (4096, 4476),
        ),
        ({"error": "request (4476 tokens) exceeds the available context size (4096 tokens), try increasing it"}, (4096, 4476)),
        (
            {"type": "error", "error": {"type": "invalid_request_error", "message": "prompt is too long: 215000 tokens > 200000 maximum"}},
            (200000, 215000),
        ),
        (
            {
                "error": {
                    "message": "litellm.ContextWindowExceededError: litellm.BadRequestError: ContextWindowExceededError: OpenAIException - "
                    "This model's maximum context length is 4096 tokens. However, your messages resulted in 5000 tokens."
                }
            },
            (4096, 5000),
        ),
        (
            {
                "error": "Trying to keep the first 6100 tokens when context the overflows. However, the model is loaded with context length of only 4096 tokens"
            },
            (4096, 6100),
        ),
        ({"error": {"message": "The input (9000 tokens) is longer than the model's context length (8192 tokens)."}}, (8192, 9000)),
        ({"error": "the input length exceeds the context length"}, None),
    ],
)
def test_each_servers_refusal_states_its_limit(body: dict[str, Any], expected: tuple[int, int] | None) -> None:
    assert stated_limit(json.dumps(body).encode()) == expected


def session(steps: int) -> list[dict[str, Any]]:
    messages: list[dict[str, Any]] = [
        {"role": "system", "content": "You are a helpful assistant."},
        {"role": "user", "content": "Summarize the logs of each service."},
    ]
    for n in range(steps):
        call = {"id": f"c{n}", "type": "function", "function": {"name": "read_log", "arguments": json.dumps({"service": f"svc{n}"})}}
        log = "\n".join(f"2026-11-27 12:{i:02d} svc{n} handled request {i} in {i * 3} ms" for i in range(40))
        messages += [{"role": "assistant", "content": None, "tool_calls": [call]}, {"role": "tool", "tool_call_id": f"c{n}", "content": log}]
    return messages


@pytest.mark.parametrize("style", ["openai", "llamacpp"])
async def test_a_server_window_is_known_after_one_refusal(make_proxy: MakeProxy, fake: FakeUpstream, style: str) -> None:
    fake.token_limit, fake.prompt_scale, fake.limit_style = 3000, 1.3, style  # its tokenizer counts 30 % more than Ruyi's
    proxy = await make_proxy()  # an unknown model: no window configured, none reported by the server
    messages = session(40)
    cuts = [i for i, m in enumerate(messages) if m["role"] == "assistant"][1:] + [len(messages)]
    sources = []
    async with aiohttp.ClientSession() as http:
        for cut in cuts:
            async with http.post(base_url(proxy) + "/v1/chat/completions", json={"model": "smollm2-360m", "messages": messages[:cut]}) as resp:
                assert resp.status == 200, await resp.text()
                sources.append(resp.headers.get("X-Ruyi-Window-Source"))
    assert fake.refusals <= 3, f"{fake.refusals} refusals for {len(cuts)} requests"
    assert sources[-1] == "learnt"
