"""What a listening Ruyi exposes: the start-up warnings, and the HTTP parser's limits on request heads."""

from __future__ import annotations

import ipaddress
from typing import Any

from aiohttp import web

from config.schema import Config
from proxy.dialects.errors import ProxyError
from proxy.http.upstream import describe

HEAD_CEILING_FACTOR = 4
"""aiohttp's parser stops one request line or header at this many times limits.max_header_bytes, with its
own plain-text 400: heads between the two get Ruyi's 431 in the client's format."""


def is_loopback_host(host: str) -> bool:
    """Whether listening on host reaches loopback callers only."""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False  # a name, or every interface ("", "0.0.0.0", "::")


def exposure_warnings(config: Config) -> list[str]:
    """What start-up warns about: serving beyond loopback with no keys (unless auth.trusted_networks says
    that is intended), and configured keys that admit nobody (an env: variable that is not set)."""
    auth, out = config.auth, []
    unset = len(auth.keys) - len(auth.key_agents)
    if unset:
        out.append(
            f"{unset} of the {len(auth.keys)} keys in auth.keys name an environment variable that is not set: "
            "they admit nobody" + ("" if auth.key_agents else ", and with none left Ruyi runs without client keys")
        )
    if not auth.key_agents and not auth.trusted_networks and not is_loopback_host(config.server.host):
        upstreams = sorted({describe(r) for r in (config.default_route, *config.routes)})
        keyed = [r.model for r in config.routes if r.key] + (["default_route"] if config.default_route.key else [])
        carried = f", with the api_key of {', '.join(keyed)}" if keyed else ""
        out.append(
            f"serving on {config.server.host}:{config.server.port} with no auth.keys: anyone who can reach this port "
            f"sends requests through Ruyi to {', '.join(upstreams)}{carried}. The admin API (sessions, reports, refs: "
            "original tool outputs) and Ollama's model management (pull, push, create, copy, delete) answer only "
            "loopback callers. Set auth.keys, or list the networks you trust in auth.trusted_networks to say this "
            "exposure is intended."
        )
    return out


def server_options(config: Config) -> dict[str, Any]:
    """Keyword arguments for aiohttp's server (run_app, AppRunner, TestServer): the parser's ceilings."""
    ceiling = HEAD_CEILING_FACTOR * config.limits.max_header_bytes
    # The parser's header count bound well above what max_header_bytes admits (a header line takes at least 4
    # bytes), so a request with many headers gets Ruyi's 431 in its own format, not the parser's plain-text 400.
    # keepalive_timeout: aiohttp closes a connection that has not sent a whole request head by then.
    return {
        "max_line_size": ceiling,
        "max_field_size": ceiling,
        "max_headers": config.limits.max_header_bytes // 4,
        "keepalive_timeout": config.limits.header_timeout_seconds,
    }


def check_head_size(request: web.Request, limit: int) -> None:
    """431 in the client's format when the request line and headers together pass limits.max_header_bytes."""
    size = len(request.method) + len(request.raw_path) + 12 + sum(len(k) + len(v) + 4 for k, v in request.raw_headers)
    if size > limit:
        raise ProxyError(431, "headers_too_large", f"the request line and headers are {size} bytes; the limit is {limit} (limits.max_header_bytes)")
