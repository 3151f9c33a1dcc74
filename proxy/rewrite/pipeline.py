"""The rewrite pipeline: steps over canonical messages, each one failing open."""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterator, Sequence
from dataclasses import replace
from functools import partial
from typing import Any, Protocol, TypeVar, runtime_checkable

import structlog

from proxy.context import RequestContext
from proxy.rewrite.results import Rewritten

log = structlog.get_logger(__name__)
Messages = list[dict[str, Any]]
T = TypeVar("T")


class Guard(Protocol):
    """Runs one step: its result, or ``fallback`` when it raises (then skipped, logged and counted, never fatal)."""

    def __call__(self, name: str, work: Callable[[], T], fallback: T, /) -> T: ...


class Step(Protocol):
    """A plain step: returns the messages to send (the same list when it changes nothing), nothing else."""

    name: str

    def apply(self, messages: Messages, ctx: RequestContext) -> Messages: ...


@runtime_checkable
class Story(Protocol):
    """Steps that hand each other typed results (``proxy.rewrite.steps.Rewrite``): runs them, each under ``guard``."""

    name: str

    def run(self, messages: Messages, ctx: RequestContext, guard: Guard) -> Rewritten: ...


PipelineStep = Step | Story
"""What a pipeline runs: a plain step, or a story of steps handing each other their results (the default one)."""


class Pipeline:
    """Runs the steps in order; a step that raises is skipped, logged and counted, never fatal."""

    def __init__(self, steps: Sequence[PipelineStep] = ()) -> None:
        self.steps = tuple(steps)
        self.failures: Counter[str] = Counter()
        self.refused: Counter[str] = Counter()
        """Requests refused rather than rewritten, by why (``unfit``: nothing could make them fit their window)."""

    def run(self, messages: Messages, ctx: RequestContext) -> Rewritten:
        def guard(name: str, work: Callable[[], T], fallback: T) -> T:
            try:
                return work()
            except Exception:  # fail open: Ruyi must never be why a request fails
                self.failures[name] += 1
                ctx.facts.setdefault("failed_steps", []).append(name)
                log.warning("step_failed", step=name, request_id=ctx.request_id, exc_info=True)
                return fallback

        result = Rewritten(messages)
        for step in self.steps:
            if isinstance(step, Story):
                result = guard(step.name, partial(step.run, result.messages, ctx, guard), result)
            else:
                out = guard(step.name, partial(_applied, step, result.messages, ctx), None)
                if out is not None:
                    result = replace(result, messages=out)
        return result

    def each_step(self) -> Iterator[Any]:
        """Every step in order, a story's own steps too (``steps``): what the token count and the status look up."""
        for step in self.steps:
            yield step
            yield from getattr(step, "steps", ())


def _applied(step: Step, given: Messages, ctx: RequestContext) -> Messages:
    messages = step.apply(given, ctx)
    if not isinstance(messages, list):
        raise TypeError(f"step returned {type(messages).__name__}, not a list of messages")
    return messages
