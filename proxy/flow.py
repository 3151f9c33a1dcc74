"""The story of a request to a rewriting endpoint (OpenAI ``/v1/chat/completions``, Anthropic ``/v1/messages``, Ollama ``/api/chat`` and ``/api/generate``)."""

from __future__ import annotations

import asyncio
from typing import Any

import structlog
from aiohttp import web

from proxy import appkeys
from proxy.context import CTX_KEY, RequestContext, mode_from
from proxy.dialects.anthropic import ANTHROPIC_MESSAGES
from proxy.dialects.base import Dialect
from proxy.dialects.ollama import OLLAMA_CHAT, OLLAMA_GENERATE
from proxy.dialects.openai_chat import OPENAI_CHAT
from proxy.dialects.responses import RESPONSES
from proxy.http.auth import check_route, identify
from proxy.http.relay import is_streamed, relay_stream, relay_whole
from proxy.http.request_body import read_json_body
from proxy.http.settling import send_now, settled_by
from proxy.http.upstream import forward_headers, read_all, relay_headers, send
from proxy.rewrite.after_answer import observe_off_loop
from proxy.rewrite.prepare import prepare
from proxy.rewrite.retry import retry_after_refusal, settle_retry_in_turn
from proxy.routes import check_kind, route_of, upstream_url
from proxy.translate.litellm_bridge import translated

log = structlog.get_logger(__name__)


async def handle(request: web.Request, dialect: Dialect) -> web.StreamResponse:
    """One request, top to bottom; each line a call into the room that does it."""
    app, ctx = request.app, request[CTX_KEY]
    caller = identify(request)  # who is asking: the key decides the agent, checked before the body is read
    ctx.agent_id = caller.agent_id or ctx.agent_id
    raw, body = await read_json_body(request)  # the body, within limits, a JSON object
    ctx.model, ctx.route = route_of(body, app[appkeys.CONFIG])  # which upstream serves its model
    check_route(caller, ctx.route)  # the caller may use that route
    ctx.mode = mode_from(request)  # X-Ruyi-Mode: on, off, dry-run
    translate = check_kind(ctx.route, dialect.wire, ctx.model)  # the upstream speaks the client's dialect, or litellm translates
    ctx.stream = dialect.is_stream(body)
    keeper = ctx.keeper = app[appkeys.KEEPER]
    ctx.parent_id = request.headers.get("X-Ruyi-Parent")  # a sub-agent that names its parent session
    ctx.task = request.headers.get("X-Ruyi-Task")  # the task instruction of the full layout
    unsettled = app[appkeys.UNSETTLED]
    if unsettled.waiting_for(ctx.agent_id):  # the agent's last answer was sent before its work: this request sees that work
        await unsettled.wait(ctx.agent_id)
    with keeper.activity.busy(ctx.agent_id):  # the agent is not idle (its notebook is not compacted) while this runs
        if fresh_conversation(body, request.headers):  # maybe a sub-agent's first request: its parent's task call is known first
            await keeper.settle_agent(ctx.agent_id)
        if (server := dialect.server_context(body)) is not None:
            ctx.facts["context_management"] = server  # the provider's own clearing, forwarded untouched, reported beside Ruyi's
        forwarded = await prepare(request, dialect, raw, body, ctx)  # know it, rewrite it, record what must survive a crash
        shutdown = app[appkeys.SHUTDOWN]
        try:
            if translate:
                out = await translated(request, dialect, forwarded, ctx)  # through litellm, answered in the client's dialect
            else:
                out = await forward(request, dialect, raw, body, ctx, forwarded)  # send it, retry once after an overflow, relay
        except (asyncio.CancelledError, ConnectionResetError):  # the client went away (or the shutdown's deadline came)
            ctx.status = ended_status(ctx, shutdown.deadline_passed)
            # recorded all the same: what was received, and how it ended
            settled_by(shutdown.keep(after_answer(request, ctx, remembering(request, ctx))), ctx, unsettled)
            raise
        except BaseException:
            if ctx.unsettled is not None:  # a stream's last event went out, then this: no work will settle it
                unsettled.settle(ctx.agent_id, ctx.unsettled)
            raise
        ctx.status = out.status
        pending = remembering(request, ctx)
        try:  # a whole answer goes now, its work after (a stream's last event is already out): the agent's next request waits for that work
            if isinstance(out, web.Response) and not out.prepared and not app[appkeys.MEASURER].shared:
                await send_now(request, out, ctx, unsettled)
        finally:
            work = shutdown.keep(after_answer(request, ctx, pending))
            settled_by(work, ctx, unsettled)
        await asyncio.shield(work)  # a client that closes now cancels the wait, never the work
    return out


