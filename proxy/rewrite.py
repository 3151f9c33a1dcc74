"""Turn the client's body into the body Ruyi forwards: measure, run the pipeline, set num_ctx, report."""

from __future__ import annotations

import json
from typing import Any

import structlog
from aiohttp import web

from proxy import appkeys
from proxy.context import RequestContext
from proxy.dialects import Dialect

log = structlog.get_logger(__name__)


async def prepare(request: web.Request, dialect: Dialect, raw: bytes, body: dict[str, Any], ctx: RequestContext) -> bytes:
    """The bytes to forward: the client's own unless the mode is ``on`` and something changed."""
    if ctx.mode == "off":
        return raw
    app = request.app
    measurer = app[appkeys.MEASURER]
    model = ctx.model or ""
    ollama = ctx.route is not None and ctx.route.kind == "ollama"
    messages = dialect.to_canonical(body)
    try:
        ctx.measurement = m = await measurer.measure(dialect.name, model, body, messages, request.headers, ollama)
    except Exception:  # noqa: BLE001 - fail open: an unmeasured request still goes through
        app[appkeys.PIPELINE].failures["measure"] += 1
        log.warning("measure_failed", request_id=ctx.request_id, exc_info=True)
        return raw
    new_body = body
    if messages is not None:
        new_messages = app[appkeys.PIPELINE].run(messages, ctx)
        if new_messages is not messages:
            new_body = _with_messages(dialect, body, messages, new_messages, ctx)
    if m.num_ctx is not None:
        options = body.get("options") if isinstance(body.get("options"), dict) else {}
        new_body = {**new_body, "options": {**options, "num_ctx": m.num_ctx}}
    tokens_after = m.tokens
    if new_body is not body and messages is not None and new_body.get("messages") is not body.get("messages"):
        after = dialect.to_canonical(new_body) or []
        tokens_after = measurer.calibration.apply(model, measurer.counter.count(model, after, body.get("tools")).total)
    measurer.record(m, model, tokens_after)
    ctx.session_id = m.session.session_id
    ctx.facts.update(session=m.session.session_id, session_how=m.how.value, tokens_before=m.tokens, tokens_after=tokens_after,
                     tier=m.tier.value, window=m.window.tokens, window_source=m.window.source, usage=round(m.usage, 4))
    ctx.response_headers.update({
        "X-Ruyi-Session": m.session.session_id,
        "X-Ruyi-Tokens-Before": str(m.tokens),
        "X-Ruyi-Tokens-After": str(tokens_after if ctx.mode == "on" else m.tokens),
        "X-Ruyi-Tier": m.tier.value,
        "X-Ruyi-Window": str(m.window.tokens),
    })
    if ctx.mode != "on" or new_body is body:
        return raw
    return json.dumps(new_body, ensure_ascii=False).encode()


def _with_messages(dialect: Dialect, body: dict[str, Any], before: list[dict[str, Any]], after: list[dict[str, Any]], ctx: RequestContext) -> dict[str, Any]:
    try:
        return dialect.with_messages(body, before, after)
    except (ValueError, KeyError, IndexError, TypeError):
        ctx.facts.setdefault("failed_steps", []).append("dialect")
        log.warning("dialect_rewrite_failed", request_id=ctx.request_id, exc_info=True)
        return body


def observe(request: web.Request, ctx: RequestContext) -> None:
    """After the answer: calibrate and record the cached tokens the upstream reported."""
    m, assembled = ctx.measurement, ctx.facts.get("assembled")
    if m is None or assembled is None:
        return
    try:
        ollama_native = ctx.wire == "ollama"
        forwarded = m.raw_tokens
        ctx.facts.update(request.app[appkeys.MEASURER].observe(m, ctx.model or "", forwarded, assembled, ollama_native))
    except Exception:  # noqa: BLE001 - the answer is already on its way; never fail it here
        log.warning("observe_failed", request_id=ctx.request_id, exc_info=True)
