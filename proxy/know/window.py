"""The context window of a request's model, the reserve for its answer, and Ollama's num_ctx ladder."""

from __future__ import annotations

import fnmatch
import functools
import importlib.util
import json
import time
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

import structlog

from proxy.know.options import OllamaOptions, WindowOptions

log = structlog.get_logger(__name__)

MODELS_MAX = 1024
"""Ollama models whose trained length (or failure) is remembered."""
LADDER_START = 8192
"""The smallest num_ctx Ruyi sets; each step doubles it (8k, 16k, 32k, …), the last step is the cap."""

OllamaApi = Literal["chat", "generate", "openai"]
"""Which Ollama endpoint a request came in on: /api/chat, /api/generate, or /v1/chat/completions."""

ShowModel = Callable[[str], Awaitable[Mapping[str, Any] | None]]
"""Fetches Ollama's /api/show for a model: its JSON body, or None when it could not be had."""

WINDOW_SOURCES = ("learnt", "config", "request", "anthropic_beta", "server", "server_default", "model_info", "litellm", "default")
"""Where a window comes from, first wins (``learnt`` only when below all else): the precedence table of docs/windows.md,
sent as ``X-Ruyi-Window-Source``."""


@dataclass(frozen=True, slots=True)
class Window:
    """A model's window and where that number came from (for logs)."""

    tokens: int
    source: Literal["config", "litellm", "default", "request", "model_info", "server_default", "server", "anthropic_beta", "learnt"]


@dataclass(frozen=True, slots=True)
class Budget:
    """A window split into room for the prompt and the reserve for the answer."""

    window: int
    reserve: int

    @property
    def usable(self) -> int:
        """Tokens the prompt may take."""
        return self.window - self.reserve

    def usage(self, prompt_tokens: int) -> float:
        """How full the context is: prompt tokens / (window − reserve)."""
        return prompt_tokens / self.usable if self.usable > 0 else float("inf")


def configured_window(model: str, options: WindowOptions) -> int | None:
    """The window configured for the first pattern that matches the model (case-insensitive)."""
    name = model.lower()
    for pattern, tokens in options.models:
        if fnmatch.fnmatchcase(name, pattern.lower()):
            return tokens
    return None


@functools.cache
def _litellm_windows() -> dict[str, int]:
    """model name → max_input_tokens of litellm's bundled map, read lazily once and then only read."""
    spec = importlib.util.find_spec("litellm")
    if spec is None or not spec.origin:
        return {}
    path = Path(spec.origin).parent / "model_prices_and_context_window_backup.json"
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        log.warning("litellm_model_map_unreadable", path=str(path), error=repr(exc))
        return {}
    return {
        name.lower(): entry["max_input_tokens"]
        for name, entry in data.items()
        if isinstance(entry, dict) and isinstance(entry.get("max_input_tokens"), int)
    }


def litellm_window(model: str) -> int | None:
    """max_input_tokens from litellm's bundled model map (read once, without importing litellm)."""
    windows = _litellm_windows()
    name = model.lower()
    found = windows.get(name)
    if found is None and "/" in name:
        found = windows.get(name.split("/", 1)[1])  # "openai/gpt-4o" → "gpt-4o"
    return found


def warm_up() -> None:
    """Read litellm's model map now (≈0.3–1 s), at start-up rather than on the first request."""
    litellm_window("")


def window_for(model: str, options: WindowOptions) -> Window:
    """Window of a model not served by Ollama: config, else litellm's map, else the default (which the
    proxy replaces with what the server reports, when it does: ``proxy.server_window``)."""
    tokens = configured_window(model, options)
    if tokens is not None:
        return Window(tokens, "config")
    tokens = litellm_window(model)
    if tokens is not None:
        return Window(tokens, "litellm")
    return Window(options.context_window, "default")


def trained_context_length(show: Mapping[str, Any] | None) -> int | None:
    """`model_info["<architecture>.context_length"]` from an /api/show body."""
    info = (show or {}).get("model_info")
    if not isinstance(info, Mapping):
        return None
    value = info.get(f"{info.get('general.architecture')}.context_length")
    return value if isinstance(value, int) and value > 0 else None


