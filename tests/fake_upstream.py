"""A real aiohttp server speaking OpenAI chat, OpenAI Responses (tests/fake_responses.py), Anthropic Messages (tests/fake_anthropic.py) and Ollama's API, with switchable faults, that records requests."""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from aiohttp import web

from proxy.know.tokens import TokenCounter
from tests import fake_anthropic, fake_responses
from tests.fake_summary import summary_from_prompt

FAKE_UPSTREAM = web.AppKey("fake_upstream", "FakeUpstream")


@dataclass
class Received:
    method: str
    path: str
    query: str
    """The raw query string, as it arrived (percent-encoding kept)."""
    headers: dict[str, str]
    body: bytes

    @property
    def json(self) -> Any:
        return json.loads(self.body)


RUYIS_OWN = ("You are Ruyi's ", "You compact an agent's notebook")
"""How the system prompts of the LLM calls Ruyi makes itself begin (summaries, proposals, forms, notebook compaction)."""


def ruyis_own(received: Received) -> bool:
    """Whether a request is one of Ruyi's own summarizer calls rather than a client's."""
    if received.path != "/v1/chat/completions":
        return False
    try:
        first = (json.loads(received.body).get("messages") or [{}])[0]
    except (ValueError, AttributeError):
        return False
    return isinstance(first, dict) and isinstance(first.get("content"), str) and first["content"].startswith(RUYIS_OWN)


@dataclass
class FakeUpstream:
    """Behaviour switches and what was received. ``fault``: None, "delay", "hold" (answer once ``held`` is set), "status",
    "cut", "slow"."""

    fault: str | None = None
    delay: float = 0.0
    held: asyncio.Event = field(default_factory=asyncio.Event)
    status: int = 500
    status_body: dict[str, Any] = field(default_factory=lambda: {"error": {"message": "boom", "type": "server_error", "code": None}})
    cut_after: int = 2
    chunk_delay: float = 0.0
    reply: str = "Hello from the fake upstream."
    tool_calls: list[dict[str, Any]] | None = None
    """When set, a non-streamed answer that calls a tool calls these (a Task call's prompt, several calls at once)."""
    prompt_tokens: int | None = None
    prompt_scale: float | None = None
    token_limit: int | None = None
    """When set, /v1/chat/completions refuses a prompt over this many of its own tokens (``prompt_scale`` × Ruyi's
    count: another tokenizer), stating the limit and its count the way ``limit_style`` says."""
    limit_style: str = "openai"
    """``openai`` (llama-cpp-python, vLLM: "maximum context length is L tokens. However, you requested N tokens") or
    ``llamacpp`` (llama.cpp's server: ``exceed_context_size_error`` with ``n_prompt_tokens`` and ``n_ctx``)."""
    refusals: int = 0
    """When set, prompt_tokens are reported as this share of Ruyi's own estimate of what was received: an
    upstream whose tokenizer counts differently, which Ruyi calibrates against."""
    cached_tokens: int = 0
    context_length: int = 131072
    max_prompt_chars: int | None = None
    """When set, a chat request whose messages serialise longer than this is refused as too long."""
    summary_reply: str = "## Task\nsummary\n## Decisions\n-\n## Constraints\n-\n## Progress\n-\n## Anchors\n—"
    """The answer to a request from Ruyi's LLM summarizer (its system prompt starts "You are Ruyi's archivist", or "You are
    Ruyi's notary" when it proposes what an archive established)."""
    summary_from_prompt: bool = False
    """When set, the archivist's answer is built from the prompt it received (tests/fake_summary.py), not ``summary_reply``."""
    summary_delay: float = 0.0
    """How long a summarizer request waits before its answer."""
    summary_held: asyncio.Event | None = None
    """When set, a summarizer request answers only once this event is set."""
    models: list[dict[str, Any]] = field(default_factory=lambda: [{"id": "gpt-4o", "object": "model"}])
    """GET /v1/models's ``data`` (vLLM and SGLang add ``max_model_len`` to each)."""
    props: dict[str, Any] | None = None
    """llama.cpp's GET /props body (404 when None)."""
    lmstudio_models: list[dict[str, Any]] | None = None
    """LM Studio's GET /api/v0/models ``data`` (404 when None)."""
    info: dict[str, Any] | None = None
    """TGI's GET /info body (404 when None)."""
    discovery_status: int | None = None
    """When set, the four endpoints above answer with this status and no body."""

    file_size: int = 8 * 1024 * 1024
    """Bytes of ``GET /v1/files/{id}/content``: sent with a Content-Length, half first, then the rest once
    ``release`` is set (or after ``release_wait`` seconds, so that a proxy holding the body cannot hang a test)."""
    release: asyncio.Event = field(default_factory=asyncio.Event)
    release_wait: float = 30.0
    released_before_the_end: bool | None = None
    """Whether ``release`` was set before the last half went out (None until a file was sent)."""
    request_id: str | None = "req_fake_upstream_0001"
    """Sent as ``x-request-id`` on every ``/v1/`` answer, as OpenAI does (None: sent on none)."""
    cleared_input_tokens: int = 0
    """Tokens Anthropic's own context management reports clearing (``applied_edits``) when a request asks for it."""
    anthropic_refused: list[list[str]] = field(default_factory=list)
    """What the Anthropic side refused in each Messages body it answered 400 (tests/anthropic_shape.py)."""
    received: list[Received] = field(default_factory=list)
    arrived: asyncio.Event = field(default_factory=asyncio.Event)
    """Set each time a request is recorded (``wait_for`` clears it and waits again)."""
    active_streams: int = 0
    finished_streams: int = 0

    def last(self, path: str | None = None) -> Received:
        """The last request a client's traffic sent (Ruyi's own summarizer calls, made in the background, left out)."""
        items = [r for r in self.received if (path is None or r.path == path) and not ruyis_own(r)]
        return items[-1]

    async def wait_for(self, found: Callable[[Received], bool] = lambda r: True, within: float = 30.0) -> Received:
        """The first request received for which ``found`` holds, waiting for it to arrive: ``TimeoutError`` after
        ``within`` seconds rather than a hung test."""
        async with asyncio.timeout(within):
            while True:
                self.arrived.clear()
                match = next((r for r in self.received if found(r)), None)
                if match is not None:
                    return match
                await self.arrived.wait()

    def pieces(self) -> list[str]:
        words = self.reply.split(" ")
        return [w + (" " if i < len(words) - 1 else "") for i, w in enumerate(words)]


