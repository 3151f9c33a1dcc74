"""The fake upstream's Anthropic side: ``POST /v1/messages`` (whole or SSE events) and ``/v1/messages/count_tokens``,
refusing with a 400 in Anthropic's shape whatever the Messages API would refuse (tests/anthropic_shape.py)."""

from __future__ import annotations

import json
from typing import Any

from aiohttp import web

from tests.anthropic_shape import problems

SIGNATURE = "EqQBCkYIARgCIkD" + "x" * 40
"""A thinking block's signature, as opaque to a client (and to Ruyi) as the real ones."""


def _fake(request: web.Request) -> Any:
    from tests.fake_upstream import FAKE_UPSTREAM

    return request.app[FAKE_UPSTREAM]


def _error(status: int, kind: str, message: str) -> web.Response:
    return web.json_response({"type": "error", "error": {"type": kind, "message": message}, "request_id": "req_fake"}, status=status)


def _prompt_tokens(fake: Any, body: dict[str, Any]) -> int:
    if fake.prompt_tokens is not None:
        return int(fake.prompt_tokens)
    size = len(json.dumps([body.get("system"), body.get("messages"), body.get("tools")]))
    return max(1, round(size / 4 * (fake.prompt_scale or 1.0)))


def _blocks(fake: Any, body: dict[str, Any]) -> list[dict[str, Any]]:
    """The answer's content: a thinking block when thinking is on, then a tool call when tools are offered and the
    last message is the user's own words, else the reply text."""
    out: list[dict[str, Any]] = []
    if isinstance(body.get("thinking"), dict) and body["thinking"].get("type") == "enabled":
        out.append({"type": "thinking", "thinking": "The user wants a file read.", "signature": SIGNATURE})
    last = (body.get("messages") or [{}])[-1]
    content = last.get("content")
    answering_results = isinstance(content, list) and any(isinstance(b, dict) and b.get("type") == "tool_result" for b in content)
    tools = [t for t in body.get("tools") or () if isinstance(t, dict) and "input_schema" in t]
    if tools and not answering_results:
        out.append(
            {"type": "tool_use", "id": f"toolu_fake_{len(body.get('messages') or ())}", "name": tools[0]["name"], "input": {"path": "README.md"}}
        )
    else:
        out.append({"type": "text", "text": fake.reply})
    return out


async def messages(request: web.Request) -> web.StreamResponse:
    fake = _fake(request)
    body = await request.json()
    found = problems(body)
    if found:
        fake.anthropic_refused.append(found)
        return _error(400, "invalid_request_error", "; ".join(found))
    if fake.max_prompt_chars is not None:
        size = len(json.dumps(body.get("messages")))
        if size > fake.max_prompt_chars:
            return _error(400, "invalid_request_error", f"prompt is too long: {size} tokens > {fake.max_prompt_chars} maximum")
    blocks = _blocks(fake, body)
    stop = "tool_use" if blocks[-1]["type"] == "tool_use" else "end_turn"
    usage = {
        "input_tokens": _prompt_tokens(fake, body) - fake.cached_tokens - fake.cleared_input_tokens,
        "cache_creation_input_tokens": 0,
        "cache_read_input_tokens": fake.cached_tokens,
        "output_tokens": len(fake.pieces()),
    }
    message: dict[str, Any] = {
        "id": "msg_fake_1",
        "type": "message",
        "role": "assistant",
        "model": body["model"],
        "content": blocks,
        "stop_reason": stop,
        "stop_sequence": None,
        "usage": usage,
    }
    management = None
    if "context_management" in body:
        edits = [{"type": "clear_tool_uses_20250919", "cleared_tool_uses": 2, "cleared_input_tokens": fake.cleared_input_tokens}]
        management = {"applied_edits": edits if fake.cleared_input_tokens else []}
        message["context_management"] = management
    if not body.get("stream"):
        return web.json_response(message)
    from tests.fake_upstream import _stream

    start = {**message, "content": [], "stop_reason": None, "usage": {**usage, "output_tokens": 1}}
    start.pop("context_management", None)
    events: list[tuple[str, dict[str, Any]]] = [("message_start", {"type": "message_start", "message": start}), ("ping", {"type": "ping"})]
    for i, block in enumerate(blocks):
        events += _block_events(i, block, fake)
    delta: dict[str, Any] = {
        "type": "message_delta",
        "delta": {"stop_reason": stop, "stop_sequence": None},
        "usage": {"output_tokens": usage["output_tokens"]},
    }
    if management is not None:
        delta["context_management"] = management
    events += [("message_delta", delta), ("message_stop", {"type": "message_stop"})]
    frames = [f"event: {name}\ndata: {json.dumps(data)}\n\n".encode() for name, data in events]
    return await _stream(request, "text/event-stream", frames)


def _block_events(i: int, block: dict[str, Any], fake: Any) -> list[tuple[str, dict[str, Any]]]:
    kind = block["type"]
    start = {
        "text": {"type": "text", "text": ""},
        "thinking": {"type": "thinking", "thinking": "", "signature": ""},
        "tool_use": {**block, "input": {}},
    }[kind]
    deltas: list[dict[str, Any]]
    if kind == "text":
        deltas = [{"type": "text_delta", "text": piece} for piece in fake.pieces()]
    elif kind == "thinking":
        deltas = [{"type": "thinking_delta", "thinking": block["thinking"]}, {"type": "signature_delta", "signature": block["signature"]}]
    else:
        args = json.dumps(block["input"])
        deltas = [{"type": "input_json_delta", "partial_json": args[:8]}, {"type": "input_json_delta", "partial_json": args[8:]}]
    return [
        ("content_block_start", {"type": "content_block_start", "index": i, "content_block": start}),
        *[("content_block_delta", {"type": "content_block_delta", "index": i, "delta": d}) for d in deltas],
        ("content_block_stop", {"type": "content_block_stop", "index": i}),
    ]


async def count_tokens(request: web.Request) -> web.Response:
    fake = _fake(request)
    body = await request.json()
    found = problems(body, count_tokens=True)
    if found:
        return _error(400, "invalid_request_error", "; ".join(found))
    return web.json_response({"input_tokens": _prompt_tokens(fake, body)})