class OllamaWindows:
    """Windows of Ollama models; never litellm's map (it knows no tags, and lists llama3.1 at 8192)."""

    def __init__(self, show: ShowModel, window: WindowOptions, ollama: OllamaOptions) -> None:
        self._show = show
        self.window_options = window
        self.options = ollama
        self._trained: dict[str, int | None] = {}
        self._failed: dict[str, float] = {}
        """Model → monotonic time its /api/show last failed."""

    async def context_length(self, model: str) -> int | None:
        """The model's trained context length, fetched once per model (a failed fetch is retried
        after ollama.show_retry_s)."""
        if model in self._trained:
            return self._trained[model]
        failed = self._failed.get(model)
        if failed is not None and time.monotonic() - failed < self.options.show_retry_s:
            return None
        try:
            body = await self._show(model)
        except Exception as exc:  # noqa: BLE001 — fail open: the window falls back to a default
            log.warning("ollama_show_failed", model=model, error=repr(exc))
            body = None
        if body is None:
            self._remember(self._failed, model, time.monotonic())
            return None
        self._failed.pop(model, None)
        length = trained_context_length(body)
        self._remember(self._trained, model, length)
        return length

    @staticmethod
    def _remember(table: dict[str, Any], model: str, value: Any) -> None:
        """Store value, forgetting everything once the table holds MODELS_MAX models (names come from clients)."""
        if len(table) >= MODELS_MAX:
            table.clear()
        table[model] = value

    async def window_for(self, model: str, body: Mapping[str, Any], api: OllamaApi) -> Window:
        """Config, else the request's options.num_ctx, else (native APIs) min(trained length,
        max_num_ctx), else (/v1) the server's default context."""
        tokens = configured_window(model, self.window_options)
        if tokens is not None:
            return Window(tokens, "config")
        options = body.get("options")
        num_ctx = options.get("num_ctx") if isinstance(options, Mapping) else None
        if isinstance(num_ctx, int) and num_ctx > 0:
            return Window(num_ctx, "request")
        if api == "openai":
            return Window(self.options.default_context, "server_default")
        trained = await self.context_length(model)
        if trained is not None:
            return Window(min(trained, self.options.max_num_ctx), "model_info")
        return Window(min(self.window_options.context_window, self.options.max_num_ctx), "default")


def requested_output_tokens(body: Mapping[str, Any]) -> int | None:
    """The answer size the client asked for: max_tokens, max_completion_tokens or options.num_predict."""
    options = body.get("options")
    candidates = [body.get("max_tokens"), body.get("max_completion_tokens")]
    if isinstance(options, Mapping):
        candidates.append(options.get("num_predict"))
    values = [v for v in candidates if isinstance(v, int) and not isinstance(v, bool) and v > 0]
    return max(values) if values else None


def reserve_for(window: int, requested: int | None, options: WindowOptions) -> int:
    """max(client's answer size, reserve_ratio × window, reserve_min_tokens), at most half the window
    (a client asking for an answer as big as the window would otherwise leave no room for a prompt)."""
    return min(_wanted_reserve(window, requested, options), window // 2)


def _wanted_reserve(window: int, requested: int | None, options: WindowOptions) -> int:
    return max(requested or 0, int(options.reserve_ratio * window), options.reserve_min_tokens)


def budget_for(window: int, requested: int | None, options: WindowOptions) -> Budget:
    """The window with its reserve."""
    return Budget(window, reserve_for(window, requested, options))


def num_ctx_for(prompt_tokens: int, requested: int | None, cap: int, current: int | None, options: WindowOptions) -> int:
    """The smallest ladder step that holds the prompt plus its reserve at that step, capped at `cap`
    (the model's window), and never below `current` (the num_ctx the model runs with while in use): a
    changed num_ctx makes Ollama reload the model."""
    step = LADDER_START
    chosen = cap
    while step < cap:
        if prompt_tokens + _wanted_reserve(step, requested, options) <= step:
            chosen = step
            break
        step *= 2
    return max(chosen, current or 0)


def truncation_suspected(prompt_tokens: int, num_ctx: int | None) -> bool:
    """Ollama silently drops the front of a prompt longer than the num_ctx in force."""
    return num_ctx is not None and prompt_tokens > num_ctx
