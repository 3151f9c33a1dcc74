"""What an analysis keeps for a longer request that starts with the same messages, and how it resumes there."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from conversation.actions.classify import ToolSpec
    from conversation.messages import Call
    from strategies.base import StrategyContext
    from strategies.protection import Protection

Frontier = tuple[int, int, str | None, str | None, tuple[tuple[str, tuple[str, ...]], ...]]
"""(index, calls, cwd, open file, script writes): every call before index has its result before index;
the calls made before it and the classification state there."""


@dataclass(frozen=True)
class Prefix:
    """What an analysis learned that later messages cannot change: where a longer request may resume.

    keys: each message's key from conversation.read (texts as text_key, never the texts); calls: without arguments.
    """

    keys: tuple[object, ...]
    turn_of: tuple[int, ...]
    calls: tuple[Call, ...]
    frontiers: tuple[Frontier, ...]
    always: frozenset[int]
    anchored: frozenset[int]
    tools: Mapping[str, ToolSpec]
    protection: Protection.Options
    notes: dict[Any, Any] = field(default_factory=dict, compare=False)
    """What strategies derived from the final calls (those before the last frontier), each under its own key,
    for the next request; written while this request is rewritten, read-only after."""
    inherited: tuple[dict[Any, Any], int] | None = field(default=None, compare=False)
    """The notes of the prefix this analysis resumed from, and how many of its calls it reused."""

    @property
    def final(self) -> int:
        """How many calls come before the last frontier: they and their results no longer change."""
        return self.frontiers[-1][1] if self.frontiers else 0

    def resume_point(self, keys: Sequence[object], ctx: StrategyContext) -> Frontier | None:
        """The last frontier before any message that differs from these keys (None: nothing to reuse)."""
        if self.tools is not ctx.tools or self.protection != ctx.protection:
            return None
        same = len(self.keys)
        if tuple(keys[:same]) != self.keys:
            same = next((i for i, (a, b) in enumerate(zip(keys, self.keys)) if a != b), min(same, len(keys)))
        return next((f for f in reversed(self.frontiers) if 0 < f[0] <= same), None)


def rearm(calls: Sequence[Call], messages: list[dict[str, Any]]) -> list[Call]:
    """The calls of a Prefix with their arguments read again from the messages (the keys matched, so each
    message holds the same tool calls)."""
    out: list[Call] = []
    previous, slot = -1, 0
    for c in calls:
        if c.call_id is None:
            out.append(c)
            continue
        tool_calls = messages[c.index]["tool_calls"]
        slot = slot + 1 if c.index == previous else 0
        previous = c.index
        while not (isinstance(tool_calls[slot], dict) and isinstance(tool_calls[slot].get("id"), str)):
            slot += 1
        arguments = (tool_calls[slot].get("function") or {}).get("arguments")
        out.append(with_arguments(c, arguments if isinstance(arguments, str) else ""))
    return out


def with_arguments(call: Call, arguments: str) -> Call:
    """A copy of call with other arguments, its fields copied as they are (three times faster than __init__,
    and every resumed call is copied on every request)."""
    copied = object.__new__(type(call))
    copied.__dict__.update(call.__dict__, arguments=arguments)
    return copied
