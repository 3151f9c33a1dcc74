"""Turn the client's body into the body Ruyi forwards: run the pipeline, keep its decisions, report; after the answer, observe."""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, TypeVar

import structlog
from aiohttp import web

from proxy import appkeys, json_codec
from proxy.context import RequestContext
from proxy.dialects.base import Dialect
from proxy.longctx.request import RequestMemory, audit_fields
from proxy.rewrite.pruning import Outcome

log = structlog.get_logger(__name__)
T = TypeVar("T")


async def _in_turn(request: web.Request, ctx: RequestContext, work: Callable[[], T]) -> T:
    """``work`` in a worker thread, in a new turn of the request's session."""
    measurer = request.app[appkeys.MEASURER]

    def run() -> T:
        m = ctx.measurement
        if m is None:
            return work()
        with measurer.turn_of(m.session.agent_id, m.session.session_id):
            return work()

    return await measurer.offload.run(run)


async def retry_in_turn(request: web.Request, dialect: Dialect, raw: bytes, body: dict[str, Any], ctx: RequestContext) -> bytes | None:
    """``retry_after_overflow`` in a worker thread, in a new turn of the request's session."""
    return await _in_turn(request, ctx, lambda: retry_after_overflow(request, dialect, raw, body, ctx))


async def settle_retry_in_turn(request: web.Request, ctx: RequestContext, accepted: bool) -> None:
    """``settle_retry`` off the loop, in the session's turn (only after an overflow retry: else nothing to settle)."""
    if ctx.unkept is not None:
        await _in_turn(request, ctx, lambda: settle_retry(request, ctx, accepted))


def retry_after_overflow(request: web.Request, dialect: Dialect, raw: bytes, body: dict[str, Any], ctx: RequestContext) -> bytes | None:
    """After the upstream said the prompt is too long: one harder batch, and the bytes to retry with. Its
    decisions are kept only if the upstream accepts the retry (`settle_retry`)."""
    if ctx.mode != "on" or ctx.measurement is None or ctx.overflow_retry:
        return None
    ctx.overflow_retry = ctx.facts["overflow_retry"] = True
    before = ctx.pruning.tokens_after if ctx.pruning else None
    messages = dialect.to_canonical(body)
    if ctx.longctx is not None and messages is not None:  # afresh, and an archive if one can help
        old = ctx.longctx
        ctx.longctx = RequestMemory(old.service, messages, target=old.target, scope=old.scope, overflow=True)
    try:
        forwarded = rewrite(request.app, dialect, raw, body, messages, ctx, keep=False)
    except Exception:  # the answer is already on its way; never fail it here
        request.app[appkeys.PIPELINE].failures["rewrite"] += 1
        log.warning("rewrite_failed", request_id=ctx.request_id, exc_info=True)
        return None
    if forwarded is raw or ctx.pruning is None or ctx.pruning.tokens_after == before:
        return None  # nothing more could be freed: relay the upstream's error as it is
    ctx.unkept = ctx.pruning
    return forwarded


def settle_retry(request: web.Request, ctx: RequestContext, accepted: bool) -> None:
    """The upstream answered the overflow retry: keep its harder batch's decisions if it accepted it."""
    outcome, ctx.unkept = ctx.unkept, None
    m = ctx.measurement
    if outcome is None or m is None:
        return
    app = request.app
    s = m.session
    kept = accepted and app[appkeys.MEASURER].sessions.decide(
        s.agent_id, s.session_id, outcome.decisions, outcome.refs, outcome.batch_retry_at, outcome.clear_batch_retry)
    if accepted and not kept:
        _not_kept(app, ctx, "store_write")
    _report(app, ctx, outcome, kept)


@dataclass(frozen=True)
class Built:
    """A rewrite made and not yet recorded: the bytes it would send (the client's own unless ``on`` and changed),
    the forwarded prompt on our scale, and why the rewrite cannot go out as made (None: it can)."""

    out: bytes
    raw: bytes
    raw_after: int
    failed: str | None
    decide: bool
    keep: bool


def rewrite(app: web.Application, dialect: Dialect, raw: bytes, body: dict[str, Any],
            messages: list[dict[str, Any]] | None, ctx: RequestContext, keep: bool = True) -> bytes:
    """Run the pipeline over the canonical ``messages``, keep what it decided (unless ``keep`` is False: an
    overflow retry keeps its decisions once accepted), and build the bytes. The client's own bytes go out
    unless the mode is ``on`` and the rewritten body can be built and its decisions written."""
    return finish(app, ctx, build(app, dialect, raw, body, messages, ctx, keep))


