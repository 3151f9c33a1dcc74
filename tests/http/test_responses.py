"""OpenAI's Responses API through Ruyi with the official openai client: plain, streamed, with function tools; measured
(X-Ruyi-* headers, the upstream's usage), pruned with every call paired with its output, errors in its format, a
chained request (previous_response_id) forwarded as sent."""

from __future__ import annotations

import json
from typing import Any

import aiohttp
import openai

from tests.conftest import MakeProxy, base_url
from tests.fake_upstream import FakeUpstream

SHELL: Any = {
    "type": "function",
    "name": "shell",
    "description": "Run a command.",
    "parameters": {"type": "object", "properties": {"command": {"type": "string"}}},
}


def client(proxy: Any) -> openai.AsyncOpenAI:
    return openai.AsyncOpenAI(base_url=base_url(proxy) + "/v1", api_key="sk-test", max_retries=0)


async def test_plain_streamed_and_tools(make_proxy: MakeProxy, fake: FakeUpstream) -> None:
    proxy = await make_proxy()
    c = client(proxy)
    raw = await c.responses.with_raw_response.create(model="gpt-5-codex", instructions="Be brief.", input="Hello")
    whole = raw.parse()
    assert whole.output_text == fake.reply
    assert raw.headers.get("X-Ruyi-Session") and raw.headers.get("X-Ruyi-Tier")
    sent = fake.last("/v1/responses").json
    assert sent["input"] == "Hello" and sent["instructions"] == "Be brief."
    stream = await c.responses.create(model="gpt-5-codex", input=[{"role": "user", "content": "Hi"}], stream=True)
    text, done = "", None
    async for event in stream:
        if event.type == "response.output_text.delta":
            text += event.delta
        if event.type == "response.completed":
            done = event.response
    assert text == fake.reply and done is not None and done.usage is not None
    asked = await c.responses.create(model="gpt-5-codex", input=[{"role": "user", "content": "List files"}], tools=[SHELL])
    call = asked.output[0]
    assert call.type == "function_call" and call.name == "shell"
    follow = await c.responses.create(
        model="gpt-5-codex",
        tools=[SHELL],
        input=[
            {"role": "user", "content": "List files"},
            {"type": "function_call", "call_id": call.call_id, "name": "shell", "arguments": call.arguments},
            {"type": "function_call_output", "call_id": call.call_id, "output": "README.md"},
        ],
    )
    assert follow.output_text == fake.reply


def codex_session(steps: int) -> list[dict[str, Any]]:
    items: list[dict[str, Any]] = [
        {
            "type": "message",
            "role": "developer",
            "content": [{"type": "input_text", "text": "<permissions instructions>sandbox</permissions instructions>"}],
        },
        {
            "type": "message",
            "role": "user",
            "content": [{"type": "input_text", "text": "<environment_context><cwd>/repo</cwd></environment_context>"}],
        },
        {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "Find the slow query and fix it."}]},
    ]
    for n in range(steps):
        items += [
            {"type": "reasoning", "id": f"rs_{n}", "summary": [], "encrypted_content": f"gAAAA{n}"},
            {
                "type": "function_call",
                "id": f"fc_{n}",
                "call_id": f"call_{n}",
                "name": "shell",
                "arguments": json.dumps({"command": ["cat", f"src/q{n}.sql"]}),
            },
            {
                "type": "function_call_output",
                "call_id": f"call_{n}",
                "output": "\n".join(f"SELECT col_{i} FROM t{n} WHERE id = {i};" for i in range(300)),
            },
        ]
    return items


async def test_a_long_codex_session_is_pruned_and_archived_with_calls_paired(make_proxy: MakeProxy, fake: FakeUpstream) -> None:
    proxy = await make_proxy(window={"models": {"gpt-5*": 8000}})
    items = codex_session(12)
    cuts = [i for i, item in enumerate(items) if item["type"] == "reasoning"][1:] + [len(items)]
    tiers = []
    async with aiohttp.ClientSession() as http:
        for cut in cuts:
            body = {"model": "gpt-5-codex", "instructions": "You are Codex.", "input": items[:cut], "tools": [SHELL], "stream": True}
            async with http.post(base_url(proxy) + "/v1/responses", json=body, headers={"session-id": "codex-1"}) as resp:
                assert resp.status == 200
                await resp.read()
                tiers.append(resp.headers["X-Ruyi-Tier"])
                sessions = resp.headers["X-Ruyi-Session"]
    sent = fake.last("/v1/responses").json
    assert sessions
    assert len(json.dumps(sent["input"])) < len(json.dumps(items)) // 2  # pruned and archived, far under what the client sent
    calls = {i["call_id"] for i in sent["input"] if i.get("type") == "function_call"}
    outputs = {i["call_id"] for i in sent["input"] if i.get("type") == "function_call_output"}
    assert calls == outputs  # every call with its output, every output with its call
    assert sent["instructions"].startswith("You are Codex.") and sent["tools"] == [SHELL]  # the layout's stable part may follow
    assert any(i.get("type") == "message" and "Find the slow query" in json.dumps(i) for i in sent["input"])  # the task, verbatim
    assert [i for i in sent["input"] if i.get("type") == "reasoning"]  # reasoning kept with what it precedes


