"""The official ``anthropic`` client (the sync one in a thread: the servers share the test's loop) against Ruyi in front of an Anthropic-speaking fake upstream: sync, async, streaming,
a tool-use round trip, thinking blocks, images, count_tokens, errors in Anthropic's shape, headers, the billing line."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import aiohttp
import anthropic
import pytest
from aiohttp.test_utils import TestServer

from tests.anthropic_shape import problems
from tests.conftest import MakeProxy, base_url
from tests.fake_anthropic import SIGNATURE
from tests.fake_upstream import FakeUpstream

MODEL = "claude-opus-4-5"
READ = {"name": "Read", "description": "Read a file.", "input_schema": {"type": "object", "properties": {"file_path": {"type": "string"}}}}
BILLING = "x-anthropic-billing-header: cc_version=2.1.37.{v}; cc_entrypoint=cli; cch={c};"
PNG = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk+M9QDwADhgGAWjR9awAAAABJRU5ErkJggg=="


def clients(proxy: TestServer, agent: str = "claude") -> tuple[anthropic.Anthropic, anthropic.AsyncAnthropic]:
    common: dict[str, Any] = {"base_url": base_url(proxy), "api_key": "sk-ant-client", "default_headers": {"X-Ruyi-Agent": agent}, "max_retries": 0}
    return anthropic.Anthropic(**common), anthropic.AsyncAnthropic(**common)


def sent(fake: FakeUpstream) -> list[Any]:
    return [r for r in fake.received if r.path == "/v1/messages"]


async def sessions_of(proxy: TestServer, agent: str) -> list[dict[str, Any]]:
    async with aiohttp.ClientSession() as http:
        async with http.get(base_url(proxy) + "/ruyi/v1/sessions", headers={"X-Ruyi-Agent": agent}) as resp:
            return (await resp.json())["sessions"]  # type: ignore[no-any-return]


async def test_sync_client_is_answered_and_its_bytes_and_headers_go_through_unchanged(make_proxy: MakeProxy, fake: FakeUpstream) -> None:
    proxy = await make_proxy("anthropic")
    sync, _ = clients(proxy)
    raw = await asyncio.to_thread(
        sync.messages.with_raw_response.create,
        model=MODEL,
        max_tokens=100,
        messages=[{"role": "user", "content": "Hello"}],
        extra_headers={"anthropic-beta": "interleaved-thinking-2025-05-14"},
    )
    message = raw.parse()
    assert message.content[0].text == fake.reply  # type: ignore[union-attr]
    assert raw.headers["X-Ruyi-Session"] and raw.headers["X-Ruyi-Window"] == "200000"  # litellm's map for claude-*
    received = sent(fake)[-1]
    assert json.loads(received.body) == {"model": MODEL, "max_tokens": 100, "messages": [{"role": "user", "content": "Hello"}]}
    headers = {k.lower(): v for k, v in received.headers.items()}
    assert "sk-ant-client" in (headers.get("x-api-key") or headers["authorization"])  # x-api-key or a bearer, as the SDK sends it
    assert headers["anthropic-version"] and headers["anthropic-beta"] == "interleaved-thinking-2025-05-14"


async def test_async_streaming_relays_every_event_and_calibrates_from_message_start(make_proxy: MakeProxy, fake: FakeUpstream) -> None:
    fake.cached_tokens = 40
    proxy = await make_proxy("anthropic")
    _, client = clients(proxy)
    async with client.messages.stream(model=MODEL, max_tokens=100, messages=[{"role": "user", "content": "Say hello " * 30}]) as stream:
        text = "".join([t async for t in stream.text_stream])
        final = await stream.get_final_message()
    assert text == fake.reply and final.stop_reason == "end_turn"
    (session,) = await sessions_of(proxy, "claude")
    usage = final.usage
    assert session["upstream_prompt_tokens"] == usage.input_tokens + (usage.cache_creation_input_tokens or 0) + (usage.cache_read_input_tokens or 0)
    assert session["cached_tokens"] == 40


async def test_a_tool_use_round_trip_with_thinking_blocks_stays_one_session(make_proxy: MakeProxy, fake: FakeUpstream) -> None:
    proxy = await make_proxy("anthropic")
    _, client = clients(proxy)
    thinking: Any = {"type": "enabled", "budget_tokens": 1024}
    history: list[Any] = [{"role": "user", "content": "Read README.md"}]
    async with client.messages.stream(model=MODEL, max_tokens=2048, thinking=thinking, tools=[READ], messages=history) as stream:
        first = await stream.get_final_message()
    assert [b.type for b in first.content] == ["thinking", "tool_use"]
    assert first.content[0].signature == SIGNATURE  # type: ignore[union-attr]
    use = first.content[1]
    history += [
        {"role": "assistant", "content": [b.model_dump(exclude_none=True) for b in first.content]},
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": use.id, "content": "# Ruyi\n"}]},  # type: ignore[union-attr]
    ]
    second = await client.messages.create(model=MODEL, max_tokens=2048, thinking=thinking, tools=[READ], messages=history)
    assert second.content[-1].text == fake.reply  # type: ignore[union-attr]
    forwarded = json.loads(sent(fake)[-1].body)
    assert forwarded["messages"][1]["content"][0] == {"type": "thinking", "thinking": "The user wants a file read.", "signature": SIGNATURE}
    assert not problems(forwarded)
    (session,) = await sessions_of(proxy, "claude")
    assert session["requests"] == 2


async def test_an_image_goes_through_untouched_and_is_counted(make_proxy: MakeProxy, fake: FakeUpstream) -> None:
    proxy = await make_proxy("anthropic")
    sync, _ = clients(proxy)
    content: Any = [
        {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": PNG}},
        {"type": "text", "text": "What is this?"},
    ]
    raw = await asyncio.to_thread(sync.messages.with_raw_response.create, model=MODEL, max_tokens=50, messages=[{"role": "user", "content": content}])
    assert json.loads(sent(fake)[-1].body)["messages"][0]["content"] == content
    assert int(raw.headers["X-Ruyi-Tokens-Before"]) > 500  # an image costs far more than its few base64 characters


async def test_count_tokens_asks_anthropic_and_estimates_elsewhere(make_proxy: MakeProxy, fake: FakeUpstream) -> None:
    fake.prompt_tokens = 1234
    proxy = await make_proxy("anthropic")
    sync, _ = clients(proxy)
    raw = await asyncio.to_thread(sync.messages.with_raw_response.count_tokens, model=MODEL, messages=[{"role": "user", "content": "Hello there"}])
    assert raw.parse().input_tokens == 1234 and raw.headers["X-Ruyi-Token-Count"] == "upstream"
    other = await make_proxy("openai")
    local, _ = clients(other)
    raw = await asyncio.to_thread(
        local.messages.with_raw_response.count_tokens, model=MODEL, messages=[{"role": "user", "content": "Hello there"}], system="Be brief."
    )
    assert 5 < raw.parse().input_tokens < 100 and raw.headers["X-Ruyi-Token-Count"] == "estimate"


async def test_errors_come_in_anthropics_shape(make_proxy: MakeProxy, fake: FakeUpstream) -> None:
    proxy = await make_proxy("anthropic")
    sync, _ = clients(proxy)
    with pytest.raises(anthropic.BadRequestError) as bad:
        await asyncio.to_thread(sync.messages.create, model="", max_tokens=10, messages=[{"role": "user", "content": "x"}])
    assert bad.value.body == {"type": "error", "error": {"type": "invalid_request_error", "message": 'the request body needs a "model" string'}}
    fake.fault, fake.status, fake.status_body = "status", 529, {"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}}
    with pytest.raises(anthropic.APIStatusError) as overloaded:
        await asyncio.to_thread(sync.messages.create, model=MODEL, max_tokens=10, messages=[{"role": "user", "content": "x"}])
    assert overloaded.value.status_code == 529 and overloaded.value.body["error"]["type"] == "overloaded_error"  # type: ignore[index]


async def test_a_broken_stream_ends_with_an_error_event_the_sdk_raises(make_proxy: MakeProxy, fake: FakeUpstream) -> None:
    fake.fault, fake.cut_after = "cut", 4
    proxy = await make_proxy("anthropic")
    _, client = clients(proxy)
    with pytest.raises(anthropic.APIStatusError) as broken:
        async with client.messages.stream(model=MODEL, max_tokens=10, messages=[{"role": "user", "content": "x"}]) as stream:
            async for _ in stream:
                pass
    assert "closed the stream" in str(broken.value)


async def test_an_anthropic_client_routed_to_an_openai_upstream_without_translation_gets_a_400(make_proxy: MakeProxy) -> None:
    proxy = await make_proxy("openai")
    sync, _ = clients(proxy)
    with pytest.raises(anthropic.BadRequestError) as bad:
        await asyncio.to_thread(sync.messages.create, model=MODEL, max_tokens=10, messages=[{"role": "user", "content": "x"}])
    message = bad.value.body["error"]["message"]  # type: ignore[index]
    assert "the default route" in message and "OpenAI chat" in message and "Anthropic Messages" in message and "translate: true" in message


async def test_the_billing_line_neither_splits_a_session_nor_is_changed_for_anthropic(make_proxy: MakeProxy, fake: FakeUpstream) -> None:
    proxy = await make_proxy("anthropic")
    sync, _ = clients(proxy)
    history: list[Any] = [{"role": "user", "content": "Fix the bug"}]
    for n, (v, c) in enumerate([("0d9", "fa690"), ("76b", "36ee5"), ("f51", "0aaa9")]):
        system: Any = [
            {"type": "text", "text": BILLING.format(v=v, c=c)},
            {"type": "text", "text": "You are Claude Code.", "cache_control": {"type": "ephemeral"}},
        ]
        await asyncio.to_thread(sync.messages.create, model=MODEL, max_tokens=10, system=system, messages=history)
        assert json.loads(sent(fake)[-1].body)["system"] == system  # forwarded as the client sent it
        history += [{"role": "assistant", "content": fake.reply}, {"role": "user", "content": f"and step {n}"}]
    (session,) = await sessions_of(proxy, "claude")
    assert session["requests"] == 3
    await asyncio.to_thread(sync.messages.create, model=MODEL, max_tokens=10, system=system, messages=[{"role": "user", "content": "Another task"}])
    assert len(await sessions_of(proxy, "claude")) == 2  # a new conversation is not merged into the first


async def test_context_1m_beta_raises_the_window(make_proxy: MakeProxy) -> None:
    proxy = await make_proxy("anthropic")
    sync, _ = clients(proxy)
    raw = await asyncio.to_thread(
        sync.messages.with_raw_response.create,
        model=MODEL,
        max_tokens=10,
        messages=[{"role": "user", "content": "x"}],
        extra_headers={"anthropic-beta": "fine-grained-tool-streaming-2025-05-14,context-1m-2025-08-07"},
    )
    assert raw.headers["X-Ruyi-Window"] == "1000000" and raw.headers["X-Ruyi-Window-Source"] == "anthropic_beta"


async def test_a_configured_window_wins_over_the_context_1m_header(make_proxy: MakeProxy) -> None:
    """Issue 21: Claude Code sends the beta for its default model; window.models says what the person wants."""
    proxy = await make_proxy("anthropic", window={"models": {"claude-*": 100000}})
    sync, _ = clients(proxy)
    raw = await asyncio.to_thread(
        sync.messages.with_raw_response.create,
        model=MODEL,
        max_tokens=10,
        messages=[{"role": "user", "content": "x"}],
        extra_headers={"anthropic-beta": "context-1m-2025-08-07"},
    )
    assert raw.headers["X-Ruyi-Window"] == "100000" and raw.headers["X-Ruyi-Window-Source"] == "config"


async def test_context_management_is_forwarded_untouched_and_its_clearing_is_counted(make_proxy: MakeProxy, fake: FakeUpstream) -> None:
    fake.cleared_input_tokens = 300
    proxy = await make_proxy("anthropic")
    sync, _ = clients(proxy)
    management = {
        "edits": [
            {"type": "clear_tool_uses_20250919", "trigger": {"type": "input_tokens", "value": 30000}, "keep": {"type": "tool_uses", "value": 3}}
        ]
    }
    long = "Please consider this. " * 400
    raw = await asyncio.to_thread(
        sync.messages.with_raw_response.create,
        model=MODEL,
        max_tokens=10,
        messages=[{"role": "user", "content": long}],
        extra_body={"context_management": management},
    )
    assert json.loads(sent(fake)[-1].body)["context_management"] == management
    (session,) = await sessions_of(proxy, "claude")
    async with aiohttp.ClientSession() as http:
        url = f"{base_url(proxy)}/ruyi/v1/sessions/{session['session_id']}/report"
        async with http.get(url, headers={"X-Ruyi-Agent": "claude"}) as resp:
            (report,) = (await resp.json())["reports"]
    assert report["context_management"] == {"edits": [{k: v for k, v in management["edits"][0].items()}]}  # beside Ruyi's own
    estimate = int(raw.headers["X-Ruyi-Tokens-Before"])  # uncalibrated: the model's first request
    assert session["calibration"] == pytest.approx((session["upstream_prompt_tokens"] + 300) / estimate)  # what was sent, cleared part too


async def test_a_request_no_step_changes_is_forwarded_byte_for_byte(make_proxy: MakeProxy, fake: FakeUpstream) -> None:
    proxy = await make_proxy("anthropic")
    raw = (
        b'{ "messages" : [ {"role":"user","content":[{"type":"text","text":"caf\\u00e9","cache_control":{"type":"ephemeral"}},'
        b'{"type":"a_block_of_tomorrow","payload":[1, 2.50]}]}],\n  "model":"claude-opus-4-5", "max_tokens": 9,'
        b' "thinking": {"type": "enabled", "budget_tokens": 1024}, "context_management": {"edits": []}, "x_new": null }'
    )
    async with aiohttp.ClientSession() as http:
        async with http.post(base_url(proxy) + "/v1/messages", data=raw, headers={"Content-Type": "application/json"}) as resp:
            assert resp.status == 200
    assert sent(fake)[-1].body == raw