def make_fake_app(fake: FakeUpstream | None = None) -> web.Application:
    app = web.Application(client_max_size=256 * 1024 * 1024)
    app[FAKE_UPSTREAM] = fake or FakeUpstream()
    app.router.add_post("/v1/chat/completions", openai_chat)
    app.router.add_post("/v1/messages", fake_anthropic.messages)
    app.router.add_post("/v1/responses", fake_responses.responses)
    app.router.add_post("/v1/messages/count_tokens", fake_anthropic.count_tokens)
    app.router.add_get("/v1/models", _discovery(lambda fake: {"object": "list", "data": fake.models}))
    app.router.add_get("/props", _discovery(lambda fake: fake.props))
    app.router.add_get(
        "/api/v0/models", _discovery(lambda fake: None if fake.lmstudio_models is None else {"object": "list", "data": fake.lmstudio_models})
    )
    app.router.add_get("/info", _discovery(lambda fake: fake.info))
    app.router.add_post("/v1/embeddings", embeddings)
    app.router.add_post("/api/chat", ollama_chat)
    app.router.add_post("/api/generate", ollama_generate)
    app.router.add_get("/api/tags", _json({"models": [{"name": "llama3.1:8b", "model": "llama3.1:8b"}]}))
    app.router.add_get("/api/version", _json({"version": "0.12.0"}))
    app.router.add_post("/api/show", ollama_show)
    app.router.add_post("/api/pull", ollama_pull)
    app.router.add_get("/v1/files/{file_id}/content", file_content)
    app.router.add_get("/v1/files/{file_id}", file_info)
    app.router.add_route("*", "/echo/{tail:.*}", echo)
    app.middlewares.append(_record)
    app.on_response_prepare.append(_stamp_request_id)
    return app


