"""Where a request is measured and rewritten: on the event loop when that is cheap and needs no store I/O, else in a worker thread, in its session's turn."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from typing import Any, Literal

import structlog
from aiohttp import web

from memory.chain_index import NeedsStore
from memory.session import How
from proxy import appkeys
from proxy.context import RequestContext
from proxy.dialects.base import Dialect
from proxy.know.window import Window
from proxy.longctx.request import RequestMemory
from proxy.longctx.restart import ARCHIVES
from proxy.offload import StoreStalled
from proxy.rewrite.archiving import requested_action
from proxy.rewrite.build import Built, build
from proxy.rewrite.fit import refusal
from proxy.rewrite.record import record

log = structlog.get_logger(__name__)


RECALL_TOOLS = ("mcp__ruyi__recall", "recall")
"""Ruyi's MCP recall tool as Claude Code names it (``mcp__<server>__<tool>``), or bare (other agents)."""


def recall_tool_of(body: dict[str, Any]) -> str | None:
    """The name the request offers Ruyi's recall tool under (OpenAI's ``function.name``, Anthropic's and the Responses
    API's ``name``), if any."""
    names = set()
    for tool in body.get("tools") or ():
        if isinstance(tool, dict):
            fn = tool.get("function")
            names.add(fn.get("name") if isinstance(fn, dict) else tool.get("name"))
    return next((n for n in RECALL_TOOLS if n in names), None)


async def prepare(request: web.Request, dialect: Dialect, raw: bytes, body: dict[str, Any], ctx: RequestContext) -> bytes:
    """The bytes to forward: the client's own unless the mode is ``on`` and something changed. The window is
    known on the loop; measuring and rewriting run in a worker thread (``_prepare``), or on the loop for a small
    request that needs no store I/O (``_plan_on_loop``, whose ``Plan`` says where the rest runs)."""
    if ctx.mode == "off":
        return raw
    app = request.app
    measurer = app[appkeys.MEASURER]
    ctx.recall_tool = recall_tool_of(body)
    ollama = ctx.route is not None and ctx.route.kind == "ollama"
    try:
        window = await measurer.window(dialect.name, ctx.model or "", body, ollama, request.headers)
    except Exception:  # fail open: an unmeasured request still goes through
        app[appkeys.PIPELINE].failures["measure"] += 1
        log.warning("measure_failed", request_id=ctx.request_id, exc_info=True)
        return raw
    plan = _plan_on_loop(app, dialect, raw, body, ctx, request.headers, ollama, window)
    measurer.offload.where["on_loop" if plan.how == "done" else "in_thread"] += 1
    try:
        if plan.how == "done":
            assert plan.forwarded is not None
            forwarded = plan.forwarded
        elif plan.how == "rest_in_turn":  # its turn is taken: the rest runs even if the client goes away meanwhile
            rest = asyncio.ensure_future(measurer.offload.run(_rewrite_in_turn, app, dialect, raw, body, plan.messages, ctx, plan.built))
            turn = ctx.measurement.turn if ctx.measurement is not None else None
            rest.add_done_callback(lambda f: f.cancelled() and turn is not None and turn.end())  # shut down before it ran
            forwarded = await asyncio.shield(rest)
        else:
            async with measurer.offload.large(len(raw)):
                forwarded = await measurer.offload.run(_prepare, app, dialect, raw, body, ctx, request.headers, ollama, window)
    except StoreStalled:  # fail open: the store is stuck (a frozen disk); the rewrite finishes in its thread, unsent
        app[appkeys.PIPELINE].failures["store_stalled"] += 1
        ctx.facts["store_stalled"] = True
        ctx.mode = "off"  # what the thread still does is not this request's: nothing of it is recorded after the answer
        return raw
    if ctx.measurement is not None:
        measurer.forwarding(ctx.measurement, rewritten=forwarded is not raw)
    longctx = app.get(appkeys.LONGCTX)
    if longctx is not None and ctx.longctx is not None and ctx.mode == "on":  # keep what an archive made, prepare ahead
        longctx.after_rewrite(ctx.longctx, ctx.measurement, sent=forwarded is not raw)
    unfit = ctx.rewritten.unfit if ctx.rewritten is not None else None
    if (error := refusal(ctx, unfit)) is not None:  # nothing could make it fit: said, never sent over the window
        app[appkeys.PIPELINE].refused["unfit"] += 1
        ctx.facts["unfit"] = unfit
        raise error
    return forwarded


