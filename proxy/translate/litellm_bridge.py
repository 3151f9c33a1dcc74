"""Across dialects through litellm (a route with ``translate: true``): an Anthropic client to an OpenAI-compatible or Ollama upstream, an OpenAI or Ollama client to Anthropic, streams included."""

from __future__ import annotations

import asyncio
import importlib
import json
import os
import sys
from collections.abc import AsyncIterator
from typing import Any

import structlog
from aiohttp import web
from multidict import CIMultiDictProxy

from config.schema import Route
from proxy import appkeys, json_codec
from proxy.context import RequestContext
from proxy.dialects.anthropic import system_without_billing
from proxy.dialects.base import Dialect
from proxy.dialects.errors import ProxyError, stream_error_bytes
from proxy.dialects.ollama import as_openai_request, ollama_object
from proxy.dialects.stream import assembler_for
from proxy.http.upstream import describe
from proxy.translate.responses_chat import bridged

log = structlog.get_logger(__name__)
ANTHROPIC_FIELDS = (
    "messages",
    "max_tokens",
    "system",
    "tools",
    "tool_choice",
    "stop_sequences",
    "temperature",
    "top_p",
    "top_k",
    "thinking",
    "stream",
)
"""What of a Messages body litellm's Anthropic adapter carries to another provider (``metadata`` is litellm's own
logging field there; ``context_management`` and ``cache_control`` mean nothing to another provider)."""
OPENAI_FIELDS = (
    "messages",
    "max_tokens",
    "max_completion_tokens",
    "temperature",
    "top_p",
    "stop",
    "stream",
    "stream_options",
    "tools",
    "tool_choice",
    "parallel_tool_calls",
    "response_format",
    "seed",
    "user",
    "presence_penalty",
    "frequency_penalty",
    "n",
    "logprobs",
    "top_logprobs",
    "reasoning_effort",
)
"""What of an OpenAI chat body reaches litellm for an Anthropic route: the fields of the chat-completions schema that
mean something to another provider, nothing else. litellm reads connection settings from the same keyword arguments
(``base_url``, ``api_base``, ``api_key``, ``fallbacks``, ``model_list``, ``custom_llm_provider``, ``extra_headers``,
``mock_response``, …), so a client field outside this list could send the route's key to an address of its choosing."""
SKIP_MCP = {"_skip_mcp_handler": True}
"""litellm 1.106 (pinned) routes any call with tools through its MCP gateway check, which imports the ``mcp`` package;
Ruyi's tools are the client's own function tools, never MCP servers for litellm to call."""
OPENAI_BASE = {"openai": "", "ollama": "/v1"}
"""Where an upstream of each kind serves OpenAI chat: Ollama on its ``/v1`` (litellm's own Ollama provider asks the
server for the model's details with a blocking call on the event loop after each answer; and Ruyi measures an
Anthropic request for an Ollama route at the window Ollama's ``/v1`` runs with, ``ollama.default_context``)."""


ADAPTER = "litellm.llms.anthropic.pass_through.adapters.handler"
"""litellm's Anthropic-to-chat-completions adapter, called directly: its public ``anthropic_messages`` drops the
switch that keeps its inner completion call off the MCP gateway (which needs the ``mcp`` package for any tool)."""


async def _litellm() -> Any:
    """litellm, imported once in a worker thread (it takes seconds), never fetching its model map from the network."""
    module = sys.modules.get("litellm")
    if module is None:
        os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
        module = await asyncio.to_thread(importlib.import_module, "litellm")
        await asyncio.to_thread(importlib.import_module, ADAPTER)
    module.suppress_debug_info = True
    return module


def client_key(headers: CIMultiDictProxy[str]) -> str | None:
    """The client's own upstream key: ``x-api-key`` (Anthropic's header) or an ``Authorization`` bearer."""
    key = headers.get("x-api-key")
    if key:
        return key
    value = headers.get("Authorization", "")
    return value[7:].strip() if value[:7].lower() == "bearer " else None


def anthropic_arguments(body: dict[str, Any], route: Route, key: str | None, model: str) -> dict[str, Any]:
    """The adapter's arguments for a Messages body bound for an OpenAI-compatible or Ollama route;
    Claude Code's billing line is dropped from the system prompt (it breaks the provider's cache; some refuse it)."""
    args = {k: body[k] for k in ANTHROPIC_FIELDS if k in body}
    if "system" in args:
        args["system"] = system_without_billing(args["system"])
    base = route.url.rstrip("/") + OPENAI_BASE[route.kind]
    return {**args, "model": f"openai/{model}", "api_base": base, "api_key": key or "none", **SKIP_MCP}


