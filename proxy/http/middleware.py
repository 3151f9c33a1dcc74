"""One middleware per request: request id, errors in the client's wire format, the access event."""

from __future__ import annotations

import asyncio
import os
import re
import time

import structlog
from aiohttp import web

from proxy import appkeys
from proxy.context import CTX_KEY, RequestContext
from proxy.dialects.errors import ProxyError, error_response, wire_for_path
from proxy.http.exposure import check_head_size
from proxy.http.settling import READERS, answer_headers
from proxy.http.shutdown import SHUTDOWN_MESSAGE
from proxy.http.upstream import RUYI_REQUEST_ID, describe

log = structlog.get_logger("ruyi.access")
REQUEST_ID = re.compile(r"^[A-Za-z0-9._:-]{1,128}$")
HTTP_CODES = {404: "not_found", 405: "method_not_allowed", 413: "body_too_large"}


@web.middleware
async def request_middleware(request: web.Request, handler: web.Handler) -> web.StreamResponse:
    given = request.headers.get("X-Request-Id", "")
    rid = given if given and REQUEST_ID.match(given) else os.urandom(16).hex()  # as random as uuid4().hex, 4× cheaper
    ctx = RequestContext(request_id=rid, wire=wire_for_path(request.path))
    ctx.response_headers[RUYI_REQUEST_ID] = rid  # X-Request-Id stays the upstream's (support tickets need it)
    request[CTX_KEY] = ctx
    status, resp = 500, None
    shutdown = request.app[appkeys.SHUTDOWN]
    try:
        check_head_size(request, request.app[appkeys.CONFIG].limits.max_header_bytes)
        if request.path.startswith(READERS):  # what it reads includes every answer already sent (settled)
            await request.app[appkeys.UNSETTLED].wait()
        with shutdown.tracking():
            resp = await handler(request)
        status = resp.status
    except ProxyError as exc:
        status = exc.status
        resp = error_response(ctx.wire, exc.status, exc.code, exc.message, ctx.response_headers)
    except web.HTTPException as exc:
        status = exc.status
        code = HTTP_CODES.get(exc.status, "http_error")
        message = f"{exc.reason}: Ruyi serves no such endpoint for {request.method}" if exc.status == 404 else str(exc.reason)
        resp = error_response(ctx.wire, exc.status, code, message, ctx.response_headers)  # never the path echoed back
    except asyncio.CancelledError:
        if ctx.answering or not shutdown.cut():
            status = ctx.status or 499  # the client went away: 499, or 200 when it had the whole stream (flow.ended_status)
            log.debug("client_disconnected", request_id=rid, path=request.path)
            raise
        status = 503  # the shutdown's deadline came before the answer
        resp = error_response(ctx.wire, 503, "ruyi_shutting_down", SHUTDOWN_MESSAGE, ctx.response_headers)
    except ConnectionResetError:
        if request.transport is not None and not request.transport.is_closing():
            raise  # not the client's connection: a fault of Ruyi's, answered 500 by aiohttp
        status = ctx.status or 499  # the client went away while Ruyi wrote to it: nothing more to answer, nothing to fix
        log.debug("client_disconnected", request_id=rid, path=request.path)
        resp = web.Response(status=499, reason="Client Closed Request")  # never sent: the connection is gone
    except Exception:  # a bug must still answer in the client's format
        log.exception("request_failed", request_id=rid, path=request.path)
        resp = error_response(ctx.wire, 500, "internal_error", "Ruyi failed on this request; see its log", ctx.response_headers)
    finally:
        _access(request, ctx, status, resp)
        if ctx.unsettled is not None:  # an answer sent before its work: its access event is recorded
            request.app[appkeys.UNSETTLED].settle(ctx.agent_id, ctx.unsettled)
    if not resp.prepared:
        answer_headers(resp, ctx)
    return resp


def _access(request: web.Request, ctx: RequestContext, status: int, resp: web.StreamResponse | None) -> None:
    facts = dict(ctx.facts)  # one C-level copy: a worker thread may still be adding facts (a client that went away)
    metrics = request.app.get(appkeys.METRICS)
    if metrics is not None:
        try:
            resource = request.match_info.route.resource
            added = (ctx.upstream_answered - ctx.started) * 1000 - ctx.upstream_wait_ms if ctx.upstream_answered is not None else None
            metrics.record(
                resource.canonical if resource is not None else "unmatched", ctx.route, ctx.wire, status, facts, ctx.upstream_latency_ms, added
            )
        except Exception:  # counting must never be why an answer fails
            request.app[appkeys.PIPELINE].failures["metrics"] += 1
            log.warning("metrics_failed", request_id=ctx.request_id, exc_info=True)
    log.info(
        "request_done",
        request_id=ctx.request_id,
        method=request.method,
        path=request.path,
        upstream=describe(ctx.route) if ctx.route else None,
        model=ctx.model,
        status=status,
        streamed=ctx.stream,
        upstream_ms=round(ctx.upstream_latency_ms, 2) if ctx.upstream_latency_ms is not None else None,
        total_ms=round((time.perf_counter() - ctx.started) * 1000, 2),
        bytes_in=request.content_length,
        bytes_out=resp.body_length if resp is not None and resp.prepared else None,
        mode=ctx.mode,
        **facts,
    )
