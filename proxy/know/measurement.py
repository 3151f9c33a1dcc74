"""What measuring a request found: the facts about it that every later step reads."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from memory.session import How, Session
from proxy.know.loaded_models import ModelKey
from proxy.know.tiers import Tier
from proxy.know.window import Budget, Window
from proxy.offload import Turn


@dataclass
class Measurement:
    """The facts about one request that every later step reads."""

    session: Session
    how: How
    new_messages: int
    links: tuple[str, ...]
    """Chain links of the request's messages (decisions are keyed by them)."""
    shared: int
    """Leading messages the session had already seen: the rest are new (free to rewrite)."""
    raw_tokens: int
    """Our estimate before calibration."""
    tokens: int
    """The calibrated estimate of the prompt as the client sent it."""
    window: Window
    budget: Budget
    tier: Tier
    num_ctx: int | None = None
    """For Ollama native requests, the ``num_ctx`` to send (None: leave the request's own)."""
    count_text: Callable[[str], int] | None = None
    """The model's cached counter of plain strings (for strategies)."""
    message_tokens: tuple[int, ...] = ()
    """Each message's tokens as the client sent it (what a cache miss from some message on costs)."""
    ollama_model: ModelKey | None = None
    """For Ollama native requests, the (upstream, model) whose num_ctx is kept while in use."""
    keep_alive_s: float = 0.0
    """How long the model stays loaded after this request's answer."""
    scale: float = 1.0
    """The model's calibration ratio (reported / estimated) this request was measured with."""
    turn: Turn | None = None
    """This request's turn in its session (``with m.turn:`` around its rewrite)."""
    requested: int | None = None
    """The answer's tokens the request asks for (``max_tokens``, ``num_predict``), if it says."""
    history_elsewhere: bool = False
    """Its history is at the provider (``previous_response_id``): the upstream's usage is recorded, never calibrates."""

    @property
    def usage(self) -> float:
        return self.budget.usage(self.tokens)

    def calibrated(self, raw_tokens: int) -> int:
        """One of our estimates brought to the upstream's scale, as ``tokens`` is."""
        return self.tokens if raw_tokens == self.raw_tokens else round(raw_tokens * self.scale)
