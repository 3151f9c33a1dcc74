"""Calibration of token estimates against what upstreams report, and extraction of their usage."""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import structlog

from memory.lru import LRU
from proxy.know.options import CalibrationOptions

log = structlog.get_logger(__name__)


@dataclass(frozen=True, slots=True)
class UpstreamUsage:
    """Prompt tokens as an upstream counted them for one request."""

    prompt_tokens: int | None
    """The whole prompt, cached or not (None when not reported)."""
    cached_tokens: int | None
    """Served from the provider's prompt cache: the real measure of cache friendliness."""
    completion_tokens: int | None = None


def _int(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) and value >= 0 else None


def usage_from_openai(usage: Mapping[str, Any] | None) -> UpstreamUsage:
    """OpenAI-style `usage`: prompt_tokens; cached from prompt_tokens_details.cached_tokens, DeepSeek's
    prompt_cache_hit_tokens, or cache_read_input_tokens (Anthropic through an OpenAI-compatible route)."""
    if not isinstance(usage, Mapping):
        return UpstreamUsage(None, None)
    details = usage.get("prompt_tokens_details")
    if "input_tokens" in usage and "prompt_tokens" not in usage:  # the Responses API's names
        details = usage.get("input_tokens_details")
        usage = {**usage, "prompt_tokens": usage.get("input_tokens"), "completion_tokens": usage.get("output_tokens")}
    cached = _int(details.get("cached_tokens")) if isinstance(details, Mapping) else None
    if cached is None:
        cached = _int(usage.get("prompt_cache_hit_tokens"))
    if cached is None:
        cached = _int(usage.get("cache_read_input_tokens"))
    return UpstreamUsage(_int(usage.get("prompt_tokens")), cached, _int(usage.get("completion_tokens")))


def usage_from_anthropic(usage: Mapping[str, Any] | None) -> UpstreamUsage:
    """Anthropic `usage`: the prompt is input + cache_creation_input + cache_read_input tokens."""
    if not isinstance(usage, Mapping):
        return UpstreamUsage(None, None)
    parts = [_int(usage.get(k)) for k in ("input_tokens", "cache_creation_input_tokens", "cache_read_input_tokens")]
    prompt = sum(p or 0 for p in parts) if parts[0] is not None else None
    return UpstreamUsage(prompt, parts[2], _int(usage.get("output_tokens")))


def usage_from_ollama(final: Mapping[str, Any] | None) -> UpstreamUsage:
    """Ollama's final (`done: true`) object: prompt_eval_count, which may be absent or partial — pass
    it to `Calibration.observe(..., partial=True)`. Ollama reports no cached count."""
    if not isinstance(final, Mapping):
        return UpstreamUsage(None, None)
    return UpstreamUsage(_int(final.get("prompt_eval_count")), None, _int(final.get("eval_count")))


_FAMILY = re.compile(r"[a-z]+(?:-[a-z]+)*")


def family_of(model: str) -> str:
    """A model's family, its name up to the first version number: ``claude-opus`` for ``claude-opus-4-5``,
    ``claude`` for ``claude-3-5-sonnet-20241022``, ``gpt`` for ``gpt-4o`` (a provider prefix dropped)."""
    found = _FAMILY.match(model.rsplit("/", 1)[-1].lower())
    return "family:" + (found.group(0) if found else model)


class Calibration:
    """Per-model ratio of reported to estimated prompt tokens, applied to later estimates; a model not yet observed
    starts from its family's latest ratio (Claude's tokenizer is not public: every Claude model counts with a
    stand-in encoding, off by about the same factor for one family)."""

    def __init__(self, options: CalibrationOptions | None = None) -> None:
        self.options = options or CalibrationOptions()
        self._ratios: LRU[str, float] = LRU(self.options.max_models)
        self._families: LRU[str, float] = LRU(self.options.max_models)
        """Per family, the ratio of its latest observed model."""

    def ratio(self, model: str) -> float:
        """The model's current ratio, else its family's, else 1.0."""
        found = self._ratios.peek(model)
        return found if found is not None else self._families.peek(family_of(model), 1.0)

    def apply(self, model: str, estimate: int) -> int:
        """An estimate corrected by the model's ratio."""
        return round(estimate * self.ratio(model))

    def observe(self, model: str, estimate: int, reported: int | None, *, partial: bool = False) -> float | None:
        """Fold in one request: `estimate` is our uncalibrated count of the prompt actually sent,
        `reported` the upstream's. `partial` (Ollama routes, native or /v1): the report may omit the
        KV-cached part, so it counts only when ≥ ollama_min_fraction of the estimate.
        Returns the new ratio, or None when the observation was not used."""
        if reported is None or reported <= 0 or estimate <= 0:
            return None
        if partial and reported < self.options.ollama_min_fraction * estimate:
            return None
        observed = reported / estimate
        if not self.options.min_ratio <= observed <= self.options.max_ratio:
            log.debug("calibration_outlier_ignored", model=model, estimate=estimate, reported=reported)  # common on short prompts
            return None
        previous = self._ratios.peek(model)
        w = self.options.weight
        ratio = observed if previous is None else (1 - w) * previous + w * observed
        self._ratios[model] = ratio
        self._families[family_of(model)] = ratio
        return ratio

    def restore(self, ratios: list[tuple[str, float]]) -> None:
        """Take back ratios kept by the store (least recently observed first; a family takes its latest model's)."""
        for model, ratio in ratios[-self.options.max_models :]:
            self._ratios[model] = ratio
            self._families[family_of(model)] = ratio

    def ratios(self) -> dict[str, float]:
        """All current ratios per model (for status endpoints and logs)."""
        return dict(self._ratios)
