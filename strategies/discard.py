"""Discard: when a batch must free more than redundancy gives, the oldest tool outputs go, oldest first."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar

from conversation.messages import Call
from strategies.base import Replacement, StrategyContext, check_int
from strategies.conversation import analyze
from strategies.placeholder import replace_output


class Discard:
    """Every tool output outside the protected turns, oldest first, as a candidate to clear.

    Unlike the other strategies nothing here is redundant: the pruner takes these only in a batch at
    the prune tier (or after an overflow error), only after every other strategy's proposals, and
    only as many, oldest first, as the batch needs to free clear_at_least (over the usable window:
    as many as it takes to get under the prune tier, all of them if need be). The seed's Discard is the
    model marking what it no longer needs; a proxy cannot ask, so age stands in for it: what the
    agent looked at longest ago is what it is least likely to need verbatim, and the placeholder says
    how to get it back. Protected turns, anchors, protected paths and tools are never touched.
    """

    name: ClassVar[str] = "discard"

    @dataclass(frozen=True)
    class Options:
        min_tokens: int = 100
        """int, default 100: outputs shorter than this are never discarded (their placeholder would cost as much)."""

        def __post_init__(self) -> None:
            check_int("min_tokens", self.min_tokens, minimum=0)

    def __init__(self, options: Discard.Options | None = None) -> None:
        self.options = options or Discard.Options()

    def propose(self, messages: list[dict[str, Any]], ctx: StrategyContext) -> list[Replacement]:
        conversation = analyze(messages, ctx)
        proposals: list[Replacement] = []
        for call in conversation.calls:
            output = conversation.output(call)
            if not output or ctx.count_tokens(output) < self.options.min_tokens:
                continue
            replacement = replace_output(
                conversation, call, ctx, self.name, "the context was nearly full, so the oldest outputs were cleared", _how(call)
            )
            if replacement is not None:
                proposals.append(replacement)
        return proposals


def _how(call: Call) -> str:
    """How to get the output back without repeating what the call did to the files."""
    action = call.action
    if action.kind in {"read", "search", "list"} and not action.writes:
        return "run it again if you need it"
    if action.kind in {"write", "edit"} or action.writes:
        return "its changes stand; read the files if you need them"
    return "its effects stand; run it again only if that is safe"
