"""The rewrite pipeline: an ordered list of steps over canonical messages, each one failing open."""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from typing import Any, Protocol

import structlog

from proxy.context import RequestContext

log = structlog.get_logger(__name__)
Messages = list[dict[str, Any]]


class Step(Protocol):
    """One rewrite step: returns the messages to send (the same list when it changes nothing)."""

    name: str

    def apply(self, messages: Messages, ctx: RequestContext) -> Messages: ...


class Pipeline:
    """Runs the steps in order; a step that raises is skipped, logged and counted, never fatal."""

    def __init__(self, steps: Sequence[Step] = ()) -> None:
        self.steps = tuple(steps)
        self.failures: Counter[str] = Counter()
        self.refused: Counter[str] = Counter()
        """Requests refused rather than rewritten, by why (``unfit``: nothing could make them fit their window)."""

    def run(self, messages: Messages, ctx: RequestContext) -> Messages:
        for step in self.steps:
            try:
                result = step.apply(messages, ctx)
                if not isinstance(result, list):
                    raise TypeError(f"step returned {type(result).__name__}, not a list of messages")
            except Exception:  # fail open: Ruyi must never be why a request fails
                self.failures[step.name] += 1
                ctx.facts.setdefault("failed_steps", []).append(step.name)
                log.warning("step_failed", step=step.name, request_id=ctx.request_id, exc_info=True)
                continue
            messages = result
        return messages