def remembering(request: web.Request, ctx: RequestContext) -> tuple[str, str] | None:
    """The session whose keeper has this answer to remember, counted as the answer ends (before the client can send its
    next request): the session's next archive reads the keeper's memory once it is remembered (bounded)."""
    m = ctx.measurement
    if m is None or ctx.mode != "on":
        return None
    key = (m.session.agent_id, m.session.session_id)
    request.app[appkeys.KEEPER].pending.expect(key)
    return key


async def after_answer(request: web.Request, ctx: RequestContext, pending: tuple[str, str] | None = None) -> None:
    """Calibrate against the upstream's usage, queue the audit record and S0; then, in the keeper's background,
    anchors the assistant defined, facts for the forms, sub-agents, pool lines (``pending`` is done once they are kept)."""
    try:
        await observe_off_loop(request, ctx)
    finally:
        request.app[appkeys.KEEPER].after_answer(ctx, pending)


def ended_status(ctx: RequestContext, deadline_passed: bool) -> int:
    """The status a request cut short is recorded with: 200 when the upstream's answer had come whole (its final
    event relayed: the client closed after it), 503 when the shutdown's deadline came before any answer, else 499."""
    if ctx.answering and ctx.assembled is not None and ctx.assembled.done and not ctx.assembled.error:
        return 200
    if deadline_passed and not ctx.answering:
        return 503
    return 499


def fresh_conversation(body: dict[str, Any], headers: Any) -> bool:
    """A request that starts a conversation (no session named, no assistant message yet): how a sub-agent begins."""
    messages = body.get("messages")
    return (
        "X-Ruyi-Session" not in headers
        and isinstance(messages, list)
        and not any(isinstance(m, dict) and m.get("role") == "assistant" for m in messages)
    )


async def forward(
    request: web.Request, dialect: Dialect, raw: bytes, body: dict[str, Any], ctx: RequestContext, forwarded: bytes
) -> web.StreamResponse:
    """Send the bytes upstream and relay the answer; after a prompt overflow, one harder batch and one retry."""
    app = request.app
    assert ctx.route is not None
    url = upstream_url(ctx.route, request.rel_url.raw_path, request.rel_url.raw_query_string)
    headers = forward_headers(request.headers, ctx.route)
    headers["Content-Type"] = "application/json"
    while True:
        async with send(app[appkeys.CLIENT], ctx, "POST", url, headers, forwarded, app[appkeys.SLOTS]) as resp:
            await settle_retry_in_turn(request, ctx, accepted=resp.status < 400)  # a retry's harder batch is kept only if accepted
            if resp.status >= 400 and resp.status != 429:
                error = await read_all(resp, ctx)
                retry = await retry_after_refusal(request, dialect, raw, body, ctx, error)  # "prompt too long": one harder batch
                if retry is not None:
                    log.info("overflow_retry", request_id=ctx.request_id, status=resp.status)
                    forwarded = retry
                    continue
                ctx.assembled = None
                return web.Response(body=error, status=resp.status, headers=relay_headers(resp.headers, ctx.response_headers))
            if resp.status == 200 and is_streamed(resp):
                out, ctx.assembled = await relay_stream(request, resp, ctx, dialect.wire)
                return out
            whole, ctx.assembled = await relay_whole(resp, ctx, dialect.wire)
            return whole


async def openai_chat(request: web.Request) -> web.StreamResponse:
    return await handle(request, OPENAI_CHAT)


async def openai_responses(request: web.Request) -> web.StreamResponse:
    return await handle(request, RESPONSES)


async def anthropic_messages(request: web.Request) -> web.StreamResponse:
    return await handle(request, ANTHROPIC_MESSAGES)


async def ollama_chat(request: web.Request) -> web.StreamResponse:
    return await handle(request, OLLAMA_CHAT)


async def ollama_generate(request: web.Request) -> web.StreamResponse:
    return await handle(request, OLLAMA_GENERATE)
