"""PurgeErrors: the input of a call that failed some turns ago is replaced; its error message stays."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar

from strategies.base import Replacement, StrategyContext, check_int
from strategies.conversation import analyze
from strategies.placeholder import replace_arguments


class PurgeErrors:
    """A failed call (non-zero exit code, traceback, is_error, an "Error:" first line) older than
    turns_before_purge turns keeps its result, the error, but loses its input arguments: the model
    learns from the error; the long command or file content that caused it is rarely needed again.
    """

    name: ClassVar[str] = "purge_errors"

    @dataclass(frozen=True)
    class Options:
        turns_before_purge: int = 4
        """int, default 4: a failed call's input is replaced once this many turns have followed it."""

        def __post_init__(self) -> None:
            check_int("turns_before_purge", self.turns_before_purge, minimum=0)

    def __init__(self, options: PurgeErrors.Options | None = None) -> None:
        self.options = options or PurgeErrors.Options()

    def propose(self, messages: list[dict[str, Any]], ctx: StrategyContext) -> list[Replacement]:
        conversation = analyze(messages, ctx)
        proposals: list[Replacement] = []
        for call in conversation.calls:
            if not call.is_error or conversation.turns_after(call.index) < self.options.turns_before_purge:
                continue
            wrote = call.action.kind in {"write", "edit"} and call.action.path
            how = "read the file if you need what it wrote" if wrote else "write it again if you retry"
            replacement = replace_arguments(
                conversation, call, ctx, self.name, "the call failed; its error is kept in the result", how)
            if replacement is not None:
                proposals.append(replacement)
        return proposals
