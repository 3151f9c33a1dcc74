"""Build the aiohttp application: routes, the shared client session, the pipeline, the start-up probe."""

from __future__ import annotations

import asyncio
from collections import Counter
from collections.abc import AsyncIterator, Sequence

from aiohttp import web

from config.schema import Config
from proxy import admin, appkeys, chat, health
from proxy.measure import Measurer
from proxy.middleware import request_middleware
from proxy.passthrough import passthrough
from proxy.pipeline import Pipeline, Step
from proxy.upstream import make_session


def make_app(config: Config, steps: Sequence[Step] = (), probe_upstream: bool = True) -> web.Application:
    """The whole proxy as one app; ``steps`` is the ordered rewrite pipeline."""
    app = web.Application(middlewares=[request_middleware], client_max_size=config.limits.max_body_bytes)
    app[appkeys.CONFIG] = config
    app[appkeys.PIPELINE] = Pipeline(steps)
    app[appkeys.COUNTERS] = Counter()
    app.cleanup_ctx.append(_client_session)
    if probe_upstream:
        app.cleanup_ctx.append(_startup_probe)
    app.router.add_get("/healthz", health.healthz)
    app.router.add_get("/readyz", health.readyz)
    app.router.add_post("/v1/chat/completions", chat.openai_chat)
    app.router.add_post("/api/chat", chat.ollama_chat)
    app.router.add_post("/api/generate", chat.ollama_generate)
    admin.add_routes(app)
    app.router.add_route("*", "/v1/{tail:.*}", passthrough)
    app.router.add_route("*", "/api/{tail:.*}", passthrough)
    return app


async def _client_session(app: web.Application) -> AsyncIterator[None]:
    session = make_session(app[appkeys.CONFIG].upstream)
    app[appkeys.CLIENT] = session
    app[appkeys.MEASURER] = Measurer(app[appkeys.CONFIG], session)
    yield
    await session.close()


async def _startup_probe(app: web.Application) -> AsyncIterator[None]:
    task = asyncio.create_task(health.warn_if_upstream_down(app[appkeys.CLIENT], app[appkeys.CONFIG]))
    yield
    task.cancel()
