"""``/mcp`` on Ruyi's port: the official MCP SDK's server behind an aiohttp handler.

The SDK's Streamable HTTP transport (stateless, JSON answers) gets each request from an aiohttp handler that hands it the request as ASGI. Guarded like the admin API: a client key decides the agent
(``X-Ruyi-Key`` or ``Authorization: Bearer``; ``X-Ruyi-Agent`` picks a sub-agent), the admin key reads the agent it
names, and with no keys only loopback and trusted networks are answered. Every call is logged, counted in /metrics and
written to the audit file (``audit.path``) when there is one."""

from __future__ import annotations

import asyncio
import importlib
import time
from collections import Counter
from typing import Any

import structlog
from aiohttp import web

from proxy import appkeys
from proxy.http.auth import admin_caller
from proxy.mcp import tools

log = structlog.get_logger(__name__)
SERVER_NAME = "ruyi"
"""So Claude Code shows the tools as ``mcp__ruyi__recall`` and the like."""
AGENT_STATE = "ruyi_agent"


def _server(app: web.Application) -> Any:
    """The SDK's low-level server with Ruyi's four tools; each call runs in a worker thread with the caller's agent."""
    from mcp import types
    from mcp.server.lowlevel import Server

    server: Any = Server(SERVER_NAME)

    @server.list_tools()
    async def list_tools() -> list[types.Tool]:
        return [types.Tool(name=name, description=spec["description"], inputSchema=spec["inputSchema"]) for name, spec in tools.TOOLS.items()]

    @server.call_tool(validate_input=False)
    async def call_tool(name: str, arguments: dict[str, Any]) -> list[types.TextContent]:
        request = server.request_context.request
        agent = request.scope["state"][AGENT_STATE]
        return [types.TextContent(type="text", text=await _call(app, agent, name, arguments or {}))]

    return server


async def _call(app: web.Application, agent: str, name: str, arguments: dict[str, Any]) -> str:
    fn = tools.CALLS.get(name)
    started, outcome = time.perf_counter(), "ok"
    try:
        if fn is None:
            raise tools.Refused(f"no tool {name!r}: {', '.join(tools.CALLS)}")
        longctx = app.get(appkeys.LONGCTX)
        parts = tools.Parts(app[appkeys.MEASURER].sessions, app[appkeys.KEEPER], longctx.recall if longctx is not None else None)
        await app[appkeys.KEEPER].settle()
        return await app[appkeys.MEASURER].offload.run(fn, parts, agent, arguments)
    except tools.Refused:
        outcome = "refused"
        raise  # the SDK answers it as a tool error (isError) with this message
    except Exception:
        outcome = "failed"
        log.warning("mcp_call_failed", tool=name, agent_id=agent, exc_info=True)
        raise tools.Refused(f"{name} failed inside Ruyi; see its log") from None
    finally:
        app[appkeys.MCP_CALLS][(name if fn is not None else "unknown", outcome)] += 1
        facts = {"tool": name, "outcome": outcome, "ms": round((time.perf_counter() - started) * 1000, 2), "arguments": sorted(arguments)}
        log.info("mcp_call", agent_id=agent, **facts)
        audit = app.get(appkeys.AUDIT_FILE)
        if audit is not None:
            audit.put(agent, "mcp", f"mcp-{time.time_ns()}", {"mcp": facts})


