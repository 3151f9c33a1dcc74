"""Liveness and readiness: ``/healthz`` (process alive) and ``/readyz`` (the default upstream answers)."""

from __future__ import annotations

import aiohttp
import structlog
from aiohttp import web

from config.schema import Config, Route
from proxy import appkeys
from proxy.http.auth import is_local
from proxy.http.upstream import describe
from proxy.routes import upstream_url

log = structlog.get_logger(__name__)
PROBE_SECONDS = 3.0


def probe_url(route: Route) -> str:
    return upstream_url(route, "/api/version" if route.kind == "ollama" else "/v1/models")


async def upstream_answers(session: aiohttp.ClientSession, route: Route) -> str | None:
    """``None`` when the upstream answers with anything below 500; otherwise why not."""
    headers = {"Authorization": f"Bearer {route.key}"} if route.key else {}
    try:
        async with session.get(probe_url(route), headers=headers, timeout=aiohttp.ClientTimeout(total=PROBE_SECONDS)) as resp:
            return None if resp.status < 500 else f"HTTP {resp.status}"
    except TimeoutError:
        return "no answer within 3 s"
    except aiohttp.ClientError as exc:
        return type(exc).__name__


async def root(request: web.Request) -> web.Response:
    """``GET /`` (and ``HEAD /``, which Claude Code sends at start): what this is and where to look."""
    return web.json_response({"name": "ruyi", "status": "ok", "dashboard": "/ruyi/ui", "mcp": "/mcp", "api": "/ruyi/v1"})


async def healthz(request: web.Request) -> web.Response:
    return web.json_response({"status": "ok"})


async def readyz(request: web.Request) -> web.Response:
    route = request.app[appkeys.CONFIG].default_route
    problem = await upstream_answers(request.app[appkeys.CLIENT], route)
    named = {"upstream": describe(route)} if is_local(request.remote, request.app[appkeys.CONFIG].auth) else {}
    if problem:  # where the upstream is, only to loopback and trusted networks (a probe from outside learns nothing)
        return web.json_response({"status": "unavailable", **named, "reason": problem}, status=503)
    return web.json_response({"status": "ready", **named})


async def warn_if_upstream_down(session: aiohttp.ClientSession, config: Config) -> None:
    """At start: one clear warning when the default upstream does not answer; Ruyi keeps serving."""
    route = config.default_route
    problem = await upstream_answers(session, route)
    if problem:
        log.warning(
            "upstream_unreachable",
            upstream=describe(route),
            reason=problem,
            hint="Ruyi keeps serving; set another upstream with --upstream URL or RUYI_UPSTREAM=URL",
        )