async def _stamp_request_id(request: web.Request, response: web.StreamResponse) -> None:
    fake = request.app[FAKE_UPSTREAM]
    if fake.request_id and request.path.startswith("/v1/"):
        response.headers["x-request-id"] = fake.request_id


def _json(payload: dict[str, Any]) -> Any:
    async def handler(request: web.Request) -> web.Response:
        return web.json_response(payload)

    return handler


def _discovery(body_of: Any) -> Any:
    """A GET endpoint that says what the server runs (models, props, info): 404 when the fake has none."""

    async def handler(request: web.Request) -> web.Response:
        fake = request.app[FAKE_UPSTREAM]
        if fake.discovery_status is not None:
            return web.Response(status=fake.discovery_status)
        body = body_of(fake)
        return web.json_response(body) if body is not None else web.json_response({"error": "not found"}, status=404)

    return handler


@web.middleware
async def _record(request: web.Request, handler: Any) -> web.StreamResponse:
    fake = request.app[FAKE_UPSTREAM]
    body = await request.read()
    fake.received.append(Received(request.method, request.path, request.rel_url.raw_query_string, dict(request.headers), body))
    fake.arrived.set()
    if fake.fault == "delay":
        await asyncio.sleep(fake.delay)
    if fake.fault == "hold":
        await fake.held.wait()
    if fake.fault == "status":
        return web.json_response(fake.status_body, status=fake.status)
    if fake.max_prompt_chars is not None and request.path in ("/v1/chat/completions", "/api/chat"):  # /v1/messages: its own handler
        size = len(json.dumps(json.loads(body).get("messages")))
        if size > fake.max_prompt_chars:
            message = f"This model's maximum context length is {fake.max_prompt_chars} characters; the messages have {size}."
            if request.path == "/api/chat":
                return web.json_response({"error": f"input length exceeds the context length ({size} > {fake.max_prompt_chars})"}, status=400)
            return web.json_response({"error": {"message": message, "type": "invalid_request_error", "code": "context_length_exceeded"}}, status=400)
    if fake.token_limit is not None and request.path == "/v1/chat/completions":
        parsed = json.loads(body)
        first = (parsed.get("messages") or [{}])[0]
        own = isinstance(first.get("content"), str) and first["content"].startswith(("You are Ruyi's archivist", "You are Ruyi's notary"))
        n = _prompt_tokens(fake, parsed)
        if not own and n > fake.token_limit:
            fake.refusals += 1
            if fake.limit_style == "llamacpp":
                error = {
                    "code": 400,
                    "message": f"request ({n} tokens) exceeds the available context size ({fake.token_limit} tokens), try increasing it",
                    "type": "exceed_context_size_error",
                    "n_prompt_tokens": n,
                    "n_ctx": fake.token_limit,
                }
            else:
                error = {
                    "message": f"This model's maximum context length is {fake.token_limit} tokens. However, you requested {n} tokens "
                    f"({n} in the messages, 0 in the completion). Please reduce the length of the messages or completion.",
                    "type": "invalid_request_error",
                    "param": "messages",
                    "code": "context_length_exceeded",
                }
            return web.json_response({"error": error}, status=400)
    return await handler(request)


