"""A session's archives under ``/ruyi/v1/sessions/<id>``: read and search them; archive, prune or reset on the next request."""

from __future__ import annotations

from typing import Any

from aiohttp import web

from memory.session import Session
from proxy import appkeys
from proxy.api.admin import agent_of
from proxy.dialects.errors import ProxyError
from proxy.longctx.restart import ARCHIVES, REQUESTED, archives_of, requested

NEXT = {"archive": "archive", "prune": "prune", "reset": "pass"}
"""What each POST asks of the session's next request."""
SEARCH_LIMIT = 10


async def _session(request: web.Request) -> tuple[str, Session]:
    agent = agent_of(request)
    measurer = request.app[appkeys.MEASURER]
    session = await measurer.offload.run(measurer.sessions.get, agent, request.match_info["session_id"])
    if session is None:
        raise ProxyError(404, "session_not_found", "no such session for this agent")
    return agent, session


async def get_archive(request: web.Request) -> web.Response:
    """The session's archives (record, S1, forms) and S2 chunks; ``?q=words`` searches chunks, then raw turns;
    ``?chunk=<id>`` one chunk; ``?number=<n>&form=expanded`` the raw turns an archive covers."""
    agent, session = await _session(request)
    longctx = request.app[appkeys.LONGCTX]
    await longctx.drain_writes()
    recall, q = longctx.recall, request.query
    if recall is None:
        raise ProxyError(404, "no_recall", "this Ruyi keeps no archives")
    return web.json_response(await request.app[appkeys.MEASURER].offload.run(_read, recall, agent, session, q))


def _read(recall: Any, agent: str, session: Session, q: Any) -> dict[str, Any]:
    """In a worker thread: what GET …/archive asked for."""
    sid = session.session_id
    if "q" in q:
        limit = _int(q.get("limit"), SEARCH_LIMIT)
        hits = recall.search(agent, sid, q["q"], limit, kinds=("chunk",)) or recall.search(agent, sid, q["q"], limit, kinds=("turn",))
        return {"session_id": sid, "q": q["q"], "hits": [{"kind": h.kind, "matched": h.matched, **h.row} for h in hits]}
    if "chunk" in q:
        found = [c for c in recall.chunks(agent, sid) if c["chunk_id"] == q["chunk"].removeprefix("ruyi:")]
        if not found:
            raise ProxyError(404, "chunk_not_found", "no such chunk in this session")
        return {"session_id": sid, **found[0]}
    archives = recall.archives(agent, sid)
    if "number" in q:
        number = _int(q.get("number"), 0)
        chosen = [a for a in archives if a.get("number") == number]
        if not chosen:
            raise ProxyError(404, "archive_not_found", "no such archive in this session")
        archive = chosen[-1]
        if q.get("form") == "expanded":
            return {"session_id": sid, "number": number, "turns": recall.turns(agent, sid, archive["head"], archive["end"])}
        return {"session_id": sid, **archive}
    in_force = [{k: a.get(k) for k in ("number", "head", "end", "reason", "tokens_before", "tokens_after")} for a in archives_of(session.decisions)]
    return {"session_id": sid, "archives": archives, "in_force": in_force, "chunks": recall.chunks(agent, sid)}


async def act(request: web.Request) -> web.Response:
    """POST …/archive (archive now), …/prune (a batch now), …/reset (forget decisions and archives: the next
    request goes as sent): done by the session's next request."""
    action = request.match_info["action"]
    agent, session = await _session(request)
    measurer = request.app[appkeys.MEASURER]

    def decisions(current: Session) -> dict[str, Any]:
        made: dict[str, Any] = {REQUESTED: requested(NEXT[action])}
        if action == "reset":  # a value that is not a list replaces a message's decisions whole: an empty mapping leaves none
            made.update({link: {} for link in current.decisions if link not in (REQUESTED, ARCHIVES)}, **{ARCHIVES: {}})
        return made

    written = await measurer.offload.run(measurer.decide_in_turn, agent, session.session_id, decisions, action == "reset")
    if action == "reset":
        request.app[appkeys.LONGCTX].forget(agent, session.session_id)
    if not written:
        raise ProxyError(503, "store_unavailable", "the store could not be written; try again")
    return web.json_response({"session_id": session.session_id, "action": action, "next_request": NEXT[action]})


def _int(value: str | None, default: int) -> int:
    try:
        return int(value) if value is not None else default
    except ValueError:
        raise ProxyError(400, "invalid_query", f"expected an integer, got {value!r}") from None


def add_routes(app: web.Application) -> None:
    app.router.add_get("/ruyi/v1/sessions/{session_id}/archive", get_archive)
    app.router.add_post("/ruyi/v1/sessions/{session_id}/{action:archive|prune|reset}", act)
