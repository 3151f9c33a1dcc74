"""The overflow retry: after the upstream said the prompt does not fit, one harder batch and one retry.

It runs in a new turn of the request's session, off the loop; its decisions are kept only once the upstream
accepts the retry."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

import structlog
from aiohttp import web

from proxy import appkeys
from proxy.context import RequestContext
from proxy.dialects.base import Dialect
from proxy.longctx.request import RequestMemory
from proxy.rewrite.build import build
from proxy.rewrite.overflow import is_prompt_overflow
from proxy.rewrite.pruning import Outcome
from proxy.rewrite.record import not_kept, record, report_pruning

log = structlog.get_logger(__name__)
T = TypeVar("T")


async def retry_after_refusal(
    request: web.Request, dialect: Dialect, raw: bytes, body: dict[str, Any], ctx: RequestContext, error: bytes
) -> bytes | None:
    """The upstream refused the request with ``error``: when it says the prompt does not fit, the limit it stated is
    remembered and the bytes to retry with are made (None: relay the error as it is)."""
    if not is_prompt_overflow(error):
        return None
    if ctx.measurement is not None:  # a limit the server stated: remembered, and the retry within it
        ctx.measurement = request.app[appkeys.MEASURER].after_refusal(ctx.measurement, ctx.model or "", error, ctx.sent_raw_tokens) or ctx.measurement
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
    outcome = _pruning(ctx)
    before = outcome.tokens_after if outcome else None
    messages = dialect.to_canonical(body)
    if ctx.longctx is not None and messages is not None:  # afresh, and an archive if one can help
        old = ctx.longctx
        ctx.longctx = RequestMemory(old.service, messages, target=old.target, scope=old.scope, overflow=True)
    app = request.app
    try:
        forwarded = record(app, ctx, build(app, dialect, raw, body, messages, ctx, keep=False))
    except Exception:  # fail open: relay the upstream's error as it is
        app[appkeys.PIPELINE].failures["rewrite"] += 1
        log.warning("rewrite_failed", request_id=ctx.request_id, exc_info=True)
        return None
    outcome = _pruning(ctx)
    if forwarded is raw or outcome is None or outcome.tokens_after == before:
        return None  # nothing more could be freed: relay the upstream's error as it is
    ctx.unkept = outcome
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
        s.agent_id, s.session_id, outcome.decisions, outcome.refs, outcome.batch_retry_at, outcome.clear_batch_retry
    )
    if accepted and not kept:
        not_kept(app, ctx, "store_write")
    report_pruning(app, ctx, outcome, kept)


def _pruning(ctx: RequestContext) -> Outcome | None:
    """The pruning outcome of the request's latest rewrite."""
    return ctx.rewritten.pruning if ctx.rewritten is not None else None


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
