"""Recording a request's rewrite before it is forwarded, and saying which bytes go out.

What it showed and decided (durably when it must be), the report of what pruning did, the headers and facts the
user sees."""

from __future__ import annotations

import structlog
from aiohttp import web

from proxy import appkeys
from proxy.context import RequestContext
from proxy.rewrite.build import Built
from proxy.rewrite.pruning import Outcome

log = structlog.get_logger(__name__)


def record(app: web.Application, ctx: RequestContext, built: Built) -> bytes:
    """Record what ``built`` decided (durably before forwarding when it must be) and say which bytes go out."""
    if built.failed is not None:
        not_kept(app, ctx, built.failed)
    sent = _record_measured(app, ctx, built.raw_after, changed=built.out is not built.raw, decide=built.decide, keep=built.keep)
    return built.out if sent else built.raw


def _record_measured(app: web.Application, ctx: RequestContext, raw_after: int, *, changed: bool, decide: bool, keep: bool) -> bool:
    """Remember what the request showed and what it decided (``decide``: the mode is on and its rewrite could be
    built; ``keep``: not an overflow retry awaiting its answer), durably before it is forwarded; report it
    everywhere the user looks. Returns whether the rewritten body (``changed``) may go out."""
    m, rewritten, measurer = ctx.measurement, ctx.rewritten, app[appkeys.MEASURER]
    outcome = rewritten.pruning if rewritten is not None else None
    assert m is not None
    s, model = m.session, ctx.model or ""
    measurer.record(m, model, m.calibrated(raw_after) if changed else m.tokens, changed)
    mem = ctx.longctx
    if decide and keep and outcome is not None:
        written = measurer.sessions.decide(
            s.agent_id, s.session_id, outcome.decisions, outcome.refs, outcome.batch_retry_at, outcome.clear_batch_retry
        )
    elif decide and keep and rewritten is not None and rewritten.decisions:  # a person's request done, nothing else decided
        written = measurer.sessions.decide(s.agent_id, s.session_id, rewritten.decisions, {})
    else:
        written = measurer.sessions.settle()  # what must be durable before forwarding is written; the rest soon
    if changed and not written:
        not_kept(app, ctx, "store_write")
        measurer.record(m, model, m.tokens, False)
    sent = changed and written
    if outcome is not None and (keep or not sent):
        report_pruning(app, ctx, outcome, decide and keep and written)
    after = m.calibrated(raw_after) if sent else m.tokens
    ctx.sent_raw_tokens = raw_after if sent else m.raw_tokens
    if mem is not None and mem.archived is not None and sent:
        ctx.response_headers["X-Ruyi-Archived"] = str(mem.archived.record["number"])
        ctx.facts["archive"] = outcome.report.get("archive") if outcome is not None else mem.archived.record["number"]
    ctx.session_id = s.session_id
    ctx.facts.update(
        session=s.session_id,
        session_how=m.how.value,
        tokens_before=m.tokens,
        tokens_after=after,
        tier=m.tier.value,
        window=m.window.tokens,
        window_source=m.window.source,
        usage=round(m.usage, 4),
    )
    ctx.response_headers.update(
        {
            "X-Ruyi-Session": s.session_id,
            "X-Ruyi-Tokens-Before": str(m.tokens),
            "X-Ruyi-Tokens-After": str(after),
            "X-Ruyi-Tier": outcome.report["tier_after"] if outcome is not None and sent else m.tier.value,
            "X-Ruyi-Window": str(m.window.tokens),
            "X-Ruyi-Window-Source": m.window.source,
        }
    )
    return sent


def report_pruning(app: web.Application, ctx: RequestContext, outcome: Outcome, applied: bool) -> None:
    """Queue the DCP report of what pruning did (``applied``: its new decisions went out and were kept)."""
    m = ctx.measurement
    assert m is not None
    s = m.session
    report = {
        "request": s.requests,
        "request_id": ctx.request_id,
        "mode": ctx.mode,
        "applied": applied,
        "overflow_retry": ctx.overflow_retry,
        **outcome.report,
    }
    if "context_management" in ctx.facts:  # the provider's own clearing the client asked for, beside Ruyi's
        report["context_management"] = ctx.facts["context_management"]
    app[appkeys.MEASURER].sessions.record(s.agent_id, s.session_id, report=report, reports_max=app[appkeys.CONFIG].pruning.reports_kept)
    busy = report["strategies"] or report["batch"] not in ("none", "waiting") or "archive" in report
    # logged with the request's one access event: in full when pruning did something, else in brief
    ctx.facts["dcp"] = report if busy else {"batch": report["batch"], "in_force_tokens": report["in_force"]["tokens_saved"]}


def not_kept(app: web.Application, ctx: RequestContext, why: str) -> None:
    """A rewrite that cannot go out as made: the client's own bytes go instead; counted (/ruyi/v1/stats) and warned."""
    app[appkeys.PIPELINE].failures[why] += 1
    ctx.facts.setdefault("failed_steps", []).append(why)
    log.warning("rewrite_not_kept", request_id=ctx.request_id, reason=why)
