"""Relay an upstream answer to the client: streamed chunk by chunk, or whole; assembled on the side."""

from __future__ import annotations

import asyncio

import aiohttp
import structlog
from aiohttp import web

from proxy import appkeys
from proxy.context import RequestContext
from proxy.dialects.base import Assembled
from proxy.dialects.errors import Wire, stream_error_bytes
from proxy.dialects.stream import LineRelay, assemble_body, assembler_for
from proxy.http.settling import before_last_event
from proxy.http.shutdown import SHUTDOWN_MESSAGE
from proxy.http.upstream import describe, read_all, relay_headers

log = structlog.get_logger(__name__)
STREAM_TYPES = ("text/event-stream", "application/x-ndjson", "application/jsonl")
UPSTREAM_FAULTS = (aiohttp.ClientPayloadError, aiohttp.ServerDisconnectedError, aiohttp.ClientOSError, asyncio.TimeoutError)


async def relay_whole(resp: aiohttp.ClientResponse, ctx: RequestContext, wire: Wire | None) -> tuple[web.Response, Assembled | None]:
    """Read the whole upstream body and answer with it unchanged (assembled aside when ``wire`` is given)."""
    body = await read_all(resp, ctx)
    assembled = assemble_body(wire, body) if resp.status == 200 and wire else None
    out = web.Response(body=body, status=resp.status, headers=relay_headers(resp.headers, ctx.response_headers))
    return out, assembled


async def relay_stream(request: web.Request, resp: aiohttp.ClientResponse, ctx: RequestContext, wire: Wire) -> tuple[web.StreamResponse, Assembled]:
    """Write each chunk as it arrives (whole lines only); a broken upstream ends the stream with an error."""
    out = web.StreamResponse(status=resp.status, headers=relay_headers(resp.headers, ctx.response_headers))
    await out.prepare(request)
    ctx.answering = True
    lines, asm = LineRelay(), assembler_for(wire)
    ctx.assembled = asm.result  # what was received so far, recorded even if the client goes away mid-stream
    chunks = resp.content.iter_any().__aiter__()
    while True:
        try:
            chunk = await chunks.__anext__()
        except StopAsyncIteration:
            break
        except UPSTREAM_FAULTS as exc:
            asm.result.error = await _end_broken(request, out, lines, ctx, wire, exc)
            return out, asm.result
        except asyncio.CancelledError:
            if not request.app[appkeys.SHUTDOWN].cut():
                raise
            await _end_cut(out, lines, wire)
            asm.result.error = "ruyi_shutting_down"
            return out, asm.result
        data = lines.feed(chunk)
        if data:
            asm.feed_lines(data)
            if asm.result.done:  # the client may send again once it has this: that request waits for this answer's work
                before_last_event(request, ctx)
            await out.write(data)  # raises if the client has gone: the caller closes the upstream
    tail = lines.flush()
    if tail:
        asm.feed_lines(tail)
        if asm.result.done:
            before_last_event(request, ctx)
        await out.write(tail)
    await out.write_eof()
    return out, asm.result


async def relay_raw(request: web.Request, resp: aiohttp.ClientResponse, ctx: RequestContext) -> web.StreamResponse:
    """Pass an arbitrary answer through as it arrives (pull progress, blobs, anything), its length kept when the
    body reaches the client as the upstream sent it (not decoded on the way)."""
    out = web.StreamResponse(status=resp.status, headers=relay_headers(resp.headers, ctx.response_headers))
    if resp.content_length is not None and "Content-Encoding" not in resp.headers:
        out.content_length = resp.content_length
    await out.prepare(request)
    ctx.answering = True
    try:
        async for chunk in resp.content.iter_any():
            await out.write(chunk)
    except UPSTREAM_FAULTS as exc:
        _log_broken(request, ctx, exc)
        return out  # the client sees a truncated body: the connection is closed without a clean end
    except asyncio.CancelledError:
        if not request.app[appkeys.SHUTDOWN].cut():
            raise
        return out  # the shutdown's deadline: the connection is closed without a clean end, as the upstream would
    await out.write_eof()
    return out


def is_streamed(resp: aiohttp.ClientResponse) -> bool:
    return resp.content_type in STREAM_TYPES


async def _end_cut(out: web.StreamResponse, lines: LineRelay, wire: Wire) -> None:
    """The shutdown's deadline came mid-stream: end it with an error the client's SDK raises."""
    prefix = b"" if wire == "ollama" or lines.at_event_boundary else b"\n"
    await out.write(prefix + stream_error_bytes(wire, "ruyi_shutting_down", SHUTDOWN_MESSAGE, 503))
    await out.write_eof()


def _log_broken(request: web.Request, ctx: RequestContext, exc: BaseException) -> str:
    """Warn that the upstream's answer ended early, naming a read timeout as one; the client-facing message."""
    assert ctx.route is not None
    where = describe(ctx.route)
    if isinstance(exc, asyncio.TimeoutError):
        seconds = request.app[appkeys.CONFIG].upstream.read_timeout_seconds
        log.warning("upstream_stream_timed_out", request_id=ctx.request_id, upstream=where, read_timeout_seconds=seconds)
        return f"the upstream {where} sent nothing for {seconds:g} s (upstream.read_timeout_seconds), so the answer was cut short"
    log.warning("upstream_stream_broken", request_id=ctx.request_id, upstream=where, error=type(exc).__name__)
    return f"the upstream {where} closed the stream before it was complete"


async def _end_broken(request: web.Request, out: web.StreamResponse, lines: LineRelay, ctx: RequestContext, wire: Wire, exc: BaseException) -> str:
    """End a stream the upstream broke with an error event (SSE) or line (NDJSON); the error's code."""
    message = _log_broken(request, ctx, exc)
    code = "upstream_timeout" if isinstance(exc, asyncio.TimeoutError) else "upstream_disconnected"
    prefix = b"" if wire == "ollama" or lines.at_event_boundary else b"\n"  # end a half-sent SSE event first
    await out.write(prefix + stream_error_bytes(wire, code, message))
    await out.write_eof()
    return code
