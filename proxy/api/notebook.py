"""The notebook API under ``/ruyi/v1/notebook``: read, add, replace a section, compact, versions and rollback, proposals; the agent's, or a sub-agent's own."""

from __future__ import annotations

from aiohttp import web

from memory.notebook.render import markdown
from memory.notebook.sections import NotebookError
from proxy import appkeys
from proxy.api.admin import agent_of
from proxy.api.bodies import json_object, refused
from proxy.dialects.errors import ProxyError
from proxy.keep.answers import compaction, notebook_versions
from proxy.keep.answers import notebook_view as view
from proxy.keep.keeper import Keeper

SESSION_PARAM = "session"
CHILD_HELP = "(?session=ID or X-Ruyi-Session: ID, the X-Ruyi-Session header of its answers)"


async def scope(request: web.Request) -> tuple[str, Keeper, str | None]:
    """The agent, its keeper, and the sub-agent session whose own notebook the request addresses (None: the agent's).

    A request naming no session addresses the agent's notebook. One naming a session (``?session=ID`` or
    ``X-Ruyi-Session: ID``) that Ruyi recognised as a sub-agent, or sending ``X-Ruyi-Parent``, addresses that child's
    own notebook (seed 003: a child's writes are its own and temporary; they reach its parent only through its result);
    a session that is no sub-agent addresses its agent's. ``X-Ruyi-Parent`` without a session is refused: the writes
    would otherwise land in the agent's notebook."""
    agent, keeper = agent_of(request), request.app[appkeys.KEEPER]
    named = [v.strip() for v in (request.query.get(SESSION_PARAM), request.headers.get("X-Ruyi-Session")) if v is not None]
    parent = (request.headers.get("X-Ruyi-Parent") or "").strip() or None
    if any(not v for v in named) or len(set(named)) > 1:
        raise ProxyError(400, "invalid_session", f"name one session, the same in ?session= and X-Ruyi-Session; got {named}")
    if not named:
        if parent is not None:
            raise ProxyError(400, "session_required", f"a sub-agent's notebook is its own: name its session {CHILD_HELP} beside X-Ruyi-Parent")
        return agent, keeper, None
    session_id = named[0]
    measurer = request.app[appkeys.MEASURER]
    if await measurer.offload.run(measurer.sessions.get, agent, session_id) is None:
        raise ProxyError(404, "session_not_found", f"this agent has no session {session_id!r} (GET /ruyi/v1/sessions lists them)")
    kept = await keeper.run(keeper.sessions.snapshot, agent, session_id)
    if parent is not None:
        if kept is not None and kept[0] != parent:
            raise ProxyError(409, "parent_mismatch", f"session {session_id!r} is a sub-agent of {kept[0]!r}, not of {parent!r}")
        if parent == session_id or await measurer.offload.run(measurer.sessions.get, agent, parent) is None:
            raise ProxyError(404, "parent_not_found", f"X-Ruyi-Parent names no other session of this agent: {parent!r}")
    return agent, keeper, session_id if kept is not None or parent is not None else None


def _refused(exc: NotebookError) -> web.Response:
    return refused(exc.status, exc.code, str(exc))


async def get(request: web.Request) -> web.Response:
    """The notebook as JSON, or its markdown with ``?format=markdown``."""
    agent, keeper, child = await scope(request)
    await keeper.settle()
    nb = await keeper.run(keeper.notebook.current, agent, child)
    if request.query.get("format") == "markdown":
        return web.Response(text=markdown(nb.body, nb.pending, nb.version), content_type="text/markdown")
    return web.json_response(view(nb))


async def add(request: web.Request) -> web.Response:
    """``{"text": …}`` appended to a section (a name or any alias); the reply says if it was joined or cut."""
    agent, keeper, child = await scope(request)
    body = await json_object(request)
    try:
        nb, notes = await keeper.run(keeper.notebook.add, agent, request.match_info["section"], body.get("text"), "person", child)
    except NotebookError as exc:
        return _refused(exc)
    return web.json_response(view(nb, notes), status=201)


async def put(request: web.Request) -> web.Response:
    """``{"entries": [...]}`` replaces the section."""
    agent, keeper, child = await scope(request)
    body = await json_object(request)
    try:
        nb, notes = await keeper.run(keeper.notebook.put, agent, request.match_info["section"], body.get("entries"), child)
    except NotebookError as exc:
        return _refused(exc)
    return web.json_response(view(nb, notes))


async def compact(request: web.Request) -> web.Response:
    """Compact now, whether pending or not (the summarizer when configured, else the fallback)."""
    agent, keeper, child = await scope(request)
    await keeper.settle()
    after, how = await keeper.compact(agent, child)
    current = await keeper.run(keeper.notebook.current, agent, child) if after is None else None
    status, body = compaction(after, how, current)
    return web.json_response(body, status=status)


async def versions(request: web.Request) -> web.Response:
    agent, keeper, child = await scope(request)
    return web.json_response(await keeper.run(notebook_versions, keeper, agent, child))


async def rollback(request: web.Request) -> web.Response:
    """A new version equal to an older one."""
    agent, keeper, child = await scope(request)
    raw = request.match_info["version"]
    if not raw.isdigit():
        return refused(400, "invalid_version", f"a version is a number (GET /ruyi/v1/notebook/versions lists them); got {raw!r}")
    nb = await keeper.run(keeper.notebook.rollback, agent, int(raw), child)
    if nb is None:
        whose = "this agent's notebook" if child is None else f"session {child}'s own notebook"
        return refused(404, "version_not_found", f"{whose} has no version {raw} (GET /ruyi/v1/notebook/versions lists them)")
    return web.json_response(view(nb))


async def judge(request: web.Request) -> web.Response:
    """Accept a proposed entry (it becomes a person's) or reject it (it goes and is never proposed again)."""
    agent, keeper, child = await scope(request)
    info = request.match_info
    if not info["index"].isdigit():
        return refused(400, "invalid_index", "an entry is named by its place in the section, from 0")
    try:
        nb = await keeper.run(keeper.notebook.judge, agent, info["section"], int(info["index"]), info["verdict"] == "accept", child)
    except NotebookError as exc:
        return _refused(exc)
    if nb is None:
        return refused(404, "proposal_not_found", "no proposed entry there (GET /ruyi/v1/notebook shows entries and who wrote them)")
    return web.json_response(view(nb))


def add_routes(app: web.Application) -> None:
    app.router.add_get("/ruyi/v1/notebook", get)
    app.router.add_get("/ruyi/v1/notebook/versions", versions)
    app.router.add_post("/ruyi/v1/notebook/compact", compact)
    app.router.add_post("/ruyi/v1/notebook/rollback/{version}", rollback)
    app.router.add_post("/ruyi/v1/notebook/{section}/{index}/{verdict:accept|reject}", judge)
    app.router.add_post("/ruyi/v1/notebook/{section}", add)
    app.router.add_put("/ruyi/v1/notebook/{section}", put)
