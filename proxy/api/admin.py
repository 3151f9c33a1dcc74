"""Ruyi's own API under ``/ruyi/v1``: an agent's sessions and what Ruyi measured for them."""

from __future__ import annotations

from typing import Any

from aiohttp import web

from memory.forms.report import markdown, summarize
from memory.session import Session
from memory.store.locks import held_longest
from proxy import appkeys
from proxy.dialects.errors import ProxyError
from proxy.http.auth import admin_caller


def session_view(s: Session) -> dict[str, Any]:
    return {
        "session_id": s.session_id,
        "agent_id": s.agent_id,
        "parent_id": s.parent_id,
        "requests": s.requests,
        "messages": len(s.links),
        "tokens": s.prompt_tokens,
        "upstream_prompt_tokens": s.upstream_prompt_tokens,
        "cached_tokens": s.cached_tokens,
        "tier": s.tier,
        "window": s.window,
        "num_ctx": s.num_ctx,
        "calibration": s.calibration,
        "created_at": s.created_at,
        "last_seen": s.last_seen,
    }


def agent_of(request: web.Request) -> str:
    """The agent the caller may read: a client key's own, the one the admin key names, or (no keys) the
    agent a local caller's headers name."""
    agent = admin_caller(request).agent_id
    if agent is None:
        raise ProxyError(400, "agent_required", "the admin key reads every agent: name one in X-Ruyi-Agent")
    return agent


async def list_sessions(request: web.Request) -> web.Response:
    """The calling agent's sessions, most recent first."""
    agent = agent_of(request)
    measurer = request.app[appkeys.MEASURER]
    sessions = await measurer.offload.run(measurer.sessions.list, agent)
    keeper = request.app.get(appkeys.KEEPER)
    views = await measurer.offload.run(lambda: [with_parent(session_view(s), keeper, agent) for s in sessions])
    return web.json_response({"agent_id": agent, "sessions": views})


def with_parent(view: dict[str, Any], keeper: Any, agent: str) -> dict[str, Any]:
    """A session's view with its parent when it is a recognised sub-agent (its snapshot names the parent; a branched
    session's parent is on its record already). Reads the store: off the event loop."""
    if view["parent_id"] is None and keeper is not None:
        kept = keeper.sessions.snapshot(agent, view["session_id"])
        if kept is not None:
            view["parent_id"] = kept[0]
    return view


async def get_session(request: web.Request) -> web.Response:
    agent = agent_of(request)
    measurer = request.app[appkeys.MEASURER]
    session = await measurer.offload.run(measurer.sessions.get, agent, request.match_info["session_id"])
    if session is None:
        raise ProxyError(404, "session_not_found", "no such session for this agent")
    view = await measurer.offload.run(with_parent, session_view(session), request.app.get(appkeys.KEEPER), agent)
    return web.json_response(view)


async def session_report(request: web.Request) -> web.Response:
    """The session's DCP reports (JSON), or the seed's markdown report with ``?format=markdown``."""
    agent, session_id = agent_of(request), request.match_info["session_id"]
    measurer = request.app[appkeys.MEASURER]
    await measurer.drain()
    reports = await measurer.offload.run(measurer.sessions.reports, agent, session_id)
    if reports is None:
        raise ProxyError(404, "session_not_found", "no such session for this agent")
    if request.query.get("format") == "markdown":
        return web.Response(text=markdown(session_id, reports), content_type="text/markdown")
    return web.json_response({"session_id": session_id, "summary": summarize(reports), "reports": reports})


async def get_ref(request: web.Request) -> web.Response:
    """The original text kept under a placeholder's ref id (only the agent that made it can read it)."""
    agent = agent_of(request)
    ref_id = request.match_info["ref_id"]
    measurer = request.app[appkeys.MEASURER]
    original = await measurer.offload.run(measurer.sessions.find_ref, agent, ref_id)
    if original is None:
        raise ProxyError(404, "ref_not_found", "no such ref for this agent")
    return web.json_response({"ref_id": ref_id, "original": original})


async def forget_session(request: web.Request) -> web.Response:
    """Remove everything stored for one of the agent's sessions; say what was removed (404 if it has none)."""
    agent, session_id = agent_of(request), request.match_info["session_id"]
    measurer = request.app[appkeys.MEASURER]
    await measurer.drain()  # queued reports and audit records first, so none lands after the removal
    longctx = request.app.get(appkeys.LONGCTX)
    if longctx is not None:  # and raw turns, chunks and archives (the store removes their rows with the session's)
        await longctx.drain_writes()
        await measurer.offload.run(longctx.forget, agent, session_id)
    # in a worker thread: the store's delete (and its checkpoint) never holds the event loop
    removed = await measurer.offload.run(measurer.sessions.forget, agent, session_id)
    if not any(removed.values()):
        raise ProxyError(404, "session_not_found", "no such session for this agent")
    return web.json_response({"agent_id": agent, "session_id": session_id, "removed": removed})


