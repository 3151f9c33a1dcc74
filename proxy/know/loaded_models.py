"""Ollama models as Ruyi loaded them: the num_ctx each (upstream, model) runs with, and until when it stays loaded.

Ollama reloads a model whenever a request asks for another num_ctx. Two sessions on one model (an agent
and its sub-agent) at different ladder steps would make it reload on every switch, so the step is kept per
(upstream, model): it rises when any session needs more and never falls while the model is in use, that is
until its keep-alive has run out after the last answer (a request's ``keep_alive``, else
``ollama.keep_alive_s``, Ollama's 5 minutes unless the server sets OLLAMA_KEEP_ALIVE). After that Ollama has
unloaded it and a smaller step costs nothing more than the load it needs anyway.
"""

from __future__ import annotations

import math
import re
import time
from dataclasses import dataclass
from typing import Any

from memory.lru import LRU

ModelKey = tuple[str, str]
"""(upstream base URL, model name)."""
MODELS_MAX = 1024
"""Models remembered (least recently used forgotten first: names come from clients)."""

_DURATION = re.compile(r"(\d+(?:\.\d*)?|\.\d+)(ns|us|µs|ms|s|m|h)")
_UNIT_SECONDS = {"ns": 1e-9, "us": 1e-6, "µs": 1e-6, "ms": 1e-3, "s": 1.0, "m": 60.0, "h": 3600.0}


def keep_alive_seconds(value: Any, default: float) -> float:
    """How long a request's ``keep_alive`` keeps its model loaded after the answer, as Ollama reads it: a
    number of seconds or a Go duration ("5m", "1h30m"); negative means forever (inf). Absent or unreadable:
    ``default`` (negative: forever)."""
    seconds = _parse_keep_alive(value)
    if seconds is None:
        seconds = default
    return math.inf if seconds < 0 else seconds


def _parse_keep_alive(value: Any) -> float | None:
    if isinstance(value, bool):
        return None
    if isinstance(value, (int, float)):
        return float(value)
    if not isinstance(value, str) or not value.strip():
        return None
    text = value.strip()
    sign = -1.0 if text.startswith("-") else 1.0
    text = text.lstrip("+-")
    try:
        return sign * float(text)  # "300": seconds
    except ValueError:
        pass
    parts = _DURATION.findall(text)
    if not parts or "".join(n + u for n, u in parts) != text:
        return None
    return sign * sum(float(n) * _UNIT_SECONDS[u] for n, u in parts)


@dataclass(slots=True)
class Loaded:
    """One model as last sent: its num_ctx and the monotonic time its keep-alive runs out."""

    num_ctx: int
    until: float


class LoadedModels:
    """The num_ctx each Ollama model was last sent with, per (upstream, model), while it is in use."""

    def __init__(self, max_models: int = MODELS_MAX) -> None:
        self._models: LRU[ModelKey, Loaded] = LRU(max_models)

    def num_ctx(self, key: ModelKey) -> int | None:
        """The num_ctx the model runs with while it is in use (loaded by a request whose keep-alive has not
        run out); None when no request is in flight or waiting out its keep-alive."""
        loaded = self._models.peek(key)
        if loaded is None or time.monotonic() >= loaded.until:
            return None
        return loaded.num_ctx

    def sent(self, key: ModelKey, num_ctx: int, keep_alive_s: float) -> None:
        """A request goes to the model with this num_ctx: the model runs with it at least until
        ``keep_alive_s`` from now (``answered`` extends that from the answer's end)."""
        now = time.monotonic()
        loaded = self._models.peek(key)
        if loaded is not None and loaded.num_ctx == num_ctx:
            loaded.until = max(loaded.until, now + keep_alive_s)
        else:  # a first load, or a reload at another size
            loaded = Loaded(num_ctx, now + keep_alive_s)
        self._models[key] = loaded  # the most recent now

    def answered(self, key: ModelKey, keep_alive_s: float) -> None:
        """The answer has ended: the keep-alive counts from now."""
        loaded = self._models.peek(key)
        if loaded is not None:
            loaded.until = max(loaded.until, time.monotonic() + keep_alive_s)
