"""The rewrite of one request, made and not yet recorded: the pipeline's messages, the body and its bytes.

The pipeline runs over the canonical messages, the body is built in the client's dialect, and ``record`` then
says which bytes go out."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

import structlog
from aiohttp import web

from proxy import appkeys, json_codec
from proxy.context import RequestContext
from proxy.dialects.base import Dialect

log = structlog.get_logger(__name__)


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


def build(
    app: web.Application,
    dialect: Dialect,
    raw: bytes,
    body: dict[str, Any],
    messages: list[dict[str, Any]] | None,
    ctx: RequestContext,
    keep: bool = True,
) -> Built:
    """The pipeline's rewrite and its bytes, nothing recorded yet."""
    m = ctx.measurement
    assert m is not None
    on, new_body, raw_after, failed = ctx.mode == "on", body, m.raw_tokens, None
    if messages is not None:
        ctx.rewritten = rewritten = app[appkeys.PIPELINE].run(messages, ctx)
        if rewritten.num_ctx is not None:  # the layout's sections counted: what the request is sent and recorded with
            m.num_ctx = rewritten.num_ctx
        if rewritten.messages is not messages:
            built = _with_messages(dialect, body, messages, rewritten.messages, rewritten.positions, ctx)
            failed, new_body = ("dialect", body) if built is None else (None, built)
    if on and failed is None and m.num_ctx is not None:
        options = body.get("options") if isinstance(body.get("options"), dict) else {}
        new_body = {**new_body, "options": {**options, "num_ctx": m.num_ctx}}
    outcome = ctx.rewritten.pruning if ctx.rewritten is not None else None
    if outcome is not None:
        raw_after = outcome.raw_tokens_after
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


def _encode(body: dict[str, Any]) -> bytes:
    try:
        return json_codec.dumps(body)
    except UnicodeEncodeError:  # a lone surrogate the client sent escaped: send it escaped too
        return json.dumps(body).encode()


def _with_messages(
    dialect: Dialect,
    body: dict[str, Any],
    before: list[dict[str, Any]],
    after: list[dict[str, Any]],
    positions: tuple[int, ...] | None,
    ctx: RequestContext,
) -> dict[str, Any] | None:
    """The body with the rewritten messages (``positions``: where each came from); None when the dialect cannot build it."""
    try:
        return dialect.with_messages(body, before, after, positions)
    except (ValueError, KeyError, IndexError, TypeError):
        log.warning("dialect_rewrite_failed", request_id=ctx.request_id, exc_info=True)
        return None