def build(app: web.Application, dialect: Dialect, raw: bytes, body: dict[str, Any],
           messages: list[dict[str, Any]] | None, ctx: RequestContext, keep: bool = True) -> Built:
    """The pipeline's rewrite and its bytes, nothing recorded yet."""
    m = ctx.measurement
    assert m is not None
    on, new_body, raw_after, failed = ctx.mode == "on", body, m.raw_tokens, None
    if messages is not None:
        new_messages = app[appkeys.PIPELINE].run(messages, ctx)
        if new_messages is not messages:
            built = _with_messages(dialect, body, messages, new_messages, ctx)
            failed, new_body = ("dialect", body) if built is None else (None, built)
    if on and failed is None and m.num_ctx is not None:
        options = body.get("options") if isinstance(body.get("options"), dict) else {}
        new_body = {**new_body, "options": {**options, "num_ctx": m.num_ctx}}
    if ctx.pruning is not None:
        raw_after = ctx.pruning.raw_tokens_after
    elif new_body is not body and messages is not None and new_body.get("messages") is not body.get("messages"):
        measurer, model = app[appkeys.MEASURER], ctx.model or ""
        raw_after = measurer.counter.count(model, dialect.to_canonical(new_body) or [], body.get("tools")).total
    out = raw
    if on and failed is None and new_body is not body:
        try:
            out = _encode(new_body)
        except (ValueError, TypeError, RecursionError):
            failed = "serialize"
    return Built(out, raw, raw_after, failed, on and failed is None, keep)


def finish(app: web.Application, ctx: RequestContext, built: Built) -> bytes:
    """Record what ``built`` decided (durably before forwarding when it must be) and say which bytes go out."""
    if built.failed is not None:
        _not_kept(app, ctx, built.failed)
    sent = _record(app, ctx, built.raw_after, changed=built.out is not built.raw, decide=built.decide, keep=built.keep)
    return built.out if sent else built.raw


def summary_target(longctx: Any, ctx: RequestContext, headers: Any) -> Any:
    """Where an LLM summarizer sends this session's summaries (``same``: its own model and route, its client's key)."""
    if longctx.summarizer is None or ctx.route is None:
        return None
    auth = headers.get("Authorization") or ""
    key = ctx.route.key or (auth[7:].strip() if auth[:7].lower() == "bearer " else None)
    return longctx.summarizer.target(ctx.model, ctx.route.url, ctx.route.kind, key)


def _encode(body: dict[str, Any]) -> bytes:
    try:
        return json_codec.dumps(body)
    except UnicodeEncodeError:  # a lone surrogate the client sent escaped: send it escaped too
        return json.dumps(body).encode()


def _record(app: web.Application, ctx: RequestContext, raw_after: int, *, changed: bool, decide: bool, keep: bool) -> bool:
    """Remember what the request showed and what it decided (``decide``: the mode is on and its rewrite could be
    built; ``keep``: not an overflow retry awaiting its answer), durably before it is forwarded; report it
    everywhere the user looks. Returns whether the rewritten body (``changed``) may go out."""
    m, outcome, measurer = ctx.measurement, ctx.pruning, app[appkeys.MEASURER]
    assert m is not None
    s, model = m.session, ctx.model or ""
    measurer.record(m, model, m.calibrated(raw_after) if changed else m.tokens, changed)
    mem = ctx.longctx
    if decide and keep and outcome is not None:
        written = measurer.sessions.decide(s.agent_id, s.session_id, outcome.decisions, outcome.refs,
                                           outcome.batch_retry_at, outcome.clear_batch_retry)
    elif decide and keep and mem is not None and mem.decisions:  # a person's request done, nothing else decided
        written = measurer.sessions.decide(s.agent_id, s.session_id, mem.decisions, {})
    else:
        written = measurer.sessions.settle()  # what must be durable before forwarding is written; the rest soon
    if changed and not written:
        _not_kept(app, ctx, "store_write")
        measurer.record(m, model, m.tokens, False)
    sent = changed and written
    if outcome is not None and (keep or not sent):
        _report(app, ctx, outcome, decide and keep and written)
    after = m.calibrated(raw_after) if sent else m.tokens
    ctx.sent_raw_tokens = raw_after if sent else m.raw_tokens
    if mem is not None and mem.archived is not None and sent:
        ctx.response_headers["X-Ruyi-Archived"] = str(mem.archived.record["number"])
        ctx.facts["archive"] = outcome.report.get("archive") if outcome is not None else mem.archived.record["number"]
    ctx.session_id = s.session_id
    ctx.facts.update(session=s.session_id, session_how=m.how.value, tokens_before=m.tokens, tokens_after=after,
                     tier=m.tier.value, window=m.window.tokens, window_source=m.window.source, usage=round(m.usage, 4))
    ctx.response_headers.update({
        "X-Ruyi-Session": s.session_id,
        "X-Ruyi-Tokens-Before": str(m.tokens),
        "X-Ruyi-Tokens-After": str(after),
        "X-Ruyi-Tier": outcome.report["tier_after"] if outcome is not None and sent else m.tier.value,
        "X-Ruyi-Window": str(m.window.tokens),
        "X-Ruyi-Window-Source": m.window.source,
    })
    return sent


