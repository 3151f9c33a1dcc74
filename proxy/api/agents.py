"""``GET /ruyi/v1/agents``: every agent with its session count and last activity (guarded like the admin API)."""

from __future__ import annotations

from aiohttp import web

from memory.agents import agents
from proxy import appkeys
from proxy.http.auth import admin_caller


async def list_agents(request: web.Request) -> web.Response:
    """The admin key, or (no keys set) a loopback or trusted caller, sees every agent; a client key sees its own
    agent and its sub-agents (``agent/…``) only."""
    caller = admin_caller(request)
    auth = request.app[appkeys.CONFIG].auth
    measurer = request.app[appkeys.MEASURER]
    await measurer.drain()
    rows = await measurer.offload.run(agents, measurer.sessions)
    keyed = bool(auth.key_agents) or auth.resolved_admin_key is not None
    if keyed and not caller.admin:
        own = caller.agent_id or ""
        rows = [r for r in rows if r["agent_id"] == own or r["agent_id"].startswith(own + "/")]
    return web.json_response({"agents": rows})


def add_routes(app: web.Application) -> None:
    app.router.add_get("/ruyi/v1/agents", list_agents)
