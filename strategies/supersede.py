"""Supersede: a write's input once the file is read again, and a read's output once the file is edited."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar

from strategies.base import Replacement, StrategyContext
from strategies.conversation import analyze
from strategies.placeholder import replace_arguments, replace_output


class Supersede:
    """Two rules about one path, both only ever replacing the older of two calls.

    writes: a write or edit of a path followed later by a successful read of it: the write's input
    arguments are replaced (the later read shows the file as it is).
    stale reads: a read of a path (or an editor view of it) followed later by a successful write or
    edit of that path: the read's output shows a file that no longer exists; replace it. An error
    output is never a view: its message stays (purge_errors' rule).
    """

    name: ClassVar[str] = "supersede"

    @dataclass(frozen=True)
    class Options:
        writes: bool = True
        """bool, default true: replace a write's or edit's input once the file has been read again."""

        stale_reads: bool = True
        """bool, default true: replace a read's output once the file has been successfully edited."""

    def __init__(self, options: Supersede.Options | None = None) -> None:
        self.options = options or Supersede.Options()

    def propose(self, messages: list[dict[str, Any]], ctx: StrategyContext) -> list[Replacement]:
        conversation = analyze(messages, ctx)
        last_read: dict[str, int] = {}
        last_edit: dict[str, int] = {}
        for call in conversation.calls:
            action = call.action
            if call.is_error or call.result is None:
                continue
            if action.kind == "read" and action.path:
                last_read[action.path] = call.position
            for path in action.writes:
                if path != "*":
                    last_edit[path] = call.position
        proposals: list[Replacement | None] = []
        for call in conversation.calls:
            action = call.action
            if not action.path:
                continue
            if self.options.writes and action.kind in {"write", "edit"} and last_read.get(action.path, -1) > call.position:
                proposals.append(
                    replace_arguments(conversation, call, ctx, self.name, "the file was read again later", "read it if you need its content")
                )
            stale = not call.is_error and last_edit.get(action.path, -1) > call.position
            if self.options.stale_reads and (action.kind == "read" or action.shows_file) and stale:
                proposals.append(
                    replace_output(
                        conversation,
                        call,
                        ctx,
                        self.name,
                        "the file was changed later, so this view is stale",
                        "read it again if you need it",
                        what="older view",
                    )
                )
        return [p for p in proposals if p is not None]
