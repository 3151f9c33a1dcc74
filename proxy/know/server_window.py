"""The window an OpenAI-compatible server says it runs a model with: vLLM, SGLang, llama.cpp, LM Studio, TGI.

Asked only for a model that neither ``window.models`` nor litellm's map knows, once per (upstream, model),
in one round trip like Ollama's /api/show: the first model on an upstream asks every endpoint at once, later
ones only the endpoint that told (or those that answered). A found window is remembered for good, as is an
answer that no endpoint gave one; a lookup that failed (unreachable, timeout, 5xx, 429) is tried again only
after ``window.server_retry_s``. Concurrent requests for one model share one lookup.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable, Mapping
from typing import Any
from urllib.parse import quote, urlsplit

import structlog

from memory.lru import LRU
from proxy.know.options import WindowOptions

log = structlog.get_logger(__name__)

GetJson = Callable[[str, Mapping[str, str]], Awaitable[tuple[int, Any]]]
"""GETs a URL with headers: (status, JSON body or None); raises on a connection fault or a timeout."""
Parser = Callable[[Any, str], "int | None"]
ModelKey = tuple[str, str]
"""(upstream base URL, model name)."""
MODELS_MAX = 1024
"""(upstream, model) answers remembered (least recently asked forgotten first: names come from clients)."""
NO_ANSWER = (400, 401, 403, 404, 405, 422, 501)
"""Statuses that mean the endpoint does not exist here or will not say: a clean "not known"."""


def _tokens(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else None


def _entries(body: Any) -> list[Mapping[str, Any]]:
    data = body.get("data") if isinstance(body, Mapping) else None
    return [e for e in data if isinstance(e, Mapping)] if isinstance(data, list) else []


def from_models(body: Any, model: str) -> int | None:
    """``GET {base}/models``: vLLM's and SGLang's ``max_model_len`` of the model (OpenRouter: ``context_length``)."""
    for entry in _entries(body):
        if entry.get("id") == model:
            return _tokens(entry.get("max_model_len")) or _tokens(entry.get("context_length"))
    return None


def from_llamacpp_props(body: Any, model: str) -> int | None:
    """``GET {root}/props?model=…``: llama.cpp's ``default_generation_settings.n_ctx``, the context of one
    slot (what one request may use; ``-c`` divided by ``--parallel`` unless the KV cache is unified)."""
    if not isinstance(body, Mapping):
        return None
    settings = body.get("default_generation_settings")
    found = _tokens(settings.get("n_ctx")) if isinstance(settings, Mapping) else None
    return found or _tokens(body.get("n_ctx"))


def from_lmstudio_models(body: Any, model: str) -> int | None:
    """``GET {root}/api/v0/models``: LM Studio's ``loaded_context_length`` of the loaded model, else the
    model's ``max_context_length``."""
    for entry in _entries(body):
        if entry.get("id") == model:
            return _tokens(entry.get("loaded_context_length")) or _tokens(entry.get("max_context_length"))
    return None


def from_tgi_info(body: Any, model: str) -> int | None:
    """``GET {root}/info``: TGI's ``max_total_tokens`` (prompt and answer) of the one model it serves."""
    return _tokens(body.get("max_total_tokens")) if isinstance(body, Mapping) else None


def probes(base_url: str, model: str) -> list[tuple[str, Parser]]:
    """The endpoints to ask, most telling first: the root is the base URL without its ``/v1``."""
    base = base_url.rstrip("/")
    root = base[: -len("/v1")] if base.endswith("/v1") else base
    return [
        (f"{root}/props?model={quote(model, safe='')}", from_llamacpp_props),
        (f"{base}/models", from_models),
        (f"{root}/api/v0/models", from_lmstudio_models),
        (f"{root}/info", from_tgi_info),
    ]


class ServerWindows:
    """Windows that OpenAI-compatible upstreams report, per (upstream, model)."""

    def __init__(self, get: GetJson, options: WindowOptions) -> None:
        self._get = get
        self.options = options
        self._known: LRU[ModelKey, int | None] = LRU(MODELS_MAX)
        self._failed: LRU[ModelKey, float] = LRU(MODELS_MAX)
        """(upstream, model) → monotonic time its lookup last failed (read with peek: first in, first out)."""
        self._pending: dict[ModelKey, asyncio.Task[int | None]] = {}
        self._endpoints: dict[str, tuple[int, ...]] = {}
        """Upstream → the probes worth asking there (learnt from its first full lookup): the one that gave
        a window, else those that answered at all; a later model costs one request, not four."""

    async def window(self, base_url: str, model: str, headers: Mapping[str, str]) -> int | None:
        """The window the server reports for the model, or None when it does not say (or cannot now)."""
        key = (base_url, model)
        if key in self._known:
            known: int | None = self._known.get(key)
            return known
        failed = self._failed.peek(key)
        if failed is not None and time.monotonic() - failed < self.options.server_retry_s:
            return None
        task = self._pending.get(key)
        if task is None:
            task = self._pending[key] = asyncio.create_task(self._ask(key, headers))
            task.add_done_callback(lambda _: self._pending.pop(key, None))
        return await asyncio.shield(task)  # a client that goes away does not cancel the others' lookup

    async def _ask(self, key: ModelKey, headers: Mapping[str, str]) -> int | None:
        base_url, model = key
        known = self._endpoints.get(base_url)
        asked = [p for i, p in enumerate(probes(base_url, model)) if known is None or i in known]
        answers = await asyncio.gather(*(self._probe(url, parse, model, headers) for url, parse in asked))
        found = next((a for a in answers if isinstance(a, int)), None)
        if found is None and "failed" in answers:
            self._failed[key] = time.monotonic()
            return None
        self._failed.pop(key, None)
        self._known[key] = found
        if known is None:  # the first full lookup on this upstream says which endpoints it has
            told = [i for i, a in enumerate(answers) if isinstance(a, int)]
            self._endpoints[base_url] = tuple(told[:1] or [i for i, a in enumerate(answers) if a == "empty"])
        if found is not None:
            source = asked[[isinstance(a, int) for a in answers].index(True)][0]
            log.info("server_window_found", model=model, window=found, endpoint=urlsplit(source).path)
        return found

    async def _probe(self, url: str, parse: Parser, model: str, headers: Mapping[str, str]) -> int | str:
        """The window this endpoint gives; "empty" when it answered without one, "absent" when it does not
        exist here or will not say, "failed" when it could not answer now."""
        try:
            status, body = await self._get(url, headers)
        except Exception as exc:  # noqa: BLE001 — fail open: the window falls back to litellm's map or the default
            log.debug("server_window_lookup_failed", model=model, error=type(exc).__name__)
            return "failed"
        if status == 200:
            try:
                return parse(body, model) or "empty"
            except Exception:  # noqa: BLE001 — an odd body is no answer, never a failed request
                return "empty"
        return "absent" if status in NO_ANSWER else "failed"
