"""The optional LLM summarizer: litellm, bounded concurrency, a timeout, a circuit breaker per session, answers checked."""

from __future__ import annotations

import asyncio
import os
import time
from collections import Counter, OrderedDict
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import structlog

from redaction.secrets import resolve_secret
from summaries.options import SummarizerOptions
from summaries.prompt import acceptable, messages_for

log = structlog.get_logger(__name__)
SAME = "same"
BREAKERS_MAX = 10_000


@dataclass(frozen=True)
class Target:
    """Where one summary request goes (for ``same``: the session's own route)."""

    model: str
    api_base: str | None
    api_key: str | None


Complete = Callable[[Target, list[dict[str, str]], int, float], Any]
"""(target, messages, max_tokens, timeout) → awaitable answer text (litellm's by default)."""


class LLMSummarizer:
    """Summaries by an LLM, never on the request path: at most ``concurrency`` at once, each within the timeout;
    a session whose calls keep failing is left to the extractive summarizer for a while."""

    def __init__(self, options: SummarizerOptions, complete: Complete | None = None, clock: Callable[[], float] = time.monotonic) -> None:
        self.options = options
        self._complete = complete or litellm_complete
        self._clock = clock
        self._slots = asyncio.Semaphore(options.concurrency)
        self._failures: OrderedDict[tuple[str, str], tuple[int, float]] = OrderedDict()
        """Each session's breaker, least recently failed first, at most BREAKERS_MAX (not ``memory.lru.LRU``: summaries/
        sits below memory/ and never imports it)."""
        self.calls: list[int] = []
        """Prompt sizes (characters / 4) of the calls made, for a replay to price them like requests."""
        self.outcomes: Counter[str] = Counter()
        """What each call came to since start-up (``ok``, ``timeout``, ``error``, ``unusable``, ``breaker_open``): /metrics."""

    def target(self, model: str | None, route_url: str | None, route_kind: str | None, key: str | None) -> Target | None:
        """Where a session's summaries go: the configured model, or with ``same`` the session's own (None: no LLM)."""
        o = self.options
        if o.model is None:
            return None
        if o.model == SAME:
            if not model or not (route_url or o.api_base):
                return None
            prefix = "ollama_chat" if route_kind == "ollama" else "openai"
            return Target(f"{prefix}/{model}", o.api_base or route_url, resolve_secret(o.api_key) or key)
        return Target(o.model, o.api_base, resolve_secret(o.api_key))

    def open_breakers(self) -> int:
        """Sessions whose breaker is open now (their LLM summaries paused): the breakers' state, for /metrics."""
        return sum(1 for key in list(self._failures) if self.is_open(key))

    def is_open(self, key: tuple[str, str]) -> bool:
        """Whether the session's breaker is open (its LLM summaries paused after repeated failures)."""
        failures, since = self._failures.get(key, (0, 0.0))
        return failures >= self.options.failures_to_open and self._clock() - since < self.options.open_seconds

    async def summarize(
        self,
        key: tuple[str, str],
        target: Target,
        trace: Sequence[Mapping[str, Any]],
        first: int,
        previous: str | None,
        budget: int,
        chinese: bool,
        count: Callable[[str], int],
    ) -> tuple[str | None, str]:
        """The LLM's summary, or None and why not (``breaker_open``, ``timeout``, ``error``, ``unusable``)."""
        if self.is_open(key):
            self.outcomes["breaker_open"] += 1
            return None, "breaker_open"
        messages = messages_for(trace, first, previous, budget, chinese)
        self.calls.append(sum(len(m["content"]) for m in messages) // 4)
        async with self._slots:
            try:
                answer = await asyncio.wait_for(
                    self._complete(target, messages, min(self.options.max_tokens, budget * 2), self.options.timeout_seconds),
                    self.options.timeout_seconds,
                )
            except TimeoutError:
                return self._failed(key, "timeout")
            except Exception:  # any failure of the model leaves things as they were
                log.warning("summarizer_failed", model=target.model, exc_info=True)
                return self._failed(key, "error")
        if not acceptable(answer, budget, count):
            return self._failed(key, "unusable")
        self._failures.pop(key, None)
        self.outcomes["ok"] += 1
        return answer.strip(), "ok"

    async def ask(self, key: tuple[str, str], target: Target, messages: list[dict[str, str]], max_tokens: int) -> tuple[str | None, str]:
        """Any other prompt (a notebook's compaction) under the same slots, timeout and breaker: the answer, unchecked,
        or None and why not. A caller that finds the answer unusable says so with ``unusable``."""
        if self.is_open(key):
            self.outcomes["breaker_open"] += 1
            return None, "breaker_open"
        async with self._slots:
            try:
                answer = await asyncio.wait_for(
                    self._complete(target, messages, max_tokens, self.options.timeout_seconds), self.options.timeout_seconds
                )
            except TimeoutError:
                return self._failed(key, "timeout")
            except Exception:  # any failure of the model leaves things as they were
                log.warning("summarizer_failed", model=target.model, exc_info=True)
                return self._failed(key, "error")
        self.outcomes["ok"] += 1
        return answer, "ok"

    def unusable(self, key: tuple[str, str]) -> None:
        """An answer of ``ask`` its caller could not use: a failure like any other (its ``ok`` taken back)."""
        self.outcomes["ok"] -= 1
        self._failed(key, "unusable")

    def succeeded(self, key: tuple[str, str]) -> None:
        self._failures.pop(key, None)

    def _failed(self, key: tuple[str, str], why: str) -> tuple[None, str]:
        self.outcomes[why] += 1
        failures, _ = self._failures.pop(key, (0, 0.0))
        self._failures[key] = (failures + 1, self._clock())
        while len(self._failures) > BREAKERS_MAX:
            self._failures.popitem(last=False)
        log.info("summarizer_fell_back", reason=why, failures=failures + 1)
        return None, why


async def litellm_complete(target: Target, messages: list[dict[str, str]], max_tokens: int, timeout: float) -> str | None:
    """One chat completion through litellm (its bundled model map, no network fetch at import)."""
    os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
    import litellm

    response = await litellm.acompletion(
        model=target.model,
        messages=messages,
        api_base=target.api_base,
        api_key=target.api_key,
        max_tokens=max_tokens,
        temperature=0,
        timeout=timeout,
        num_retries=0,
    )
    content = response.choices[0].message.content
    return content if isinstance(content, str) else None