def _prompt_tokens(fake: FakeUpstream, body: dict[str, Any]) -> int:
    if fake.prompt_tokens is not None:
        return fake.prompt_tokens
    if fake.prompt_scale is not None and isinstance(body.get("messages"), list):
        estimate = TokenCounter().count(body.get("model") or "", body["messages"], body.get("tools")).total
        return round(fake.prompt_scale * estimate)
    return max(1, len(json.dumps(body.get("messages") or body.get("prompt") or "")) // 4)


async def _stream(request: web.Request, content_type: str, frames: list[bytes]) -> web.StreamResponse:
    """Send frames one by one, honouring the cut and slow faults, counting live streams."""
    fake = request.app[FAKE_UPSTREAM]
    resp = web.StreamResponse(headers={"Content-Type": content_type})
    await resp.prepare(request)
    fake.active_streams += 1
    try:
        for i, frame in enumerate(frames):
            if fake.fault == "cut" and i == fake.cut_after:
                await resp.write(frame[: len(frame) // 2])  # half an event, then the connection drops
                assert request.transport is not None
                request.transport.close()
                return resp
            await resp.write(frame)
            if fake.chunk_delay or fake.fault == "slow":
                await asyncio.sleep(fake.chunk_delay or 0.05)
        await resp.write_eof()
        fake.finished_streams += 1
        return resp
    finally:
        fake.active_streams -= 1


async def openai_chat(request: web.Request) -> web.StreamResponse:
    fake = request.app[FAKE_UPSTREAM]
    body = await request.json()
    first = (body.get("messages") or [{}])[0]
    if isinstance(first.get("content"), str) and first["content"].startswith(("You are Ruyi's archivist", "You are Ruyi's notary")):
        await asyncio.sleep(fake.summary_delay)
        if fake.summary_held is not None:
            await fake.summary_held.wait()
        archivist = fake.summary_from_prompt and first["content"].startswith("You are Ruyi's archivist")
        message = {"role": "assistant", "content": summary_from_prompt(body["messages"]) if archivist else fake.summary_reply}
        return web.json_response(
            {
                "id": "chatcmpl-summary",
                "object": "chat.completion",
                "created": int(time.time()),
                "model": body.get("model"),
                "choices": [{"index": 0, "message": message, "finish_reason": "stop"}],
                "usage": {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2},
            }
        )
    prompt = _prompt_tokens(fake, body)
    usage = {
        "prompt_tokens": prompt,
        "completion_tokens": len(fake.pieces()),
        "total_tokens": prompt + len(fake.pieces()),
        "prompt_tokens_details": {"cached_tokens": fake.cached_tokens},
    }
    wants_tool = bool(body.get("tools")) and (body.get("messages") or [{}])[-1].get("role") == "user"
    call = {
        "id": "call_fake_1",
        "type": "function",
        "function": {"name": body["tools"][0]["function"]["name"] if wants_tool else "", "arguments": '{"path": "README.md"}'},
    }
    base = {"id": "chatcmpl-fake", "object": "chat.completion.chunk", "created": int(time.time()), "model": body.get("model")}
    if not body.get("stream"):
        message: dict[str, Any] = {"role": "assistant", "content": None if wants_tool else fake.reply}
        if wants_tool:
            message["tool_calls"] = fake.tool_calls or [call]
        choice = {"index": 0, "message": message, "finish_reason": "tool_calls" if wants_tool else "stop"}
        return web.json_response({**base, "object": "chat.completion", "choices": [choice], "usage": usage})
    chunks: list[dict[str, Any]] = [{**base, "choices": [{"index": 0, "delta": {"role": "assistant", "content": ""}, "finish_reason": None}]}]
    if wants_tool:
        args = call["function"]["arguments"]
        first = {"index": 0, "id": call["id"], "type": "function", "function": {"name": call["function"]["name"], "arguments": ""}}
        chunks.append({**base, "choices": [{"index": 0, "delta": {"tool_calls": [first]}, "finish_reason": None}]})
        for part in (args[:8], args[8:]):
            chunks.append(
                {**base, "choices": [{"index": 0, "delta": {"tool_calls": [{"index": 0, "function": {"arguments": part}}]}, "finish_reason": None}]}
            )
    else:
        for piece in fake.pieces():
            chunks.append({**base, "choices": [{"index": 0, "delta": {"content": piece}, "finish_reason": None}]})
    chunks.append({**base, "choices": [{"index": 0, "delta": {}, "finish_reason": "tool_calls" if wants_tool else "stop"}]})
    if (body.get("stream_options") or {}).get("include_usage"):
        chunks.append({**base, "choices": [], "usage": usage})
    frames = [b"data: " + json.dumps(c).encode() + b"\n\n" for c in chunks] + [b"data: [DONE]\n\n"]
    return await _stream(request, "text/event-stream", frames)


async def ollama_chat(request: web.Request) -> web.StreamResponse:
    fake = request.app[FAKE_UPSTREAM]
    body = await request.json()
    model, now = body.get("model"), "2026-11-22T00:00:00Z"
    wants_tool = bool(body.get("tools")) and (body.get("messages") or [{}])[-1].get("role") == "user"
    final = {
        "model": model,
        "created_at": now,
        "message": {"role": "assistant", "content": ""},
        "done": True,
        "done_reason": "stop",
        "total_duration": 1000,
        "prompt_eval_count": _prompt_tokens(fake, body),
        "eval_count": len(fake.pieces()),
    }
    if wants_tool:
        name = body["tools"][0]["function"]["name"]
        tool_msg = {"role": "assistant", "content": "", "tool_calls": [{"function": {"name": name, "arguments": {"path": "README.md"}}}]}
        objs = [{"model": model, "created_at": now, "message": tool_msg, "done": False}]
    else:
        objs = [{"model": model, "created_at": now, "message": {"role": "assistant", "content": p}, "done": False} for p in fake.pieces()]
    if body.get("stream", True) is False:
        message = objs[0]["message"] if wants_tool else {"role": "assistant", "content": fake.reply}
        return web.json_response({**final, "message": message})
    frames = [json.dumps(o).encode() + b"\n" for o in [*objs, final]]
    return await _stream(request, "application/x-ndjson", frames)


async def ollama_generate(request: web.Request) -> web.StreamResponse:
    fake = request.app[FAKE_UPSTREAM]
    body = await request.json()
    model, now = body.get("model"), "2026-11-22T00:00:00Z"
    final = {
        "model": model,
        "created_at": now,
        "response": "",
        "done": True,
        "done_reason": "stop",
        "context": [1, 2, 3],
        "prompt_eval_count": _prompt_tokens(fake, body),
        "eval_count": len(fake.pieces()),
    }
    if body.get("stream", True) is False:
        return web.json_response({**final, "response": fake.reply})
    objs = [{"model": model, "created_at": now, "response": p, "done": False} for p in fake.pieces()]
    return await _stream(request, "application/x-ndjson", [json.dumps(o).encode() + b"\n" for o in [*objs, final]])


async def ollama_show(request: web.Request) -> web.Response:
    fake = request.app[FAKE_UPSTREAM]
    body = await request.json()
    name = body.get("model") or body.get("name")
    if name == "missing":
        return web.json_response({"error": f"model '{name}' not found"}, status=404)
    info = {"general.architecture": "llama", "llama.context_length": fake.context_length}
    return web.json_response({"modelfile": "", "parameters": "", "details": {"family": "llama"}, "model_info": info})


async def ollama_pull(request: web.Request) -> web.StreamResponse:
    frames = [json.dumps({"status": s}).encode() + b"\n" for s in ("pulling manifest", "verifying", "success")]
    return await _stream(request, "application/x-ndjson", frames)


async def embeddings(request: web.Request) -> web.Response:
    body = await request.json()
    return web.json_response({"object": "list", "model": body.get("model"), "data": [{"object": "embedding", "index": 0, "embedding": [0.1, 0.2]}]})


async def echo(request: web.Request) -> web.Response:
    body = await request.read()
    return web.json_response(
        {"method": request.method, "path": request.path, "query": request.query_string, "size": len(body)}, headers={"X-Echo": "1"}
    )


def file_bytes(size: int) -> bytes:
    return bytes(range(256)) * (size // 256) + bytes(size % 256)


async def file_content(request: web.Request) -> web.StreamResponse:
    fake = request.app[FAKE_UPSTREAM]
    data = file_bytes(fake.file_size)
    half = len(data) // 2
    resp = web.StreamResponse(headers={"Content-Type": "application/octet-stream"})
    resp.content_length = len(data)
    await resp.prepare(request)
    await resp.write(data[:half])
    try:
        await asyncio.wait_for(fake.release.wait(), fake.release_wait)
    except TimeoutError:
        pass
    fake.released_before_the_end = fake.release.is_set()
    await resp.write(data[half:])
    await resp.write_eof()
    return resp


async def file_info(request: web.Request) -> web.Response:
    """A JSON answer sent gzip-compressed, with the compressed Content-Length."""
    info = {"id": request.match_info["file_id"], "object": "file", "bytes": request.app[FAKE_UPSTREAM].file_size, "purpose": "x" * 5000}
    resp = web.json_response(info)
    resp.enable_compression(web.ContentCoding.gzip)
    return resp
