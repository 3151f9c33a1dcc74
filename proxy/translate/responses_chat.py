"""A Responses API request to a server that speaks only chat completions (llama.cpp, vLLM, Ollama's ``/v1``).

For a route with ``translate: true``, a ``/v1/responses`` request (measured and rewritten first, like any other) goes
upstream as ``/v1/chat/completions``: its canonical messages are chat messages already (reasoning and other opaque
items left out: a chat server cannot read them), function tools as chat tools, ``max_output_tokens`` as ``max_tokens``.
The answer comes back as a Response object, or as the Responses events a client streams (``response.created``,
``response.output_item.added``, ``response.output_text.delta``, ``response.function_call_arguments.delta``,
``response.output_item.done``, ``response.completed``), usage as ``input_tokens`` and ``input_tokens_details``. Only
fields of the Responses schema are read: nothing a client sends picks another address."""

from __future__ import annotations

import json
import time
from collections.abc import AsyncIterator
from typing import Any

from aiohttp import web

from proxy import appkeys
from proxy.context import RequestContext
from proxy.dialects.errors import ProxyError
from proxy.dialects.responses import RESPONSES
from proxy.http.upstream import forward_headers, send
from proxy.routes import upstream_url

CHAT_PATH = {"openai": "/v1/chat/completions", "ollama": "/v1/chat/completions"}


def as_chat(body: dict[str, Any], model: str) -> dict[str, Any]:
    """The chat completions body for a Responses body (its canonical messages, text only)."""
    messages = RESPONSES.to_canonical(body)
    if messages is None:
        raise ProxyError(
            400,
            "invalid_request_error",
            "a Responses request chained by previous_response_id (or without input) "
            "cannot be translated for a chat-only server: send the whole input",
        )
    chat: dict[str, Any] = {"model": model, "messages": [_chat_message(m) for m in messages]}
    tools = [
        {"type": "function", "function": {k: t[k] for k in ("name", "description", "parameters") if k in t}}
        for t in body.get("tools") or ()
        if isinstance(t, dict) and t.get("type") == "function" and t.get("name")
    ]
    if tools:
        chat["tools"] = tools
    choice = body.get("tool_choice")
    if isinstance(choice, str) and tools:
        chat["tool_choice"] = choice
    for ours, theirs in (
        ("max_output_tokens", "max_tokens"),
        ("temperature", "temperature"),
        ("top_p", "top_p"),
        ("parallel_tool_calls", "parallel_tool_calls"),
    ):
        if body.get(ours) is not None:
            chat[theirs] = body[ours]
    if body.get("stream") is True:
        chat["stream"] = True
        chat["stream_options"] = {"include_usage": True}
    return chat


def _chat_message(message: dict[str, Any]) -> dict[str, Any]:
    content = message.get("content")
    if isinstance(content, list):  # text parts only: reasoning and unknown items mean nothing to a chat server
        text = "".join(p.get("text", "") for p in content if isinstance(p, dict) and p.get("type") == "text")
        content = text or None
    out: dict[str, Any] = {"role": message["role"], "content": content if content is not None or message["role"] == "assistant" else ""}
    if message.get("tool_calls"):
        out["tool_calls"] = message["tool_calls"]
    if message["role"] == "tool":
        out["tool_call_id"] = message.get("tool_call_id")
    return out


def _usage(usage: dict[str, Any] | None) -> dict[str, Any]:
    usage = usage or {}
    cached = (usage.get("prompt_tokens_details") or {}).get("cached_tokens") or 0
    prompt, completion = usage.get("prompt_tokens") or 0, usage.get("completion_tokens") or 0
    return {
        "input_tokens": prompt,
        "input_tokens_details": {"cached_tokens": cached},
        "output_tokens": completion,
        "output_tokens_details": {"reasoning_tokens": 0},
        "total_tokens": prompt + completion,
    }


def _response(model: str, output: list[dict[str, Any]], usage: dict[str, Any], status: str, rid: str) -> dict[str, Any]:
    return {
        "id": f"resp_{rid}",
        "object": "response",
        "created_at": int(time.time()),
        "status": status,
        "model": model,
        "output": output,
        "usage": usage,
        "error": None,
        "incomplete_details": None,
        "parallel_tool_calls": True,
        "tool_choice": "auto",
        "tools": [],
    }


