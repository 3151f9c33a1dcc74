"""``POST /v1/messages/count_tokens``: the upstream's count when it is Anthropic (calibrating Ruyi's), else Ruyi's estimate, said so; with the layout's sections Ruyi would add."""

from __future__ import annotations

import json
from typing import Any

import structlog
from aiohttp import web

from proxy import appkeys
from proxy.context import CTX_KEY, RequestContext, mode_from
from proxy.dialects.anthropic import ANTHROPIC_MESSAGES
from proxy.http.auth import check_route, identify
from proxy.http.request_body import read_json_body
from proxy.http.upstream import forward_headers, read_all, relay_headers, send
from proxy.know.tiers import tier_for
from proxy.know.window import budget_for, requested_output_tokens
from proxy.layout.step import LayoutPlanStep
from proxy.longctx.simulate import forwarded_raw
from proxy.routes import route_of, upstream_url

log = structlog.get_logger(__name__)
ESTIMATE_HEADER = "X-Ruyi-Token-Count"
"""``estimate`` when Ruyi counted (an upstream that is not Anthropic), ``upstream`` when Anthropic did."""
COUNT_OF_HEADER = "X-Ruyi-Count-Of"
"""``forwarded`` when the count is of what Ruyi would forward for the session the request continues (its archive and
pruning in force applied, nothing decided), ``sent`` when of the request as sent (no session of Ruyi's continues it)."""
LAYOUT_HEADER = "X-Ruyi-Layout-Tokens"
"""What the count includes for the layout's sections (sent only when there are some)."""


async def count_tokens(request: web.Request) -> web.StreamResponse:
    app, ctx = request.app, request[CTX_KEY]
    caller = identify(request)
    ctx.agent_id = caller.agent_id or ctx.agent_id
    await app[appkeys.UNSETTLED].wait(ctx.agent_id)  # counted with the calibration the agent's last answer taught
    raw, body = await read_json_body(request)
    ctx.model, ctx.route = route_of(body, app[appkeys.CONFIG])
    check_route(caller, ctx.route)
    measurer = app[appkeys.MEASURER]
    tools = body.get("tools") if isinstance(body.get("tools"), list) else None
    messages = ANTHROPIC_MESSAGES.to_canonical(body) or []
    counted = await measurer.offload.run(measurer.counter.count, ctx.model, messages, tools, bounded=False)
    forwarded = await _forwarded(request, ctx, messages, counted)  # the archive and pruning in force, simulated
    cut = counted.total - forwarded if forwarded is not None else 0
    added = await _layout_tokens(request, ctx, body, messages, counted.total - cut)  # what Ruyi would add before forwarding
    extra = {LAYOUT_HEADER: str(added)} if added else {}
    extra[COUNT_OF_HEADER] = "forwarded" if forwarded is not None else "sent"
    if ctx.route.kind != "anthropic":
        tokens = round((counted.total - cut) * measurer.calibration.ratio(ctx.model)) + added
        return web.json_response({"input_tokens": tokens}, headers={**ctx.response_headers, ESTIMATE_HEADER: "estimate", **extra})
    url = upstream_url(ctx.route, request.rel_url.raw_path, request.rel_url.raw_query_string)
    headers = forward_headers(request.headers, ctx.route)
    headers["Content-Type"] = "application/json"
    async with send(app[appkeys.CLIENT], ctx, "POST", url, headers, raw, app[appkeys.SLOTS]) as resp:
        data = await read_all(resp, ctx)
        upstream = _input_tokens(data) if resp.status == 200 else None
        if upstream is not None:
            measurer.observe_count(ctx.model, counted.total, upstream)  # the client's own body: what the upstream counted
            if added or cut:  # the upstream counted what the client holds: less what Ruyi would cut, at its scale
                less = round(cut * upstream / counted.total) if counted.total else 0
                data = json.dumps({**json.loads(data), "input_tokens": max(1, upstream - less) + added}).encode()
        out_headers = relay_headers(resp.headers, {**ctx.response_headers, ESTIMATE_HEADER: "upstream", **(extra if upstream is not None else {})})
        return web.Response(body=data, status=resp.status, headers=out_headers)


async def _forwarded(request: web.Request, ctx: RequestContext, messages: list[dict[str, Any]], counted: Any) -> int | None:
    """The raw tokens Ruyi would forward (proxy.longctx.simulate), or None: no session continues it, or it failed
    (fail open: the count of what the client sent)."""
    if not messages or mode_from(request) == "off":
        return None
    measurer = request.app[appkeys.MEASURER]
    try:
        chain = measurer.fingerprinter.chain(messages)
        return await measurer.offload.run(forwarded_raw, measurer.sessions, ctx.agent_id, messages, chain, counted.messages, counted.total)
    except Exception:  # fail open
        request.app[appkeys.PIPELINE].failures["count_tokens_forwarded"] += 1
        log.warning("count_tokens_forwarded_failed", request_id=ctx.request_id, exc_info=True)
        return None


async def _layout_tokens(request: web.Request, ctx: RequestContext, body: dict[str, Any], messages: list[dict[str, Any]], raw_tokens: int) -> int:
    """The tokens of the sections the layout step would add to this request (memory, rules, cards, metadata), at the
    upstream's scale; 0 without a layout or when working it out fails (fail open: the client's own count)."""
    app = request.app
    plan = next((step for step in app[appkeys.PIPELINE].each_step() if isinstance(step, LayoutPlanStep)), None)
    ctx.mode = mode_from(request)
    if plan is None or not messages or ctx.mode == "off":
        return 0
    measurer, config = app[appkeys.MEASURER], app[appkeys.CONFIG]
    ctx.keeper = app[appkeys.KEEPER]
    ctx.parent_id, ctx.task = request.headers.get("X-Ruyi-Parent"), request.headers.get("X-Ruyi-Task")
    model = ctx.model or ""
    try:
        window = await measurer.window(ANTHROPIC_MESSAGES.name, model, body, False, request.headers)
        scale = measurer.calibration.ratio(model)
        budget = budget_for(window.tokens, requested_output_tokens(body), config.window)
        usage = budget.usage(round(raw_tokens * scale))
        tier = tier_for(usage, config.tiers, config.archive.enabled).value
        parts = await measurer.offload.run(plan.preview, messages, ctx, measurer.counter.text_counter(model), usage, window.tokens, tier)
    except Exception:  # fail open: the count of what the client sent
        app[appkeys.PIPELINE].failures["count_tokens_layout"] += 1
        log.warning("count_tokens_layout_failed", request_id=ctx.request_id, exc_info=True)
        return 0
    return round(sum(parts.values()) * scale)


def _input_tokens(data: bytes) -> int | None:
    try:
        found = json.loads(data).get("input_tokens")
    except (ValueError, AttributeError):
        return None
    return found if isinstance(found, int) else None
