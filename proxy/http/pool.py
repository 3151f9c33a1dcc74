"""Upstream connection slots: at most ``upstream.max_connections`` exchanges at once, a bounded wait for one, then 503."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from config.schema import UpstreamOptions
from proxy.context import RequestContext
from proxy.dialects.errors import ProxyError

RETRY_AFTER_S = 1
"""What a 503 for a full pool tells the client to wait before retrying (OpenAI and Ollama clients retry 503s)."""


class ConnectionSlots:
    """One slot per upstream exchange, held from the request until its answer is closed (a stream holds it to
    its last chunk). A request finding every slot taken waits up to ``pool_wait_seconds``, then gets a 503."""

    def __init__(self, options: UpstreamOptions) -> None:
        self.limit = options.max_connections
        self.wait_s = options.pool_wait_seconds
        self._free = asyncio.Semaphore(self.limit)
        self.refused = 0
        """Requests answered 503 because no slot came free in time (reported by /ruyi/v1/stats)."""

    @property
    def in_use(self) -> int:
        return self.limit - self._free._value  # asyncio.Semaphore has no public count

    @asynccontextmanager
    async def slot(self, ctx: RequestContext) -> AsyncIterator[None]:
        try:
            if self._free.locked():  # none free now: wait, within bounds (a free one is taken without a timer)
                async with asyncio.timeout(self.wait_s):
                    await self._free.acquire()
            else:
                await self._free.acquire()
        except TimeoutError:
            self.refused += 1
            ctx.response_headers["Retry-After"] = str(RETRY_AFTER_S)
            raise ProxyError(
                503,
                "upstream_pool_exhausted",
                f"all {self.limit} upstream connections stayed busy for {self.wait_s:g} s; retry shortly "
                "(upstream.max_connections sizes the pool, upstream.pool_wait_seconds the wait)",
            ) from None
        try:
            yield
        finally:
            self._free.release()
