"""The dashboard's data: the report per agent and its sessions, and a session's requests one by one.

Folded from the store's audit records: ``/ruyi/v1/overview``, ``/ruyi/v1/sessions/{id}/timeline`` (the agents are
``/ruyi/v1/agents``, proxy/api/agents.py)."""

from __future__ import annotations

import time
from collections.abc import Iterable, Iterator
from typing import Any

from aiohttp import web

from memory.store.base import AuditRecord
from proxy import appkeys
from proxy.api.bodies import refused
from proxy.http.auth import admin_caller
from proxy.observe.report import build

DEFAULT_DAYS = 14.0
"""How far back the overview reads when ``?days=`` is not given (the store's own expiry)."""
TIMELINE_FIELDS = (
    "request_id",
    "tier",
    "batch",
    "window",
    "usable",
    "est_before",
    "est_after",
    "upstream_prompt_tokens",
    "cached_tokens",
    "status",
    "compaction",
    "overflow_retry",
    "mode",
    "archive",
    "rag_chunks",
    "model",
)
"""What one point of a session's chart carries (the audit record's fields; the body of an archive stays out)."""


def scope_of(request: web.Request) -> str | None:
    """The agents the caller may see: None for every agent (the admin key; with no keys, a local caller), else one
    agent and its sub-agents (a client key's own)."""
    caller = admin_caller(request)
    if caller.admin or not request.app[appkeys.CONFIG].auth.key_agents:
        return None
    return (caller.agent_id or "").split("/", 1)[0]


def _mine(records: Iterable[AuditRecord], scope: str | None, agent: str | None) -> Iterator[AuditRecord]:
    for record in records:
        if scope is not None and record.agent_id != scope and not record.agent_id.startswith(scope + "/"):
            continue
        if agent is not None and record.agent_id != agent:
            continue
        yield record


def _since(request: web.Request) -> float | None:
    days = request.query.get("days", str(DEFAULT_DAYS))
    try:
        value = float(days)
    except ValueError:
        value = -1
    if not 0 < value <= 3650:
        raise ValueError(f"days is a number of days from 0 to 3650; got {days!r}")
    return time.time() - value * 86400


def _records(request: web.Request, since: float | None, scope: str | None, agent: str | None) -> list[AuditRecord]:
    """In a worker thread, under the registry's lock (the store's connection is the registry's)."""
    measurer = request.app[appkeys.MEASURER]
    if measurer.store is None:
        return []
    with measurer.sessions.lock:
        return list(_mine(measurer.store.audit_records(since), scope, agent))


def _audit(request: web.Request, agent: str, session_id: str) -> list[dict[str, Any]]:
    measurer = request.app[appkeys.MEASURER]
    with measurer.sessions.lock:
        return measurer.store.audit(agent, session_id)  # type: ignore[union-attr]


async def overview(request: web.Request) -> web.Response:
    """The health report (``ruyi report``'s JSON) for what the caller may see, ``?agent=`` one agent, ``?days=`` back,
    ``?price=`` US dollars per million prompt tokens; every session of the period listed, newest first."""
    scope = scope_of(request)
    measurer = request.app[appkeys.MEASURER]
    await measurer.drain()
    agent = request.query.get("agent") or None
    price = request.query.get("price")
    try:
        since = _since(request)
        per_mtok = float(price) if price else None
    except ValueError as exc:
        return refused(400, "invalid_query", str(exc))
    records = await measurer.offload.run(_records, request, since, scope, agent)
    ratio = request.app[appkeys.CONFIG].pruning.cache_read_ratio
    report = await measurer.offload.run(build, records, ratio, since, None, 10_000, per_mtok)
    report["sessions"] = sorted(report.pop("top_sessions"), key=lambda s: s["last_seen"] or "", reverse=True)
    return web.json_response(report)


async def timeline(request: web.Request) -> web.Response:
    """A session's requests in order, one point each: tokens the client sent and that Ruyi forwarded, the window and
    usable part, tier, prune batch, archive, what the upstream reported (cached tokens)."""
    agent = admin_caller(request).agent_id
    if agent is None:
        return refused(400, "agent_required", "the admin key reads every agent: name one in X-Ruyi-Agent")
    measurer = request.app[appkeys.MEASURER]
    await measurer.drain()
    store, session_id = measurer.store, request.match_info["session_id"]
    if store is None:
        return refused(404, "session_not_found", "this Ruyi keeps no store (store.backend: memory): nothing was recorded")
    rows = await measurer.offload.run(_audit, request, agent, session_id)
    if not rows:
        return refused(404, "session_not_found", "no such session for this agent")
    points = []
    for body in rows:
        point = {k: body.get(k) for k in TIMELINE_FIELDS}
        if isinstance(point["archive"], dict):  # what the chart marks; the summary is the archive API's
            point["archive"] = {k: point["archive"].get(k) for k in ("number", "reason", "tokens_before", "tokens_after", "turns")}
        points.append(point)
    session = await measurer.offload.run(measurer.sessions.get, agent, session_id)
    replaced = []
    for position, link in enumerate(session.links if session is not None else ()):  # in the order of the conversation
        for d in (session.decisions.get(link) or []) if session is not None else []:
            if isinstance(d, dict) and (d.get("ref_id") is not None or d.get("new_text")):
                replaced.append(
                    {
                        "message": position,
                        "strategy": d.get("strategy"),
                        "placeholder": d.get("new_text"),
                        "ref": d.get("ref_id"),
                        "tokens_saved": d.get("tokens_saved"),
                    }
                )
    return web.json_response({"agent_id": agent, "session_id": session_id, "points": points, "replaced": replaced})


def add_routes(app: web.Application) -> None:
    app.router.add_get("/ruyi/v1/overview", overview)
    app.router.add_get("/ruyi/v1/sessions/{session_id}/timeline", timeline)
