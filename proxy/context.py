"""Per-request state: one object made by the middleware, passed down explicitly, never shared."""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal

from aiohttp import web

from config.schema import Route
from proxy.dialects.errors import ProxyError, Wire

if TYPE_CHECKING:
    from proxy.dialects.base import Assembled
    from proxy.keep.keeper import Keeper
    from proxy.know.measurement import Measurement
    from proxy.longctx.request import RequestMemory
    from proxy.rewrite.pruning import Outcome
    from proxy.rewrite.results import Rewritten

Mode = Literal["on", "off", "dry-run"]
MODES: tuple[Mode, ...] = ("on", "off", "dry-run")


@dataclass
class RequestContext:
    """What Ruyi knows about one request while it is in flight: what it asked (headers, route, mode), what measuring
    found, what the rewrite came to, and the bookkeeping of its relay and audit record. The rewrite steps hand each
    other typed results (``proxy/rewrite/steps.py: Rewrite``), never values through this object."""

    request_id: str
    wire: Wire
    started: float = field(default_factory=time.perf_counter)
    mode: Mode = "on"
    model: str | None = None
    route: Route | None = None
    agent_id: str = "default"
    session_id: str | None = None
    stream: bool = False
    answering: bool = False
    """Whether the answer's status and headers are sent (its body may still be streaming)."""
    unsettled: asyncio.Future[None] | None = None
    """A whole answer sent before its after-answer work: settled once that work and the access event are done
    (``proxy.http.settling``); the agent's next request waits for it."""
    upstream_latency_ms: float | None = None
    status: int | None = None
    """The answer's HTTP status, once relayed (what the audit record says)."""
    upstream_wait_ms: float = 0.0
    """Time spent waiting for the upstream's headers, every send of this request together (an overflow retry sends twice)."""
    upstream_answered: float | None = None
    """When (``perf_counter``) the upstream's last answer began: Ruyi's own time is until then, less ``upstream_wait_ms``."""
    response_headers: dict[str, str] = field(default_factory=dict)
    measurement: Measurement | None = None
    """Session, tokens, window and tier, once measured (None with X-Ruyi-Mode: off)."""
    longctx: RequestMemory | None = None
    """The request for the long-context service (its messages, where summaries go) and what the rewrite told it."""
    rewritten: Rewritten | None = None
    """What the rewrite came to (``proxy.rewrite.build``): read when recording it, on an overflow retry, after the answer."""
    unkept: Outcome | None = None
    """The harder batch of an overflow retry in flight: kept only if the upstream accepts the retry."""
    sent_raw_tokens: int | None = None
    """Our (uncalibrated) estimate of the prompt forwarded: what calibration compares the upstream's count with."""
    overflow_retry: bool = False
    """Whether this request was retried once with a harder batch after the upstream said the prompt was too long."""
    assembled: Assembled | None = None
    """The answer, reassembled on the side while it was relayed (None when it was an error)."""
    parent_id: str | None = None
    """``X-Ruyi-Parent``: the session this request's session is a sub-agent of, said explicitly."""
    task: str | None = None
    """``X-Ruyi-Task``: the task instruction of the ``full`` layout (else the first user message)."""
    recall_tool: str | None = None
    """The name under which the request offers Ruyi's MCP ``recall`` tool (``mcp__ruyi__recall``, or a bare ``recall``),
    if it does: placeholders and the archive block then say to call it with the id."""
    keeper: Keeper | None = None
    """The app's memory of agents (anchors, notebook, sub-agent snapshots), for the steps that read it; None offline."""
    facts: dict[str, Any] = field(default_factory=dict)
    """What is logged with the access event (tokens, window, tier, report): measurements, never control flags."""


def mode_from(request: web.Request) -> Mode:
    raw = request.headers.get("X-Ruyi-Mode", "on").strip().lower() or "on"
    if raw not in MODES:
        raise ProxyError(400, "invalid_ruyi_mode", f"X-Ruyi-Mode must be one of {', '.join(MODES)}; got {raw!r}")
    return raw


CTX_KEY = web.RequestKey("ruyi_ctx", RequestContext)