async def handle(request: web.Request) -> web.StreamResponse:
    """One Streamable HTTP exchange, passed to the SDK as ASGI: the caller's agent rides in the scope's state."""
    caller = admin_caller(request)
    if caller.agent_id is None:
        raise web.HTTPBadRequest(text="the admin key reads every agent: name one in X-Ruyi-Agent")
    body = await request.read()
    scope = {
        "type": "http",
        "asgi": {"version": "3.0"},
        "http_version": "1.1",
        "method": request.method,
        "scheme": "http",
        "path": "/mcp",
        "raw_path": b"/mcp",
        "root_path": "",
        "query_string": request.query_string.encode(),
        "headers": [(k.lower().encode("latin-1"), v.encode("latin-1")) for k, v in request.headers.items()],
        "client": (request.remote or "", 0),
        "server": ("127.0.0.1", 0),
        "state": {AGENT_STATE: caller.agent_id},
    }
    sent, finished = False, asyncio.Event()
    out: web.StreamResponse | None = None

    async def receive() -> dict[str, Any]:
        nonlocal sent
        if not sent:
            sent = True
            return {"type": "http.request", "body": body, "more_body": False}
        await finished.wait()  # the body was all; the next thing the transport could hear of is the end
        return {"type": "http.disconnect"}

    async def send(message: dict[str, Any]) -> None:
        nonlocal out
        if message["type"] == "http.response.start":
            out = web.StreamResponse(status=message["status"])
            for k, v in message.get("headers") or ():
                name = k.decode("latin-1")
                if name.lower() not in ("content-length", "transfer-encoding", "connection"):
                    out.headers.add(name, v.decode("latin-1"))
            await out.prepare(request)
        elif message["type"] == "http.response.body" and out is not None:
            if message.get("body"):
                await out.write(message["body"])
            if not message.get("more_body"):
                await out.write_eof()

    try:
        manager = await request.app[SDK].manager(request.app)
        await manager.handle_request(scope, receive, send)
    finally:
        finished.set()
    if out is None:
        raise web.HTTPInternalServerError(text="the MCP server gave no answer")
    return out


class LazySDK:
    """The SDK's session manager, made on the first ``/mcp`` request, not at start-up: importing the SDK (pydantic,
    starlette, httpx, jsonschema: about 17 MB) made a Ruyi that never serves ``/mcp`` start 17 MB larger and its
    memory rise about 2 MB a minute under traffic that never touched it (the soak; the mechanism was not found, the
    import alone did it: RELIABILITY.md, "Memory flat and disk per request"). The import runs in a worker thread
    (about a second, never on the event loop); the manager runs in a task of its own until the app's clean-up (its task
    group must begin and end in one task; aiohttp's start-up and clean-up are two)."""

    def __init__(self) -> None:
        self._manager: Any = None
        self._lock = asyncio.Lock()
        self._stop = asyncio.Event()
        self._task: asyncio.Task[None] | None = None

    async def manager(self, app: web.Application) -> Any:
        if self._manager is not None:
            return self._manager
        async with self._lock:
            if self._manager is None:
                await asyncio.to_thread(importlib.import_module, "mcp.server.streamable_http_manager")
                await asyncio.to_thread(importlib.import_module, "mcp.server.lowlevel")
                from mcp.server.streamable_http_manager import StreamableHTTPSessionManager

                manager = StreamableHTTPSessionManager(_server(app), json_response=True, stateless=True)
                ready = asyncio.Event()

                async def keep() -> None:
                    async with manager.run():
                        ready.set()
                        await self._stop.wait()

                self._task = task = asyncio.create_task(keep(), name="ruyi-mcp")
                waiting = asyncio.ensure_future(ready.wait())
                await asyncio.wait({waiting, task}, return_when=asyncio.FIRST_COMPLETED)
                if not ready.is_set():
                    waiting.cancel()
                    task.result()  # what made the manager fail to start
                self._manager = manager
        return self._manager

    async def close(self, _app: web.Application) -> None:
        self._stop.set()
        if self._task is not None:
            await self._task


SDK = web.AppKey("mcp_sdk", LazySDK)


def add_routes(app: web.Application) -> None:
    app[appkeys.MCP_CALLS] = Counter()
    app[SDK] = lazy = LazySDK()
    app.on_cleanup.append(lazy.close)
    for method in ("POST", "GET", "DELETE"):
        app.router.add_route(method, "/mcp", handle)