async def test_errors_in_the_responses_format(make_proxy: MakeProxy, fake: FakeUpstream) -> None:
    proxy = await make_proxy()
    c = client(proxy)
    async with aiohttp.ClientSession() as http:
        async with http.post(base_url(proxy) + "/v1/responses", data=b"{not json") as resp:
            body = await resp.json()
    assert resp.status == 400 and body["error"]["code"] == "invalid_json" and body["error"]["type"] == "invalid_request_error"
    fake.fault, fake.status = "status", 429
    try:
        await c.responses.create(model="gpt-5-codex", input="x")
        raise AssertionError("a 429 went through")
    except openai.RateLimitError:
        pass


async def test_a_chained_request_is_forwarded_as_sent(make_proxy: MakeProxy, fake: FakeUpstream) -> None:
    proxy = await make_proxy(window={"models": {"gpt-5*": 8000}})
    big = "\n".join(f"row {i}" for i in range(5000))
    body = {
        "model": "gpt-5-codex",
        "previous_response_id": "resp_1",
        "store": True,
        "input": [{"type": "function_call_output", "call_id": "call_1", "output": big}],
    }
    raw = json.dumps(body).encode()
    async with aiohttp.ClientSession() as http:
        async with http.post(base_url(proxy) + "/v1/responses", data=raw, headers={"Content-Type": "application/json"}) as resp:
            assert resp.status == 200
    assert fake.last("/v1/responses").body == raw  # the chain is the provider's: never broken


async def test_a_responses_client_reaches_a_chat_only_server_with_translate(make_proxy: MakeProxy, fake: FakeUpstream) -> None:
    """Codex or the Agents SDK in front of llama.cpp, vLLM or Ollama's /v1: translated to chat completions and back."""
    proxy = await make_proxy(default_route={"translate": True})
    c = client(proxy)
    whole = await c.responses.create(model="qwen2.5-coder", instructions="Be brief.", input="Hello", max_output_tokens=50)
    assert whole.output_text == fake.reply and whole.usage is not None and whole.usage.input_tokens > 0
    sent = fake.last("/v1/chat/completions").json
    assert sent["messages"] == [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Hello"}] and sent["max_tokens"] == 50
    stream = await c.responses.create(model="qwen2.5-coder", input=[{"role": "user", "content": "Hi"}], stream=True)
    text, kinds = "", []
    async for event in stream:
        kinds.append(event.type)
        if event.type == "response.output_text.delta":
            text += event.delta
    assert text == fake.reply and kinds[0] == "response.created" and kinds[-1] == "response.completed"
    asked = await c.responses.create(model="qwen2.5-coder", input=[{"role": "user", "content": "List files"}], tools=[SHELL])
    call = asked.output[-1]
    assert call.type == "function_call" and call.name == "shell" and json.loads(call.arguments) == {"path": "README.md"}
    assert fake.last("/v1/chat/completions").json["tools"][0]["function"]["name"] == "shell"
    streamed = await c.responses.create(model="qwen2.5-coder", input=[{"role": "user", "content": "List files"}], tools=[SHELL], stream=True)
    done = [e async for e in streamed if e.type == "response.completed"]
    assert done and done[0].response.output[-1].type == "function_call"
    follow = await c.responses.create(
        model="qwen2.5-coder",
        tools=[SHELL],
        input=[
            {"role": "user", "content": "List files"},
            {"type": "reasoning", "id": "rs_1", "summary": [], "encrypted_content": "gAAAA"},
            {"type": "function_call", "call_id": call.call_id, "name": "shell", "arguments": call.arguments},
            {"type": "function_call_output", "call_id": call.call_id, "output": "README.md"},
        ],
    )
    assert follow.output_text == fake.reply
    sent = fake.last("/v1/chat/completions").json["messages"]
    assert [m["role"] for m in sent] == ["user", "assistant", "tool"] and sent[1]["tool_calls"][0]["id"] == call.call_id
    assert "gAAAA" not in json.dumps(sent)  # reasoning means nothing to a chat server


async def test_an_archive_of_a_responses_session_goes_after_the_task_in_its_message(make_proxy: MakeProxy, fake: FakeUpstream) -> None:
    proxy = await make_proxy(window={"models": {"gpt-5*": 8000}})
    items = codex_session(12)
    cuts = [i for i, item in enumerate(items) if item["type"] == "reasoning"][1:] + [len(items)]
    sent: list[dict[str, Any]] = []
    async with aiohttp.ClientSession() as http:
        for cut in cuts:
            body = {"model": "gpt-5-codex", "instructions": "You are Codex.", "input": items[:cut], "tools": [SHELL]}
            async with http.post(base_url(proxy) + "/v1/responses", json=body, headers={"session-id": "codex-2"}) as resp:
                assert resp.status == 200
                await resp.read()
            sent.append(fake.last("/v1/responses").json)
    archived = [k for k, body in enumerate(sent) if "<ruyi-archive" in json.dumps(body["input"])]
    assert archived, "the session was archived"
    first = sent[archived[0]]
    assert first["instructions"] == sent[0]["instructions"] and first["input"][:2] == items[:2]  # instructions, preambles: as sent
    task = first["input"][2]  # the task as sent, then the block as an input_text part of its own: no item added
    assert task["content"][:1] == items[2]["content"] and task["content"][1]["type"] == "input_text"
    assert task["content"][1]["text"].startswith("<ruyi-archive") and len(task["content"]) == 2
    assert sum("<ruyi-archive" in json.dumps(i) for i in first["input"]) == 1
    same = [b for b in sent[archived[0] :] if '<ruyi-archive n=\\"1\\"' in json.dumps(b["input"][2])]
    assert len(same) >= 2 and all(b["input"][:3] == first["input"][:3] and b["instructions"] == first["instructions"] for b in same)
