"""The summarizer's options (config ``summarizer``): a leaf the config composes."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class SummarizerOptions:
    """Who writes summaries: the deterministic extractive summarizer unless a model is named (never an LLM call the
    user did not ask for), and then always with the extractive one as the fallback."""

    model: str | None = None
    """null: extractive only. A litellm model (``openai/gpt-4o-mini``, ``ollama_chat/qwen2.5:7b``), or ``same``: the
    session's own model and route, with the client's key held in memory only, never stored."""
    api_base: str | None = None
    """The model's server (for ``same``: the route's URL)."""
    api_key: str | None = None
    """Key for the model's server: literal or ``env:NAME`` (for ``same``: the route's key, else the client's)."""
    timeout_seconds: float = 30.0
    """A summary not back by then is abandoned: the extractive one is used."""
    concurrency: int = 2
    """Summarizer calls at once, across all sessions (one local GPU should not serve a queue of them)."""
    failures_to_open: int = 3
    """After this many failures in a row for a session (no answer, an error, an unusable answer), stop asking …"""
    open_seconds: float = 300.0
    """… for this long, and use the extractive summary meanwhile."""
    max_tokens: int = 1200
    """The most a summary may be asked to hold (the budget given is the archive's ``summary_tokens``)."""
    every_tokens: int = 2000
    """Once an archive is planned, the summary is brought up to date when this many tokens of new messages have come
    since the one kept (the first at once); what an archive replaces past the kept summary is added in extractive form.
    0: after every request (one call per request: several times the cost for little more)."""

    def check(self) -> None:
        if self.timeout_seconds <= 0 or self.concurrency < 1 or self.failures_to_open < 1 or self.open_seconds < 0 or self.max_tokens < 100:
            raise ValueError("timeout_seconds must be positive, concurrency and failures_to_open at least 1, open_seconds >= 0, max_tokens >= 100")
        if self.every_tokens < 0:
            raise ValueError("every_tokens must be >= 0")
        if self.api_key is not None and self.api_key.startswith("env:") and not self.api_key[4:]:
            raise ValueError("api_key: 'env:' needs a variable name, as in env:OPENAI_API_KEY")
