"""Reading a request's body: within ``limits.max_body_bytes``, a JSON object, parsed off the loop when large."""

from __future__ import annotations

import asyncio
import io
from typing import Any

from aiohttp import web

from proxy import appkeys, json_codec
from proxy.dialects.errors import ProxyError
from proxy.json_codec import OFF_LOOP_BYTES


async def read_json_body(request: web.Request) -> tuple[bytes, dict[str, Any]]:
    """The body as bytes and as a JSON object; 413 past the limit, 400 when it is not a JSON object."""
    raw = await read_body(request)
    try:
        body = (
            json_codec.loads(raw)
            if len(raw) <= OFF_LOOP_BYTES
            else await request.app[appkeys.MEASURER].offload.run(json_codec.loads, raw, bounded=False)
        )
    except (ValueError, UnicodeDecodeError) as exc:
        raise ProxyError(400, "invalid_json", f"the request body is not valid JSON: {exc}") from None
    except RecursionError:
        raise ProxyError(400, "invalid_json", "the request body nests JSON arrays or objects deeper than Ruyi parses (about 1,000 levels)") from None
    if not isinstance(body, dict):
        raise ProxyError(400, "invalid_body", "the request body must be a JSON object")
    return raw, body


async def read_body(request: web.Request) -> bytes:
    """The body's bytes, within ``limits.max_body_bytes`` (413) and ``limits.body_timeout_seconds`` (408), held
    once: a BytesIO's value is the very bytes it grew (no ``bytes(bytearray)`` copy beside them)."""
    limits = request.app[appkeys.CONFIG].limits
    limit, seconds = limits.max_body_bytes, limits.body_timeout_seconds
    if request.content_length is not None and request.content_length > limit:
        raise ProxyError(413, "body_too_large", f"the request body is {request.content_length} bytes; the limit is {limit} (limits.max_body_bytes)")
    buffer = io.BytesIO()
    try:
        async with asyncio.timeout(seconds):  # a client trickling its body holds no connection for ever
            async for chunk in request.content.iter_any():
                buffer.write(chunk)
                if buffer.tell() > limit:
                    raise ProxyError(413, "body_too_large", f"the request body is over the limit of {limit} bytes (limits.max_body_bytes)")
    except TimeoutError:
        raise ProxyError(408, "body_timeout", f"the request body did not arrive within {seconds:g} s (limits.body_timeout_seconds)") from None
    return buffer.getvalue()
