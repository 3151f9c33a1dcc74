"""The fake upstream's OpenAI Responses API (``POST /v1/responses``): a whole Response object or its SSE events, as
OpenAI sends them (``response.created`` … ``response.completed``), a function call when tools are offered and the last
item is the user's, usage with ``input_tokens_details.cached_tokens``."""

from __future__ import annotations

import itertools
import json
import time
from typing import Any

from aiohttp import web

ANSWER_IDS = itertools.count(1)
"""Each answer's own id (``resp_fake_<n>``), as a client chaining by ``previous_response_id`` names it."""


def _response(body: dict[str, Any], output: list[dict[str, Any]], usage: dict[str, Any], status: str, answer: str) -> dict[str, Any]:
    return {
        "id": answer,
        "object": "response",
        "created_at": int(time.time()),
        "status": status,
        "model": body.get("model"),
        "output": output,
        "parallel_tool_calls": True,
        "tool_choice": body.get("tool_choice", "auto"),
        "tools": body.get("tools") or [],
        "temperature": None,
        "top_p": None,
        "instructions": body.get("instructions"),
        "error": None,
        "incomplete_details": None,
        "metadata": {},
        "text": {"format": {"type": "text"}},
        "truncation": "disabled",
        "usage": usage,
    }


def prompt_size(body: dict[str, Any]) -> int:
    return max(1, len(json.dumps([body.get("instructions"), body.get("input")])) // 4)


async def responses(request: web.Request) -> web.StreamResponse:
    from tests.fake_upstream import FAKE_UPSTREAM, _stream

    fake = request.app[FAKE_UPSTREAM]
    body = await request.json()
    items = body.get("input")
    items = [{"type": "message", "role": "user", "content": items}] if isinstance(items, str) else items or []
    last = items[-1] if items else {}
    wants_tool = bool(body.get("tools")) and last.get("type", "message") == "message" and last.get("role") == "user"
    prompt = fake.prompt_tokens if fake.prompt_tokens is not None else prompt_size(body)
    usage = {
        "input_tokens": prompt,
        "input_tokens_details": {"cached_tokens": fake.cached_tokens},
        "output_tokens": len(fake.pieces()),
        "output_tokens_details": {"reasoning_tokens": 0},
        "total_tokens": prompt + len(fake.pieces()),
    }
    if wants_tool:
        tool = body["tools"][0]
        item: dict[str, Any] = {
            "type": "function_call",
            "id": "fc_fake_1",
            "call_id": "call_fake_1",
            "name": tool.get("name", ""),
            "arguments": '{"path": "README.md"}',
            "status": "completed",
        }
    else:
        item = {
            "type": "message",
            "id": "msg_fake_1",
            "status": "completed",
            "role": "assistant",
            "content": [{"type": "output_text", "text": fake.reply, "annotations": []}],
        }
    answer = f"resp_fake_{next(ANSWER_IDS)}"
    if not body.get("stream"):
        return web.json_response(_response(body, [item], usage, "completed", answer))
    events: list[dict[str, Any]] = [
        {"type": "response.created", "response": _response(body, [], {}, "in_progress", answer)},
        {"type": "response.in_progress", "response": _response(body, [], {}, "in_progress", answer)},
    ]
    if wants_tool:
        events.append({"type": "response.output_item.added", "output_index": 0, "item": {**item, "arguments": "", "status": "in_progress"}})
        args = item["arguments"]
        for piece in (args[:8], args[8:]):
            events.append({"type": "response.function_call_arguments.delta", "item_id": item["id"], "output_index": 0, "delta": piece})
        events.append({"type": "response.function_call_arguments.done", "item_id": item["id"], "output_index": 0, "arguments": args})
    else:
        events.append({"type": "response.output_item.added", "output_index": 0, "item": {**item, "content": [], "status": "in_progress"}})
        part = {"type": "output_text", "text": "", "annotations": []}
        events.append({"type": "response.content_part.added", "item_id": item["id"], "output_index": 0, "content_index": 0, "part": part})
        for piece in fake.pieces():
            events.append(
                {"type": "response.output_text.delta", "item_id": item["id"], "output_index": 0, "content_index": 0, "delta": piece, "logprobs": []}
            )
        events.append(
            {"type": "response.output_text.done", "item_id": item["id"], "output_index": 0, "content_index": 0, "text": fake.reply, "logprobs": []}
        )
        events.append(
            {"type": "response.content_part.done", "item_id": item["id"], "output_index": 0, "content_index": 0, "part": {**part, "text": fake.reply}}
        )
    events.append({"type": "response.output_item.done", "output_index": 0, "item": item})
    events.append({"type": "response.completed", "response": _response(body, [item], usage, "completed", answer)})
    frames = [f"event: {e['type']}\ndata: {json.dumps({**e, 'sequence_number': n})}\n\n".encode() for n, e in enumerate(events)]
    return await _stream(request, "text/event-stream", frames)
