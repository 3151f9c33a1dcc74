"""Talking to upstreams: URL and header rules, one shared session, faults turned into clear errors."""

from __future__ import annotations

import functools
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any
from urllib.parse import urlsplit

import aiohttp
from multidict import CIMultiDict, CIMultiDictProxy
from yarl import URL

from config.schema import Route, UpstreamOptions
from proxy.context import RequestContext
from proxy.dialects.errors import ProxyError
from proxy.http.pool import ConnectionSlots

HOP_BY_HOP = frozenset(
    h.lower()
    for h in (
        "Connection",
        "Keep-Alive",
        "Proxy-Authenticate",
        "Proxy-Authorization",
        "TE",
        "Trailer",
        "Trailers",
        "Transfer-Encoding",
        "Upgrade",
        "Host",
        "Content-Length",
    )
)
NOT_RELAYED = HOP_BY_HOP | {"content-encoding"}
RUYI_REQUEST_ID = "X-Ruyi-Request-Id"
"""Ruyi's own id of a request (the client's X-Request-Id when it sent a usable one), in its log and answers."""
DECODED_ON_ARRIVAL = frozenset({"gzip", "deflate", "br", "zstd"})
"""Request encodings aiohttp's server decodes before Ruyi reads the body (aiohttp >= 3.13.3): Ruyi forwards
such a body decoded, so without the label; any other encoding is forwarded as sent, label and all."""


def make_session(options: UpstreamOptions) -> aiohttp.ClientSession:
    """The one pooled client session of the app (created and closed in a cleanup context)."""
    timeout = aiohttp.ClientTimeout(total=None, sock_connect=options.connect_timeout_seconds, sock_read=options.read_timeout_seconds)
    # the connection count is bounded by ConnectionSlots (a bounded wait, then 503), not by the connector (no bound on the wait)
    connector = aiohttp.TCPConnector(limit=0, limit_per_host=0, enable_cleanup_closed=True)
    return aiohttp.ClientSession(connector=connector, timeout=timeout, auto_decompress=True, trust_env=False)


def forward_headers(client: CIMultiDictProxy[str], route: Route) -> CIMultiDict[str]:
    """The client's headers minus hop-by-hop, Ruyi's own and an encoding already decoded (``anthropic-version`` and
    ``anthropic-beta`` unchanged); the route's key replaces the client's (``x-api-key`` for an Anthropic upstream)."""
    out: CIMultiDict[str] = CIMultiDict()
    for name, value in client.items():
        low = name.lower()
        if low in HOP_BY_HOP or low.startswith("x-ruyi-") or low == "accept-encoding":
            continue
        if low == "content-encoding" and value.isascii() and value.lower() in DECODED_ON_ARRIVAL:
            continue  # the body Ruyi holds is decoded already: forward it labelled as it is
        out.add(name, value)
    key = route.key
    if key and route.kind == "anthropic":
        out.popall("Authorization", None)
        out.popall("x-api-key", None)
        out["x-api-key"] = key
    elif key:
        out.popall("Authorization", None)
        out["Authorization"] = f"Bearer {key}"
    return out


def relay_headers(upstream: CIMultiDictProxy[str], extra: dict[str, str]) -> CIMultiDict[str]:
    """The upstream's response headers a client may see, plus Ruyi's. ``X-Request-Id`` is the upstream's (the
    id its support asks for); only when it sent none does it carry Ruyi's own, always in ``X-Ruyi-Request-Id``."""
    out: CIMultiDict[str] = CIMultiDict((k, v) for k, v in upstream.items() if k.lower() not in NOT_RELAYED)
    out.update(extra)
    if "X-Request-Id" not in out and RUYI_REQUEST_ID in extra:
        out["X-Request-Id"] = extra[RUYI_REQUEST_ID]
    return out


@functools.lru_cache(maxsize=1024)
def _url(url: str) -> URL:
    """The URL as ``upstream_url`` made it (encoded: no re-quoting, `%2F` in the query stays `%2F`); parsed once."""
    return URL(url, encoded=True)


def describe(route: Route) -> str:
    """The upstream as ``scheme://host:port``: never its path, query or any credentials in the URL."""
    return _describe_url(route.url)


@functools.lru_cache(maxsize=256)
def _describe_url(url: str) -> str:
    parts = urlsplit(url)
    port = f":{parts.port}" if parts.port else ""
    return f"{parts.scheme}://{parts.hostname}{port}"


@asynccontextmanager
async def send(
    session: aiohttp.ClientSession,
    ctx: RequestContext,
    method: str,
    url: str,
    headers: CIMultiDict[str],
    data: Any,
    slots: ConnectionSlots,
) -> AsyncIterator[aiohttp.ClientResponse]:
    """Open the upstream response in one of the pool's slots (503 when none comes free in time); connection
    faults become 502, timeouts 504. Closed, and its slot freed, on exit."""
    assert ctx.route is not None
    where = describe(ctx.route)
    async with slots.slot(ctx):
        started = time.perf_counter()
        try:
            resp = await session.request(method, _url(url), headers=headers, data=data, allow_redirects=False)
        except TimeoutError:
            raise ProxyError(504, "upstream_timeout", f"the upstream {where} did not answer in time") from None
        except aiohttp.ClientConnectorError as exc:
            raise ProxyError(502, "upstream_unreachable", f"cannot connect to the upstream {where} ({exc.os_error.strerror or exc})") from None
        except aiohttp.ClientError as exc:
            raise ProxyError(502, "upstream_failed", f"the upstream {where} failed: {type(exc).__name__}") from None
        ctx.upstream_answered = time.perf_counter()
        ctx.upstream_latency_ms = (ctx.upstream_answered - started) * 1000
        ctx.upstream_wait_ms += ctx.upstream_latency_ms
        try:
            yield resp
        finally:
            resp.close()  # a no-op once fully read; otherwise drops the connection instead of leaking it


async def read_all(resp: aiohttp.ClientResponse, ctx: RequestContext) -> bytes:
    """The whole upstream body, with the same fault mapping as ``send``."""
    assert ctx.route is not None
    try:
        return await resp.read()
    except TimeoutError:
        raise ProxyError(504, "upstream_timeout", f"the upstream {describe(ctx.route)} stopped sending") from None
    except aiohttp.ClientError as exc:
        raise ProxyError(502, "upstream_failed", f"the upstream {describe(ctx.route)} failed mid-answer: {type(exc).__name__}") from None