def _prepare(
    app: web.Application, dialect: Dialect, raw: bytes, body: dict[str, Any], ctx: RequestContext, headers: Any, ollama: bool, window: Window
) -> bytes:
    """In a worker thread: measure, then, in the session's turn, rewrite and record."""
    messages = dialect.to_canonical(body)
    try:
        measured = _measure(app, dialect, body, messages, ctx, headers, ollama, window, stored=True)
    except BaseException:
        if ctx.measurement is not None and ctx.measurement.turn is not None:
            ctx.measurement.turn.end()  # the session's next request (and, with replicas, its lock) must not wait for this one
        raise
    if not measured:
        return raw
    return _rewrite_in_turn(app, dialect, raw, body, messages, ctx)


def _measure(
    app: web.Application,
    dialect: Dialect,
    body: dict[str, Any],
    messages: list[dict[str, Any]] | None,
    ctx: RequestContext,
    headers: Any,
    ollama: bool,
    window: Window,
    *,
    stored: bool,
) -> bool:
    """``ctx.measurement`` (its session resolved, its turn taken); False when measuring failed (fail open)."""
    try:
        ctx.measurement = app[appkeys.MEASURER].measure(
            dialect.name, ctx.model or "", body, messages, headers, ollama, window, agent_id=ctx.agent_id, stored=stored
        )
    except NeedsStore:
        raise
    except Exception:  # fail open: an unmeasured request still goes through
        app[appkeys.PIPELINE].failures["measure"] += 1
        log.warning("measure_failed", request_id=ctx.request_id, exc_info=True)
        return False
    longctx = app.get(appkeys.LONGCTX)
    if longctx is not None and messages is not None:
        ctx.longctx = RequestMemory(longctx, messages, scope=headers.get("X-Ruyi-Recall"), target=_summary_target(longctx, ctx, headers))
    return True


def _summary_target(longctx: Any, ctx: RequestContext, headers: Any) -> Any:
    """Where an LLM summarizer sends this session's summaries (``same``: its own model and route, its client's key)."""
    if longctx.summarizer is None or ctx.route is None:
        return None
    auth = headers.get("Authorization") or ""
    key = ctx.route.key or (auth[7:].strip() if auth[:7].lower() == "bearer " else None)
    return longctx.summarizer.target(ctx.model, ctx.route.url, ctx.route.kind, key)


def _rewrite_in_turn(
    app: web.Application,
    dialect: Dialect,
    raw: bytes,
    body: dict[str, Any],
    messages: list[dict[str, Any]] | None,
    ctx: RequestContext,
    built: Built | None = None,
) -> bytes:
    """In a worker thread, in the session's turn (waited for): rewrite (unless ``built`` already) and record."""
    assert ctx.measurement is not None and ctx.measurement.turn is not None
    with ctx.measurement.turn:
        try:
            return record(app, ctx, built if built is not None else build(app, dialect, raw, body, messages, ctx))
        except Exception:  # fail open: the client's own bytes go through
            app[appkeys.PIPELINE].failures["rewrite"] += 1
            log.warning("rewrite_failed", request_id=ctx.request_id, exc_info=True)
            ctx.longctx = None
            return raw


@dataclass(frozen=True)
class Plan:
    """Where the rest of a request's preparing runs, as decided on the loop (``_plan_on_loop``):

    - ``done``: measured, rewritten and recorded on the loop; ``forwarded`` are the bytes that go out.
    - ``rest_in_turn``: measured on the loop and its session's turn taken; the rewrite of ``messages`` (or ``built``,
      when it was already made and only its record has to write to the store) and its record run in a worker thread.
    - ``all_in_thread``: nothing done yet; measuring, rewriting and recording all run in a worker thread.
    """

    how: Literal["done", "rest_in_turn", "all_in_thread"]
    forwarded: bytes | None = None
    messages: list[dict[str, Any]] | None = None
    built: Built | None = None


ALL_IN_THREAD = Plan("all_in_thread")