def openai_arguments(body: dict[str, Any], route: Route, key: str | None, model: str) -> dict[str, Any]:
    """litellm.acompletion's arguments for an OpenAI chat body bound for an Anthropic route."""
    args = {k: body[k] for k in OPENAI_FIELDS if k in body}
    if isinstance(args.get("tools"), list):  # function tools only: litellm turns other kinds (``mcp``) into server calls
        args["tools"] = [t for t in args["tools"] if isinstance(t, dict) and t.get("type", "function") == "function"]
    return {**args, "model": f"anthropic/{model}", "api_base": route.url, "api_key": key, "drop_params": True, **SKIP_MCP}


def ollama_arguments(body: dict[str, Any], route: Route, key: str | None, model: str, generate: bool, stream: bool) -> dict[str, Any]:
    """litellm.acompletion's arguments for an Ollama chat or generate body bound for an Anthropic or OpenAI-compatible
    route (llama.cpp, vLLM, LM Studio behind an Ollama client)."""
    args = as_openai_request(body, generate)
    if stream:
        args["stream_options"] = {"include_usage": True}
    provider = "anthropic" if route.kind == "anthropic" else "openai"
    return {
        **args,
        "stream": stream,
        "model": f"{provider}/{model}",
        "api_base": route.url,
        "api_key": key or "none",
        "drop_params": True,
        **SKIP_MCP,
    }


ANTHROPIC_ROLES = frozenset({"user", "assistant"})


def check_anthropic_body(body: dict[str, Any]) -> None:
    """What Anthropic itself refuses with 400 ``invalid_request_error``, refused the same way before litellm sees it
    (litellm would answer 502 or make up a default)."""
    if not isinstance(body.get("max_tokens"), int) or isinstance(body.get("max_tokens"), bool):
        raise ProxyError(400, "invalid_request_error", "max_tokens: Field required (an integer: the most tokens the answer may take)")
    messages = body.get("messages")
    if not isinstance(messages, list) or not messages:
        raise ProxyError(400, "invalid_request_error", "messages: Field required (a non-empty list)")
    for i, message in enumerate(messages):
        role = message.get("role") if isinstance(message, dict) else None
        if role not in ANTHROPIC_ROLES:
            raise ProxyError(
                400,
                "invalid_request_error",
                f"messages.{i}.role: Input should be 'user' or 'assistant' (got {role!r}); a system prompt goes in the top-level system field",
            )


async def translated(request: web.Request, dialect: Dialect, forwarded: bytes, ctx: RequestContext) -> web.StreamResponse:
    """Send the (rewritten) body through litellm's translation and answer in the client's dialect."""
    assert ctx.route is not None and ctx.model is not None
    if ctx.wire == "responses":  # to a chat-only server: Ruyi's own bridge, no litellm
        return await bridged(request, forwarded, ctx)
    app, route = request.app, ctx.route
    body = json_codec.loads(forwarded)
    if ctx.wire == "anthropic":
        ctx.response_headers.setdefault("request-id", ctx.request_id)  # the anthropic SDK's ``_request_id``
        check_anthropic_body(body)
    generate = dialect.name == "ollama_generate"
    key = route.key or client_key(request.headers)
    litellm = await _litellm()
    timeout = app[appkeys.CONFIG].upstream.read_timeout_seconds
    async with app[appkeys.SLOTS].slot(ctx):
        try:
            if ctx.wire == "anthropic":
                adapter = sys.modules[ADAPTER].LiteLLMMessagesToCompletionTransformationHandler
                result = await adapter.async_anthropic_messages_handler(**anthropic_arguments(body, route, key, ctx.model), timeout=timeout)
            elif ctx.wire == "ollama":
                result = await litellm.acompletion(**ollama_arguments(body, route, key, ctx.model, generate, ctx.stream), timeout=timeout)
            else:
                result = await litellm.acompletion(**openai_arguments(body, route, key, ctx.model), timeout=timeout)
        except Exception as exc:  # noqa: BLE001 - litellm's errors carry the upstream's status
            raise _error(exc, route, ctx.request_id) from None
        if not ctx.stream:
            payload = result if isinstance(result, dict) else result.model_dump(exclude_none=True)
            if isinstance(payload.get("model"), str):
                payload["model"] = ctx.model  # the route's model as the client named it, never litellm's provider prefix
            if ctx.wire == "ollama":
                payload = _ollama_whole(payload, ctx.model, generate)
            data = json.dumps(payload).encode()
            asm = assembler_for(ctx.wire)
            asm.feed_object(payload)
            asm.result.done = True
            ctx.assembled = asm.result
            return web.Response(body=data, content_type="application/json", headers=ctx.response_headers)
        frames = _ollama_lines(result, ctx.model, generate) if ctx.wire == "ollama" else _frames(result, ctx.wire, ctx.model)
        return await _relay(request, ctx, frames, route)


