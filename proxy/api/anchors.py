"""The anchors API under ``/ruyi/v1/anchors``: create, list, read, patch, delete an agent's anchors, and ``anchors.md``."""

from __future__ import annotations

from typing import Any

from aiohttp import web

from memory.anchors.anchor import AnchorError
from proxy import appkeys
from proxy.api.admin import agent_of
from proxy.api.bodies import json_object, refused
from proxy.keep import answers


def _refused(exc: AnchorError) -> web.Response:
    extra = {"missing": list(exc.missing)} if exc.missing else {}
    return refused(409 if exc.code == "anchor_exists" else 400, exc.code, str(exc), **extra)


async def create(request: web.Request) -> web.Response:
    """201 with the new id; an active anchor missing required fields is refused with the list (nothing written)."""
    agent, keeper = agent_of(request), request.app[appkeys.KEEPER]
    body = await json_object(request)
    try:
        created = await keeper.run(answers.anchor_created, keeper, agent, body)
    except AnchorError as exc:
        return _refused(exc)
    return web.json_response(created, status=201)


async def list_anchors(request: web.Request) -> web.Response:
    agent, keeper = agent_of(request), request.app[appkeys.KEEPER]
    await keeper.settle()
    try:
        listed = await keeper.run(answers.anchors_listed, keeper, agent, request.query.get("status"), request.query.get("type"))
    except AnchorError as exc:
        return _refused(exc)
    return web.json_response(listed)


async def _one(request: web.Request, fn: Any, *args: Any) -> web.Response:
    agent, keeper, anchor_id = agent_of(request), request.app[appkeys.KEEPER], request.match_info["anchor_id"]
    await keeper.settle()
    try:
        found = await keeper.run(fn, agent, anchor_id, *args)
    except AnchorError as exc:
        return _refused(exc)
    if found is None or found is False:
        return refused(404, "anchor_not_found", f"this agent has no anchor {anchor_id} (GET /ruyi/v1/anchors lists them)")
    return web.json_response({"deleted": anchor_id} if found is True else answers.anchor_view(found))


async def get(request: web.Request) -> web.Response:
    return await _one(request, request.app[appkeys.KEEPER].anchors.get)


async def patch(request: web.Request) -> web.Response:
    """Change title, fields (merged) or status; promotion to active applies the write rule."""
    body = await json_object(request)
    return await _one(request, request.app[appkeys.KEEPER].anchors.update, body)


async def delete(request: web.Request) -> web.Response:
    return await _one(request, request.app[appkeys.KEEPER].anchors.delete)


async def anchors_md(request: web.Request) -> web.Response:
    """The ``anchors.md`` export: an index, then every anchor in full."""
    agent, keeper = agent_of(request), request.app[appkeys.KEEPER]
    await keeper.settle()
    return web.Response(text=await keeper.run(answers.anchors_md, keeper, agent), content_type="text/markdown")


def add_routes(app: web.Application) -> None:
    app.router.add_get("/ruyi/v1/anchors.md", anchors_md)
    app.router.add_post("/ruyi/v1/anchors", create)
    app.router.add_get("/ruyi/v1/anchors", list_anchors)
    app.router.add_get("/ruyi/v1/anchors/{anchor_id}", get)
    app.router.add_patch("/ruyi/v1/anchors/{anchor_id}", patch)
    app.router.add_delete("/ruyi/v1/anchors/{anchor_id}", delete)
