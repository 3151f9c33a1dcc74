"""Windows learnt from the server's own refusals: the limit and the count a "prompt too long" answer states.

llama-cpp-python, LM Studio and many OpenAI-compatible servers report no window anywhere, so an unconfigured model
gets a default far above what the server runs it with, and each refusal used to cost a round trip. A refusal states the
limit (and usually the server's count of what was sent): the limit is remembered per (upstream, model) as the model's
window (``X-Ruyi-Window-Source: learnt``, used when below every other source), the count calibrates Ruyi's own, and the
request is retried once within it. The phrases, by server:

- OpenAI, vLLM, llama-cpp-python, DeepSeek: "maximum context length is 2048 tokens. However, you requested 2209 tokens"
  ("… your messages resulted in N tokens", "… your request has N input tokens", "… (N in the messages, …)").
- llama.cpp's server: ``exceed_context_size_error`` with ``n_prompt_tokens`` and ``n_ctx``; "request (N tokens) exceeds
  the available context size (M tokens)".
- LM Studio: "… keep the first N tokens … the model is loaded with context length of only M tokens".
- Anthropic: "prompt is too long: N tokens > M maximum"; Gemini "input token count (N) exceeds the maximum number of
  tokens allowed (M)"; Mistral "Prompt contains N tokens … too large for model with M maximum context length"; SGLang
  "The input (N tokens) is longer than the model's context length (M tokens)"; Ollama's own message states no numbers.
- LiteLLM wraps any of these in its own message: the numbers are found inside it all the same.
"""

from __future__ import annotations

import json
import re
import threading
from typing import Any

from memory.lru import LRU

LIMIT_THEN_COUNT = (
    re.compile(
        r"maximum context length is (?P<limit>\d+) tokens?\.?\s*however,? (?:your messages resulted in|you requested|your request has|"
        r"your prompt contains at least) (?P<count>\d+)"
    ),
    re.compile(r"maximum context length is (?P<limit>\d+) tokens?.{0,80}?\((?P<count>\d+) in the messages"),
    re.compile(r"maximum context length is (?P<limit>\d+) tokens"),
)
COUNT_THEN_LIMIT = (
    re.compile(r"request \((?P<count>\d+) tokens?\) exceeds the available context size \((?P<limit>\d+) tokens?\)"),
    re.compile(r"prompt is too long: (?P<count>\d+) tokens? > (?P<limit>\d+)"),
    re.compile(r"input token count \((?P<count>\d+)\) exceeds the maximum number of tokens allowed \((?P<limit>\d+)\)"),
    re.compile(r"prompt contains (?P<count>\d+) tokens?.{0,80}?too large for model with (?P<limit>\d+) maximum context length"),
    re.compile(r"the input \((?P<count>\d+) tokens?\) is longer than the model's context length \((?P<limit>\d+) tokens?\)"),
    re.compile(r"keep the first (?P<count>\d+) tokens?.{0,200}?context length of only (?P<limit>\d+) tokens?"),
    re.compile(r"decoder prompt \(length (?P<count>\d+)\) is longer than the maximum model length of (?P<limit>\d+)"),
)
SCAN_BYTES = 16384
LIMIT_MIN = 256
"""A stated limit below this is no model's window (a misread message): not learnt."""
MODELS_MAX = 1024
"""(upstream, model) windows learnt at most (least recently learnt forgotten first)."""


def stated_limit(body: bytes) -> tuple[int, int | None] | None:
    """(the window the server stated, its count of the prompt when it said it), or None when it stated no number."""
    text = body[:SCAN_BYTES].decode("utf-8", "replace")
    try:
        data: Any = json.loads(text)
    except ValueError:
        data = None
    error = data.get("error", data) if isinstance(data, dict) else None
    if isinstance(error, dict) and isinstance(error.get("n_ctx"), int) and error["n_ctx"] >= LIMIT_MIN:  # llama.cpp's fields
        count = error.get("n_prompt_tokens")
        return error["n_ctx"], count if isinstance(count, int) else None
    lowered = " ".join(text.lower().split())
    for pattern in COUNT_THEN_LIMIT + LIMIT_THEN_COUNT:
        found = pattern.search(lowered)
        if found is not None:
            limit = int(found["limit"])
            count = int(found["count"]) if "count" in pattern.groupindex and found["count"] else None
            if limit >= LIMIT_MIN:
                return limit, count
    return None


class LearntWindows:
    """The windows servers stated, per (upstream base URL, model). Thread-safe."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._windows: LRU[tuple[str, str], int] = LRU(MODELS_MAX)

    def remember(self, upstream: str, model: str, limit: int) -> None:
        with self._lock:
            self._windows[(upstream, model)] = limit

    def get(self, upstream: str, model: str) -> int | None:
        with self._lock:
            return self._windows.peek((upstream, model))
