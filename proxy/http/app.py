"""Build the aiohttp application: routes, the shared client session, the pipeline, the start-up probe."""

from __future__ import annotations

import asyncio
import functools
from collections.abc import AsyncIterator, Sequence

from aiohttp import web

from config.schema import Config
from memory.cards.workspace import Shelf, for_agent
from memory.store.backend import open_database, open_recall, open_store
from memory.store.locks import WatchedLock
from memory.store.writer import Writer
from memory.sweep import sweep_forever
from proxy import appkeys
from proxy import flow as chat
from proxy.api import admin, anchors, cards, forms, notebook, overview
from proxy.api import agents as agents_api
from proxy.api import archive as archive_api
from proxy.http import health
from proxy.http.count_tokens import count_tokens
from proxy.http.middleware import request_middleware
from proxy.http.passthrough import passthrough
from proxy.http.pool import ConnectionSlots
from proxy.http.settling import Unsettled
from proxy.http.shutdown import Shutdown
from proxy.http.upstream import make_session
from proxy.keep.keeper import Keeper
from proxy.know.measure import Measurer
from proxy.longctx.service import LongCtx
from proxy.mcp import endpoint as mcp_endpoint
from proxy.observe import endpoint as metrics_endpoint
from proxy.observe.audit_file import AuditFile
from proxy.offload import Offload, stuck_after
from proxy.rewrite.pipeline import Pipeline, PipelineStep
from proxy.ui import pages
from summaries.llm import LLMSummarizer


def make_app(config: Config, steps: Sequence[PipelineStep] = (), probe_upstream: bool = True) -> web.Application:
    """The whole proxy as one app; ``steps`` is the ordered rewrite pipeline."""
    app = web.Application(middlewares=[request_middleware], client_max_size=config.limits.max_body_bytes)
    app[appkeys.CONFIG] = config
    app[appkeys.PIPELINE] = Pipeline(steps)
    app[appkeys.SHUTDOWN] = Shutdown(config.server.shutdown_grace_seconds)
    app[appkeys.UNSETTLED] = Unsettled()
    app.on_shutdown.append(_begin_shutdown)
    app.cleanup_ctx.append(_state)
    app.cleanup_ctx.append(_daily_sweep)
    app.cleanup_ctx.append(_idle_compaction)
    app.cleanup_ctx.append(_forget_idle)
    if probe_upstream:
        app.cleanup_ctx.append(_startup_probe)
    app.router.add_get("/healthz", health.healthz)
    app.router.add_get("/", health.root)  # and HEAD /, which Claude Code sends at start
    app.router.add_get("/readyz", health.readyz)
    if config.metrics.enabled:
        metrics_endpoint.install(app)  # GET /metrics, and the per-request tallies the access event adds to
    app.router.add_post("/v1/chat/completions", chat.openai_chat)
    app.router.add_post("/v1/messages", chat.anthropic_messages)
    app.router.add_post("/v1/responses", chat.openai_responses)
    app.router.add_post("/v1/messages/count_tokens", count_tokens)
    app.router.add_post("/api/chat", chat.ollama_chat)
    app.router.add_post("/api/generate", chat.ollama_generate)
    admin.add_routes(app)
    agents_api.add_routes(app)
    anchors.add_routes(app)
    notebook.add_routes(app)
    cards.add_routes(app)
    forms.add_routes(app)
    archive_api.add_routes(app)
    overview.add_routes(app)
    pages.add_routes(app)
    mcp_endpoint.add_routes(app)
    app.router.add_route("*", "/v1/{tail:.*}", passthrough)
    app.router.add_route("*", "/api/{tail:.*}", passthrough)
    return app


async def _state(app: web.Application) -> AsyncIterator[None]:
    """The store (migrated; a newer schema stops start-up), its background writer, the worker threads, the client
    session. The registry and the writer share the store's one connection, under one lock."""
    config = app[appkeys.CONFIG]
    store = await asyncio.to_thread(open_store, config.store)  # its migrations (a whole index rebuilt, say) off the loop
    lock = WatchedLock()  # a store stuck in the kernel shows as this lock held too long (proxy/offload.py)
    writer = Writer(store, config.store.queue_max, lock) if store is not None else None
    if writer is not None:
        writer.start()
    session = make_session(config.upstream)
    app[appkeys.CLIENT] = session
    app[appkeys.SLOTS] = ConnectionSlots(config.upstream)
    offload = Offload(config.server.worker_threads, stuck_after(config.store.deadline_ms))
    app[appkeys.MEASURER] = measurer = Measurer(config, session, store, writer, offload, lock)
    summarizer = LLMSummarizer(config.summarizer) if config.summarizer.model else None
    app[appkeys.LONGCTX] = longctx = LongCtx(config.archive, config.pruning.tool_table(), config.s0, open_recall(config.store, store), summarizer)
    app[appkeys.KEEPER] = keeper = Keeper(
        open_database(config.store),
        config.notebook,
        summarizer,
        config.store.busy_timeout_ms,
        functools.partial(offload.run, bounded=False),  # in the background: never given up
        workspaces=functools.partial(for_agent, config),
        shelf=Shelf(config.cards.recheck_seconds),
    )
    keeper.held.on = not config.store.shared  # replicas write the same store: read it each time (in a worker, as all their requests)
    keeper.held.refresh = offload.background  # a held read past its time is read again in the background, not on a request's path
    longctx.start(config.store.queue_max, config.s0.retention_days or config.sessions.ttl_days, config.store.sweep_interval_hours)
    if config.audit.path is not None:
        app[appkeys.AUDIT_FILE] = AuditFile(config.audit)
    yield
    await app[appkeys.SHUTDOWN].drain()  # every answered request's audit record, S0 and memory, even if its client left
    await longctx.close()
    await keeper.settle()  # what answers gave is remembered before the worker threads go
    await keeper.refiner.cancel()  # the summarizer's background work is given up (forms stay deterministic)
    app[appkeys.SHUTDOWN].end()
    await session.close()
    await measurer.close()
    keeper.close()
    if appkeys.AUDIT_FILE in app:
        await app[appkeys.AUDIT_FILE].close()  # after every request's record is queued


async def _begin_shutdown(app: web.Application) -> None:
    app[appkeys.SHUTDOWN].begin()


async def _daily_sweep(app: web.Application) -> AsyncIterator[None]:
    hours = app[appkeys.CONFIG].store.sweep_interval_hours
    task = asyncio.create_task(sweep_forever(app[appkeys.MEASURER].sessions, hours * 3600))
    yield
    task.cancel()


async def _forget_idle(app: web.Application) -> AsyncIterator[None]:
    others = [step.forget_idle for step in app[appkeys.PIPELINE].each_step() if hasattr(step, "forget_idle")]  # pruning's caches
    others.append(app[appkeys.KEEPER].held.forget_idle)  # reads of agents' memory past their use
    others.append(app[appkeys.LONGCTX].forget_idle)  # sessions' prepared chunks and summaries
    task = asyncio.create_task(app[appkeys.MEASURER].forget_idle_forever(others))
    yield
    task.cancel()


async def _idle_compaction(app: web.Application) -> AsyncIterator[None]:
    task = asyncio.create_task(app[appkeys.KEEPER].compact_forever())
    yield
    task.cancel()


async def _startup_probe(app: web.Application) -> AsyncIterator[None]:
    task = asyncio.create_task(health.warn_if_upstream_down(app[appkeys.CLIENT], app[appkeys.CONFIG]))
    yield
    task.cancel()