def _items(text: str, calls: list[dict[str, Any]], rid: str) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    if text:
        out.append(
            {
                "type": "message",
                "id": f"msg_{rid}",
                "status": "completed",
                "role": "assistant",
                "content": [{"type": "output_text", "text": text, "annotations": []}],
            }
        )
    for n, call in enumerate(calls):
        fn = call.get("function") or {}
        out.append(
            {
                "type": "function_call",
                "id": f"fc_{rid}_{n}",
                "call_id": call.get("id") or f"call_{rid}_{n}",
                "name": fn.get("name") or "",
                "arguments": fn.get("arguments") or "",
                "status": "completed",
            }
        )
    return out


async def bridged(request: web.Request, forwarded: bytes, ctx: RequestContext) -> web.StreamResponse:
    """Send the (rewritten) Responses request as chat completions and answer in the Responses format."""
    from proxy import json_codec
    from proxy.dialects.stream import assembler_for

    app, route, model = request.app, ctx.route, ctx.model or ""
    assert route is not None
    chat = as_chat(json_codec.loads(forwarded), model)
    url = upstream_url(route, CHAT_PATH[route.kind])
    headers = forward_headers(request.headers, route)
    headers["Content-Type"] = "application/json"
    rid = ctx.request_id[:24]
    async with send(app[appkeys.CLIENT], ctx, "POST", url, headers, json.dumps(chat).encode(), app[appkeys.SLOTS]) as resp:
        if resp.status >= 400:
            raise ProxyError(resp.status, "upstream_error", f"the chat server answered {resp.status}: {(await resp.text())[:2000]}")
        if not chat.get("stream"):
            data = await resp.json(content_type=None)
            message = ((data.get("choices") or [{}])[0]).get("message") or {}
            payload = _response(
                model, _items(message.get("content") or "", message.get("tool_calls") or [], rid), _usage(data.get("usage")), "completed", rid
            )
            asm = assembler_for("responses")
            asm.feed_object(payload)
            asm.result.done = True
            ctx.assembled = asm.result
            return web.json_response(payload, headers=ctx.response_headers)
        out = web.StreamResponse(status=200, headers={**ctx.response_headers, "Content-Type": "text/event-stream", "Cache-Control": "no-cache"})
        await out.prepare(request)
        ctx.answering = True
        asm = assembler_for("responses")
        ctx.assembled = asm.result
        async for frame in _events(resp.content, model, rid):
            asm.feed_lines(frame)
            await out.write(frame)
        await out.write_eof()
        return out


async def _events(content: Any, model: str, rid: str) -> AsyncIterator[bytes]:
    """Chat completion chunks in, Responses events out, as they come."""
    seq = 0

    def event(kind: str, **fields: Any) -> bytes:
        nonlocal seq
        seq += 1
        return f"event: {kind}\ndata: {json.dumps({'type': kind, 'sequence_number': seq, **fields})}\n\n".encode()

    yield event("response.created", response=_response(model, [], {}, "in_progress", rid))
    text, usage, started = "", None, False
    calls: dict[int, dict[str, Any]] = {}
    message_id = f"msg_{rid}"
    async for raw in content:
        line = raw.strip()
        if not line.startswith(b"data:"):
            continue
        data = line[5:].strip()
        if data == b"[DONE]":
            break
        try:
            chunk = json.loads(data)
        except ValueError:
            continue
        usage = chunk.get("usage") or usage
        for choice in chunk.get("choices") or ():
            delta = choice.get("delta") or {}
            piece = delta.get("content")
            if piece:
                if not started:
                    started = True
                    yield event(
                        "response.output_item.added",
                        output_index=0,
                        item={"type": "message", "id": message_id, "status": "in_progress", "role": "assistant", "content": []},
                    )
                text += piece
                yield event("response.output_text.delta", item_id=message_id, output_index=0, content_index=0, delta=piece)
            for call in delta.get("tool_calls") or ():
                slot = calls.setdefault(call.get("index", 0), {"id": "", "function": {"name": "", "arguments": ""}})
                slot["id"] = call.get("id") or slot["id"]
                fn = call.get("function") or {}
                slot["function"]["name"] += fn.get("name") or ""
                slot["function"]["arguments"] += fn.get("arguments") or ""
    items = _items(text, [calls[i] for i in sorted(calls)], rid)
    for n, item in enumerate(items):
        if item["type"] == "function_call":
            yield event("response.output_item.added", output_index=n, item={**item, "arguments": "", "status": "in_progress"})
            yield event("response.function_call_arguments.delta", item_id=item["id"], output_index=n, delta=item["arguments"])
        yield event("response.output_item.done", output_index=n, item=item)
    yield event("response.completed", response=_response(model, items, _usage(usage), "completed", rid))