ERROR_CHARS = 2000
"""How much of a translation error's cause the client and the log get (the whole of it, within reason)."""


def _error(exc: Exception, route: Route, request_id: str | None = None) -> ProxyError:
    status = getattr(exc, "status_code", None)
    status = status if isinstance(status, int) and 400 <= status < 600 else 502
    message = " ".join(str(getattr(exc, "message", "") or exc).split())[:ERROR_CHARS]  # every line of the cause, on one
    log.warning("translation_failed", request_id=request_id, upstream=describe(route), status=status, error=type(exc).__name__, cause=message)
    return ProxyError(status, "translation_failed", f"the upstream {describe(route)} (through litellm's translation) answered {status}: {message}")


def _provider_prefixed(model: str) -> tuple[bytes, bytes]:
    """The model as litellm names it in a stream (``openai/gpt-4o``), and as the client named it, as JSON bytes."""
    return (json.dumps(f"openai/{model}").encode(), json.dumps(model).encode())


async def _frames(result: Any, wire: str, model: str) -> AsyncIterator[bytes]:
    """The stream in the client's dialect: Anthropic's SSE events as litellm writes them (the model as the client
    named it, not litellm's ``openai/…``), or OpenAI chunks as ``data:`` lines ending with ``[DONE]``."""
    prefixed, plain = _provider_prefixed(model)
    async for item in result:
        if wire == "anthropic":
            frame = item if isinstance(item, bytes) else str(item).encode()
            yield frame.replace(b'"model": ' + prefixed, b'"model": ' + plain).replace(b'"model":' + prefixed, b'"model":' + plain)
        else:
            chunk = item.model_dump(exclude_none=True)
            if isinstance(chunk.get("model"), str):
                chunk["model"] = model
            yield b"data: " + json.dumps(chunk, separators=(",", ":")).encode() + b"\n\n"
    if wire != "anthropic":
        yield b"data: [DONE]\n\n"


def _ollama_whole(payload: dict[str, Any], model: str, generate: bool) -> dict[str, Any]:
    choice = (payload.get("choices") or [{}])[0]
    message = choice.get("message") or {}
    return ollama_object(
        model,
        generate,
        message.get("content") or "",
        message.get("tool_calls"),
        done=True,
        reason=choice.get("finish_reason"),
        usage=payload.get("usage"),
    )


async def _ollama_lines(result: Any, model: str, generate: bool) -> AsyncIterator[bytes]:
    """OpenAI chunks as Ollama's NDJSON lines: text as it comes, tool calls whole at the end, then the ``done`` line."""
    calls: dict[int, dict[str, Any]] = {}
    reason, usage = None, None
    async for chunk in result:
        data = chunk.model_dump(exclude_none=True)
        usage = data.get("usage") or usage
        for choice in data.get("choices") or ():
            delta = choice.get("delta") or {}
            reason = choice.get("finish_reason") or reason
            for call in delta.get("tool_calls") or ():
                slot = calls.setdefault(call.get("index", 0), {"function": {"name": "", "arguments": ""}})
                fn = call.get("function") or {}
                slot["function"]["name"] += fn.get("name") or ""
                slot["function"]["arguments"] += fn.get("arguments") or ""
            if delta.get("content"):
                yield json.dumps(ollama_object(model, generate, delta["content"])).encode() + b"\n"
    if calls:
        yield json.dumps(ollama_object(model, generate, "", [calls[i] for i in sorted(calls)])).encode() + b"\n"
    yield json.dumps(ollama_object(model, generate, "", done=True, reason=reason, usage=usage)).encode() + b"\n"


async def _relay(request: web.Request, ctx: RequestContext, frames: AsyncIterator[bytes], route: Route) -> web.StreamResponse:
    kind = "application/x-ndjson" if ctx.wire == "ollama" else "text/event-stream"
    out = web.StreamResponse(status=200, headers={**ctx.response_headers, "Content-Type": kind, "Cache-Control": "no-cache"})
    await out.prepare(request)
    ctx.answering = True
    asm = assembler_for(ctx.wire)
    ctx.assembled = asm.result
    try:
        async for frame in frames:
            asm.feed_lines(frame)
            await out.write(frame)
    except Exception as exc:  # noqa: BLE001 - end the stream the client's SDK way, never a hang
        error = _error(exc, route, ctx.request_id)
        asm.result.error = error.code
        await out.write(stream_error_bytes(ctx.wire, error.code, error.message, error.status))
    await out.write_eof()
    return out
