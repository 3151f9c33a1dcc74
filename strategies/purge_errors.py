"""PurgeErrors: a call that failed some turns ago loses its input, and its long output keeps only the error."""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any, ClassVar

from conversation.messages import Call, text_key
from redaction.redact import redact
from strategies.base import CONTENT, Replacement, StrategyContext, check_int
from strategies.conversation import Conversation, analyze
from strategies.placeholder import (
    WRAPPER_LINE,
    Built,
    first_line,
    placeholder,
    ref_id,
    remembered,
    replace_arguments,
)

_EXCEPTION = re.compile(r"^\s*[\w.]*(?:Error|Exception|Exit|Interrupt|Failure)\b:?")
_LINE_CHARS = 300


def error_lines(text: str, keep: int) -> list[str]:
    """The lines that say what went wrong: the last `keep` non-empty ones (redacted, then clipped), and the last
    exception line (`NameError: x`) when it comes before them. Wrapper lines (WRAPPER_LINE) are skipped."""
    lines = [ln.rstrip() for ln in text.split("\n") if ln.strip() and not WRAPPER_LINE.match(ln)]
    tail = lines[-keep:] if keep else []
    head = lines[: len(lines) - len(tail)]
    exception = next((ln for ln in reversed(head) if _EXCEPTION.match(ln)), None)
    kept = [redact(ln) for ln in ([exception] if exception is not None else []) + tail]
    return [ln if len(ln) <= _LINE_CHARS else ln[: _LINE_CHARS - 1] + "…" for ln in kept]


class PurgeErrors:
    """A failed call (non-zero exit code, traceback, is_error, an "Error:" first line) older than
    turns_before_purge turns loses its input arguments, and its output is cut to the lines that say
    what went wrong: the model learns from the error; the long command or file content that caused
    it, and the pages of output before the error, are rarely needed again.
    """

    name: ClassVar[str] = "purge_errors"

    @dataclass(frozen=True)
    class Options:
        turns_before_purge: int = 4
        """int, default 4: a failed call is purged once this many turns have followed it."""

        keep_error_lines: int = 5
        """int, default 5: lines of a failed call's output kept (its last ones, and the exception line)."""

        purge_outputs: bool = True
        """bool, default true: also cut a failed call's output to its error lines (false: inputs only)."""

        def __post_init__(self) -> None:
            check_int("turns_before_purge", self.turns_before_purge, minimum=0)
            check_int("keep_error_lines", self.keep_error_lines, minimum=1)

    def __init__(self, options: PurgeErrors.Options | None = None) -> None:
        self.options = options or PurgeErrors.Options()

    def propose(self, messages: list[dict[str, Any]], ctx: StrategyContext) -> list[Replacement]:
        conversation = analyze(messages, ctx)
        proposals: list[Replacement | None] = []
        for call in conversation.calls:
            if not call.is_error or conversation.turns_after(call.index) < self.options.turns_before_purge:
                continue
            wrote = call.action.kind in {"write", "edit"} and call.action.path
            how = "read the file if you need what it wrote" if wrote else "write it again if you retry"
            proposals.append(replace_arguments(conversation, call, ctx, self.name, "the call failed; its error is kept in the result", how))
            if self.options.purge_outputs:
                proposals.append(self._cut_output(conversation, call, ctx))
        return [p for p in proposals if p is not None]

    def _cut_output(self, conversation: Conversation, call: Call, ctx: StrategyContext) -> Replacement | None:
        """The failed call's output as a placeholder followed by its error lines, if that saves enough."""
        if call.result is None or call.result in conversation.protected:
            return None
        original = conversation.texts[call.result]
        if not original:
            return None
        identity, label, keep = call.call_id or f"#{call.result}", call.action.label, self.options.keep_error_lines
        why = "the call failed; the lines that say why are kept below"

        def build() -> Built | None:
            before = ctx.count_tokens(original)
            if before < 2 * ctx.min_saving_tokens:
                return None
            ref = ref_id(identity, CONTENT, original)
            head = placeholder(
                "failed output", label, before, why, "run it again for the whole output", ref, first_line(original, label), ctx.recall_tool
            )
            text = "\n".join([head, *error_lines(original, keep)])
            after = ctx.count_tokens(text)
            return (text, before, after, ref) if before - after >= ctx.min_saving_tokens else None

        built = remembered(ctx, ("failed output", identity, text_key(original), label, keep), build)
        if built is None:
            return None
        text, before, after, ref = built
        return Replacement(call.result, CONTENT, text, original, before, after, ref, self.name, why)
