"""An answer is sent before its after-answer work, and the agent's next request waits until that work is done.

The work (calibration, the answer's id, the audit record, the access event and metrics) takes about 2 ms of the loop's
time. A stream's work runs once its last event is written: the wait begins just before it.

Why the next request waits: it must see what the answer taught, exactly as if the work had run before the answer was
sent (the calibration its tokens are counted with, the Responses id its ``previous_response_id`` names, the session's
upstream usage), so what it forwards never depends on how fast the work went. Only a request of the same agent waits
(an agent is known before the body is read: ``proxy.http.auth``), only while an answer of its is unsettled (the work
takes milliseconds: a client rarely sends again that soon), and at most ``SETTLE_WAIT_S``. Ruyi's own API, ``/metrics``
and MCP wait for every answer unsettled when they arrive, so what they read includes every answer already sent.

All on the event loop: nothing here is touched from a worker thread. With replicas (``store.shared``) an agent's next
request may reach another process, which cannot wait for this one: there answers are sent after their work, as before.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterable

import structlog
from aiohttp import web

from proxy import appkeys
from proxy.context import RequestContext

log = structlog.get_logger(__name__)
SETTLE_WAIT_S = 1.0
"""Longest a request waits for its agent's earlier answers to be settled (their work is local: milliseconds)."""
READERS = ("/ruyi/", "/metrics", "/mcp")
"""Paths that read what answers leave behind (audit records, stats, metrics, memory): they wait for every answer sent."""


class Unsettled:
    """The answers sent whose after-answer work is not done yet, per agent. An answer is settled by two calls of
    ``settle``: once its work is done (the handler's task, which a client closing its connection cancels, never the
    work) and once the middleware has recorded its access event."""

    def __init__(self) -> None:
        self._open: dict[str, set[asyncio.Future[None]]] = {}
        self._left: dict[asyncio.Future[None], int] = {}
        self.waited = 0
        """Requests that found an answer of their agent (or, reading Ruyi's API, any answer) unsettled and waited."""
        self.overdue = 0
        """Waits given up after ``SETTLE_WAIT_S`` (the request went on without what the answer taught)."""

    def begin(self, agent_id: str) -> asyncio.Future[None]:
        """An answer of ``agent_id`` is about to be sent before its work: settled by two calls of ``settle``."""
        settled: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._open.setdefault(agent_id, set()).add(settled)
        self._left[settled] = 2
        return settled

    def settle(self, agent_id: str, settled: asyncio.Future[None]) -> None:
        left = self._left.pop(settled, 1) - 1
        if left > 0:
            self._left[settled] = left
            return
        if not settled.done():
            settled.set_result(None)
        answers = self._open.get(agent_id)
        if answers is not None:
            answers.discard(settled)
            if not answers:
                del self._open[agent_id]

    def waiting_for(self, agent_id: str) -> bool:
        return agent_id in self._open

    async def wait(self, agent_id: str | None = None, within_s: float = SETTLE_WAIT_S) -> bool:
        """Wait until the answers of ``agent_id`` (None: of every agent) unsettled now are settled, at most ``within_s``;
        whether they were. Costs a dict look-up when nothing is unsettled."""
        if not self._open:
            return True
        if agent_id is None:
            futures: Iterable[asyncio.Future[None]] = [f for agent in self._open.values() for f in agent]
        else:
            futures = list(self._open.get(agent_id, ()))
        if not futures:
            return True
        self.waited += 1
        _, pending = await asyncio.wait(futures, timeout=within_s)
        if pending:
            self.overdue += 1
            log.warning("answer_settle_overdue", agent_id=agent_id, waited_s=within_s, unsettled=len(pending))
            for agent, answers in list(self._open.items()):  # given up once: no later request waits for them again
                answers -= pending
                if not answers:
                    del self._open[agent]
        return not pending

    def __len__(self) -> int:
        return sum(len(agent) for agent in self._open.values())


def answer_headers(resp: web.StreamResponse, ctx: RequestContext) -> None:
    """Ruyi's headers on an answer not yet sent: the request id, and the upstream's id when it sent none."""
    for name, value in ctx.response_headers.items():
        resp.headers.setdefault(name, value)
    resp.headers.setdefault("X-Request-Id", ctx.request_id)  # an answer of Ruyi's own (or an upstream that sent none)


async def send_now(request: web.Request, resp: web.StreamResponse, ctx: RequestContext, unsettled: Unsettled) -> None:
    """Send a whole answer now, before its after-answer work; the agent's next request waits until it is settled (the
    work done and the access event recorded). A client gone meanwhile is no error: the work is done all the same."""
    ctx.unsettled = unsettled.begin(ctx.agent_id)
    ctx.answering = True  # its status is on its way: a cancellation from here on never answers a second time
    answer_headers(resp, ctx)
    try:
        await resp.prepare(request)
        await resp.write_eof()
    except ConnectionResetError:  # as when aiohttp sent it after the handler: the answer is recorded as it came
        log.debug("client_disconnected", request_id=ctx.request_id, path=request.path)


def before_last_event(request: web.Request, ctx: RequestContext) -> None:
    """A stream's final event is about to be written: from here the client may send its next request before the work
    after this answer (which runs once the stream ends) is done, so that request waits for it, as after a whole answer."""
    if ctx.unsettled is None and not request.app[appkeys.MEASURER].shared:
        ctx.unsettled = request.app[appkeys.UNSETTLED].begin(ctx.agent_id)


def settled_by(work: asyncio.Future[object], ctx: RequestContext, unsettled: Unsettled) -> None:
    """The answer is settled (for the work's part) once ``work`` ends, however it ends."""
    if ctx.unsettled is not None:
        answer = ctx.unsettled
        work.add_done_callback(lambda _: unsettled.settle(ctx.agent_id, answer))