def _plan_on_loop(
    app: web.Application, dialect: Dialect, raw: bytes, body: dict[str, Any], ctx: RequestContext, headers: Any, ollama: bool, window: Window
) -> Plan:
    """A small request measured and rewritten on the loop, sparing the two thread hops, when nothing has to wait:
    its body is at most ``server.loop_rewrite_bytes``, no other thread holds the session registry, its session
    resolves from memory and has no other request in flight, and nothing it decides needs a durable write. Else
    the rest to run in a worker, in the request's turn (already taken); or all of it in a worker, as for a large
    body (always with replicas: the store is asked)."""
    measurer = app[appkeys.MEASURER]
    why = measurer.offload.why
    lock = measurer.sessions.lock  # type: ignore[attr-defined]
    if measurer.shared or len(raw) > app[appkeys.CONFIG].server.loop_rewrite_bytes:
        why["replicas" if measurer.shared else "large"] += 1
        return ALL_IN_THREAD
    if not lock.acquire(blocking=False):
        why["registry_busy"] += 1
        return ALL_IN_THREAD
    try:
        messages = dialect.to_canonical(body)
        try:
            if not _measure(app, dialect, body, messages, ctx, headers, ollama, window, stored=False):
                return Plan("done", forwarded=raw)
        except NeedsStore:
            why["session_not_held"] += 1
            return ALL_IN_THREAD  # nothing changed yet: resolved again in a worker, with the store
        m = ctx.measurement
        assert m is not None and m.turn is not None
        if not m.turn.ready() or not _memory_only(app, ctx):  # its session's previous request is still being
            why["turn_busy" if not m.turn.ready() else "store_reads"] += 1
            return Plan("rest_in_turn", messages=messages)  # rewritten, or I/O ahead
        try:
            built = build(app, dialect, raw, body, messages, ctx)
            if _writes_now(app, ctx, built):
                why["durable_write"] += 1
                return Plan("rest_in_turn", messages=messages, built=built)
            out = record(app, ctx, built)
        except Exception:  # fail open: the client's own bytes go through
            app[appkeys.PIPELINE].failures["rewrite"] += 1
            log.warning("rewrite_failed", request_id=ctx.request_id, exc_info=True)
            out = raw
        m.turn.end()
        return Plan("done", forwarded=out)
    finally:
        lock.release()


def _memory_only(app: web.Application, ctx: RequestContext) -> bool:
    """Whether the pipeline needs nothing but memory for this request: the layout and snapshot steps read the keeper's
    store until it holds what they need (``Keeper.memory_held``); the long-context steps read the store (recall,
    chunks, summaries) only once a session has an archive in force, a person asked for one, or the request reaches
    the tier where summaries are prepared ahead (or the share where an archive may come early)."""
    m, mem = ctx.measurement, ctx.longctx
    if (
        ctx.keeper is not None
        and app[appkeys.CONFIG].layout.mode != "off"
        and m is not None
        and not ctx.keeper.memory_held(m.session.agent_id, m.session.session_id, m.how == How.NEW)
    ):
        return False  # the layout's notebook and anchors or the sub-agent snapshot are read from the keeper's store
    if mem is None:
        return True
    assert m is not None
    decisions, config = m.session.decisions, app[appkeys.CONFIG]
    early = config.archive.enabled and config.archive.early
    share = min(config.tiers.prepare_summary, config.archive.early_from) if early else config.tiers.prepare_summary
    below = m.tokens < share * m.budget.usable
    return below and ARCHIVES not in decisions and requested_action(decisions) is None


def _writes_now(app: web.Application, ctx: RequestContext, built: Built) -> bool:
    """Whether recording ``built`` writes to the store before it returns (then not on the loop)."""
    m, rewritten, sessions = ctx.measurement, ctx.rewritten, app[appkeys.MEASURER].sessions
    assert m is not None
    outcome = rewritten.pruning if rewritten is not None else None
    if built.decide and built.keep and outcome is not None:
        return sessions.writes_now(m.session, outcome.decisions, outcome.refs, outcome.batch_retry_at, outcome.clear_batch_retry)
    return sessions.writes_now(m.session, rewritten.decisions if built.decide and built.keep and rewritten is not None else {}, {})
