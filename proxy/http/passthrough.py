"""Every other ``/v1/`` and ``/api/`` path: forwarded verbatim (method, query, headers, body), never rewritten."""

from __future__ import annotations

import asyncio
import json
from typing import Any

from aiohttp import web

from proxy import appkeys
from proxy.context import CTX_KEY, RequestContext
from proxy.dialects.errors import ProxyError
from proxy.http.auth import check_model_management, check_route, identify
from proxy.http.relay import is_streamed, relay_raw
from proxy.http.upstream import forward_headers, send
from proxy.routes import normalized_path, upstream_url

SMALL_BODY = 1024 * 1024


def _model_of(raw: bytes) -> str | None:
    try:
        body = json.loads(raw)
    except (ValueError, UnicodeDecodeError):
        return None
    if isinstance(body, dict):
        model = body.get("model") or body.get("name")
        return model if isinstance(model, str) else None
    return None


async def passthrough(request: web.Request) -> web.StreamResponse:
    app = request.app
    ctx: RequestContext = request[CTX_KEY]
    caller = identify(request)  # before the body is read
    ctx.agent_id = caller.agent_id or ctx.agent_id
    path = normalized_path(request.rel_url.raw_path)  # 400 for a path that would leave the route's base
    check_model_management(request, path)
    data: Any = None
    if request.body_exists:
        length = request.content_length
        if request.content_type == "application/json" and length is not None and length <= SMALL_BODY:
            seconds = app[appkeys.CONFIG].limits.body_timeout_seconds
            try:
                async with asyncio.timeout(seconds):
                    data = await request.read()
            except TimeoutError:
                raise ProxyError(408, "body_timeout", f"the request body did not arrive within {seconds:g} s (limits.body_timeout_seconds)") from None
            ctx.model = _model_of(data)
        else:
            data = request.content  # large or unknown-size bodies (blobs) stream straight through
    ctx.route = app[appkeys.CONFIG].route_for(ctx.model)
    check_route(caller, ctx.route)
    url = upstream_url(ctx.route, path, request.rel_url.raw_query_string)
    headers = forward_headers(request.headers, ctx.route)
    async with send(app[appkeys.CLIENT], ctx, request.method, url, headers, data, app[appkeys.SLOTS]) as resp:
        ctx.stream = is_streamed(resp) or resp.content_length is None
        return await relay_raw(request, resp, ctx)  # as it arrives, whatever its size: pulls are gigabytes
