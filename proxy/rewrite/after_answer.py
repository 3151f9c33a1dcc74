"""After the answer: calibrate against the upstream's usage, hand the exchange to S0, queue the audit record."""

from __future__ import annotations

import structlog
from aiohttp import web

from proxy import appkeys
from proxy.context import RequestContext
from proxy.longctx.request import audit_fields
from proxy.offload import StoreStalled

log = structlog.get_logger(__name__)


async def observe_off_loop(request: web.Request, ctx: RequestContext) -> None:
    """``observe`` records into the session registry, in memory only (the usage goes to the background queue):
    on the loop when the registry's lock is free this instant, else in a worker thread, never waiting on the loop.
    A request larger than ``server.loop_rewrite_bytes`` with raw turns to keep is observed in a worker thread too:
    its new messages are redacted and hashed (25 MB of tool output: seconds)."""
    if ctx.measurement is None or ctx.mode == "off":  # off: asked, or the store was stuck (went through unmodified)
        return
    measurer = request.app[appkeys.MEASURER]
    lock = measurer.sessions.lock  # type: ignore[attr-defined]
    large = ctx.longctx is not None and (request.content_length or 0) > request.app[appkeys.CONFIG].server.loop_rewrite_bytes
    if not large and not measurer.shared and lock.acquire(blocking=False):  # replicas: written at once (store I/O)
        try:
            observe(request, ctx)
        finally:
            lock.release()
        return
    try:
        await measurer.offload.run(observe, request, ctx)
    except StoreStalled:  # the answer is on its way; the audit record is written once the store answers again
        request.app[appkeys.PIPELINE].failures["store_stalled"] += 1


def observe(request: web.Request, ctx: RequestContext) -> None:
    """After the answer: calibrate, record the cached tokens the upstream reported, queue the audit record."""
    m, assembled = ctx.measurement, ctx.assembled
    if m is None:
        return
    measurer = request.app[appkeys.MEASURER]
    if ctx.longctx is not None and ctx.mode == "on":
        try:
            answer = assembled.message() if assembled is not None else None
            request.app[appkeys.LONGCTX].after_answer(ctx.longctx, m, answer)  # S0, in the background
        except Exception:  # the answer is already on its way
            request.app[appkeys.PIPELINE].failures["raw_turns"] += 1
            log.warning("raw_turns_failed", request_id=ctx.request_id, exc_info=True)
    try:
        if assembled is not None:
            forwarded = ctx.sent_raw_tokens if ctx.sent_raw_tokens is not None else m.raw_tokens
            ctx.facts.update(measurer.observe(m, ctx.model or "", forwarded, assembled, ctx.wire))
        facts, batch = ctx.facts, (ctx.facts.get("dcp") or {}).get("batch")
        ruyi_ms = (ctx.upstream_answered - ctx.started) * 1000 - ctx.upstream_wait_ms if ctx.upstream_answered is not None else None
        record = {
            "request_id": ctx.request_id,
            "model": ctx.model,
            "mode": ctx.mode,
            "session_how": m.how.value,
            "est_before": m.tokens,
            "est_after": facts.get("tokens_after"),
            "tier": m.tier.value,
            "batch": batch,
            "window": m.window.tokens,
            "usable": m.budget.usable,
            "status": ctx.status,
            "compaction": batch in ("applied", "economic", "overflow"),
            "overflow_retry": ctx.overflow_retry,
            "upstream_prompt_tokens": facts.get("upstream_prompt_tokens"),
            "cached_tokens": facts.get("cached_tokens"),
            "latency_llm_ms": round(ctx.upstream_latency_ms, 2) if ctx.upstream_latency_ms is not None else None,
            "latency_ruyi_ms": round(ruyi_ms, 2) if ruyi_ms is not None else None,
            **audit_fields(ctx.longctx, batch in ("applied", "economic", "overflow")),
        }
        measurer.audit(m, ctx.request_id, record)  # the store's audit table, in the background
        audit_file = request.app.get(appkeys.AUDIT_FILE)
        if audit_file is not None:  # audit.path: the same record as a JSON line, redacted and written by its own thread
            audit_file.put(m.session.agent_id, m.session.session_id, ctx.request_id, record)
    except Exception:  # the answer is already on its way; never fail it here
        request.app[appkeys.PIPELINE].failures["observe"] += 1
        log.warning("observe_failed", request_id=ctx.request_id, exc_info=True)