def _report(app: web.Application, ctx: RequestContext, outcome: Outcome, applied: bool) -> None:
    """Queue the DCP report of what pruning did (``applied``: its new decisions went out and were kept)."""
    m = ctx.measurement
    assert m is not None
    s = m.session
    report = {"request": s.requests, "request_id": ctx.request_id, "mode": ctx.mode, "applied": applied,
              "overflow_retry": ctx.overflow_retry, **outcome.report}
    if "context_management" in ctx.facts:  # the provider's own clearing the client asked for, beside Ruyi's
        report["context_management"] = ctx.facts["context_management"]
    app[appkeys.MEASURER].sessions.record(s.agent_id, s.session_id, report=report, reports_max=app[appkeys.CONFIG].pruning.reports_kept)
    busy = report["strategies"] or report["batch"] not in ("none", "waiting") or "archive" in report
    # logged with the request's one access event: in full when pruning did something, else in brief
    ctx.facts["dcp"] = report if busy else {"batch": report["batch"], "in_force_tokens": report["in_force"]["tokens_saved"]}


def _not_kept(app: web.Application, ctx: RequestContext, why: str) -> None:
    """A rewrite that cannot go out as made: the client's own bytes go instead; counted (/ruyi/v1/stats) and warned."""
    app[appkeys.PIPELINE].failures[why] += 1
    ctx.facts.setdefault("failed_steps", []).append(why)
    log.warning("rewrite_not_kept", request_id=ctx.request_id, reason=why)


def _with_messages(dialect: Dialect, body: dict[str, Any], before: list[dict[str, Any]], after: list[dict[str, Any]],
                   ctx: RequestContext) -> dict[str, Any] | None:
    """The body with the rewritten messages; None when the dialect cannot build it."""
    try:
        positions = ctx.longctx.positions if ctx.longctx is not None else None
        if ctx.layout is not None and ctx.layout.positions is not None:  # the layout placed its sections
            positions = ctx.layout.positions
        return dialect.with_messages(body, before, after, positions)
    except (ValueError, KeyError, IndexError, TypeError):
        log.warning("dialect_rewrite_failed", request_id=ctx.request_id, exc_info=True)
        return None


async def observe_off_loop(request: web.Request, ctx: RequestContext) -> None:
    """``observe`` records into the session registry, in memory only (the usage goes to the background queue):
    on the loop when the registry's lock is free this instant, else in a worker thread, never waiting on the loop.
    A request larger than ``server.loop_rewrite_bytes`` with raw turns to keep is observed in a worker thread too:
    its new messages are redacted and hashed (25 MB of tool output: seconds)."""
    if ctx.measurement is None:
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
    await measurer.offload.run(observe, request, ctx)


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
            "request_id": ctx.request_id, "model": ctx.model, "mode": ctx.mode, "session_how": m.how.value,
            "est_before": m.tokens, "est_after": facts.get("tokens_after"), "tier": m.tier.value, "batch": batch,
            "window": m.window.tokens, "usable": m.budget.usable, "status": ctx.status,
            "compaction": batch in ("applied", "economic", "overflow"), "overflow_retry": ctx.overflow_retry,
            "upstream_prompt_tokens": facts.get("upstream_prompt_tokens"), "cached_tokens": facts.get("cached_tokens"),
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