async def stats(request: web.Request) -> web.Response:
    """What failed open since start-up (per step: a rewrite not sent because its body could not be built,
    ``dialect``, or its decisions could not be written, ``store_write``; a layout section whose source failed,
    ``layout_memory``, ``layout_rules``, ``layout_cards``…), the durable writes before forwarding
    (failed, waiting, dropped while the store kept failing) the background writer's counts, the upstream pool's use, and
    where requests were rewritten (on the loop: small ones of sessions in memory; else in a worker thread), and what the
    agent's memory did with its summarizer (notebook compactions; forms refined or kept; proposals by the LLM or
    extractive)."""
    admin_caller(request)
    measurer = request.app[appkeys.MEASURER]
    writer = measurer.writer
    queue = None
    if writer is not None:  # dropped (queue full) and failed by reason, this queue's and long-context recall's
        recall = getattr(request.app.get(appkeys.LONGCTX), "writer", None)
        counted = [w for w in (writer, recall) if w is not None]
        by_reason = {"queue_full": sum(w.dropped for w in counted)}
        for w in counted:
            for reason, n in w.failed_by_reason.items():
                by_reason[reason] = by_reason.get(reason, 0) + n
        queue = {
            "written": writer.written,
            "dropped": writer.dropped,
            "failed": writer.failed,
            "dropped_by_reason": by_reason,
            "pending": sum(w.pending for w in counted),
            "retried": sum(w.retried for w in counted),
        }
    # counters read without the registry's lock: on the loop, never waiting for a store write (or a stuck disk)
    writes = measurer.sessions.registry.unsaved_stats() if measurer.store is not None else None  # type: ignore[attr-defined]
    slots = request.app[appkeys.SLOTS]
    pool = {"max_connections": slots.limit, "in_use": slots.in_use, "refused": slots.refused}
    pipeline = request.app[appkeys.PIPELINE]
    failed = dict(pipeline.failures)
    for step in pipeline.each_step():  # a section left out because its source failed (the layout's notebook, rules, cards…)
        failed.update({f"layout_{what}": n for what, n in getattr(getattr(step, "sources", None), "failures", {}).items()})
    keeper = request.app[appkeys.KEEPER]
    kept = {
        "compactions": dict(keeper.compactions),
        "summarizer": dict(keeper.refiner.counts),
        "remember_failed": keeper.remember_failed,
        "read_again": keeper.held.refreshed,  # held reads of agents' memory made again in the background
        "archives_unsettled": keeper.pending.overdue,  # archives that stopped waiting for the keeper's earlier work
        "forgotten_idle": dict(measurer.forgotten),  # cached counts and classifications, sessions: let go after sessions.idle_s
    }
    stall = getattr(measurer.store, "stall", None)
    offload = measurer.offload
    unsettled = request.app[appkeys.UNSETTLED]  # requests that waited for their agent's answer sent before its work
    longctx = request.app.get(appkeys.LONGCTX)
    # work after answers not finished yet: what a restart right now would not find (a test waits for none)
    in_flight = {
        "store_writer": int(writer is not None and not writer.idle),
        "keeper_tasks": len(keeper.tasks),
        "longctx_tasks": len(getattr(longctx, "_tasks", ())),
        "recall_writer": int(getattr(longctx, "writer", None) is not None and not longctx.writer.idle),  # type: ignore[union-attr]
    }
    store: Any = measurer.store
    size = {"max_bytes": store.max_bytes, "bytes": store.bytes, "removed": dict(store.shrunk)} if getattr(store, "max_bytes", 0) else None
    return web.json_response(
        {
            "failed_open": failed,
            "refused": dict(pipeline.refused),
            "store_writes": writes,
            "store_queue": queue,
            "store_deadline": stall.stats() if stall is not None else None,
            "store_stuck": {"stuck": offload.stuck(), "held_s": round(held_longest(), 2), "waits_given_up": offload.stalled},
            "in_flight": in_flight,
            "store_size": size,
            "upstream_pool": pool,
            "rewrites": dict(offload.where),
            "rewrites_in_thread": dict(offload.why),  # why not on the loop
            "large_waited": offload.large_waited,  # large bodies that waited for their turn (a few rewritten at once)
            "settling": {"waited": unsettled.waited, "overdue": unsettled.overdue},
            "memory": kept,
        }
    )


def add_routes(app: web.Application) -> None:
    app.router.add_get("/ruyi/v1/stats", stats)
    app.router.add_get("/ruyi/v1/sessions", list_sessions)
    app.router.add_get("/ruyi/v1/sessions/{session_id}", get_session)
    app.router.add_delete("/ruyi/v1/sessions/{session_id}", forget_session)
    app.router.add_get("/ruyi/v1/sessions/{session_id}/report", session_report)
    app.router.add_get("/ruyi/v1/refs/{ref_id}", get_ref)
