"""Truncation: a long tool output keeps its head, its tail and, within the budget, the lines that matter."""

from __future__ import annotations

import re
from array import array
from bisect import bisect_right
from collections.abc import Iterator
from dataclasses import dataclass, replace
from typing import Any, ClassVar

from conversation.messages import Call, text_key
from redaction.redact import redact
from strategies.base import CONTENT, Replacement, StrategyContext, check_fraction, check_int
from strategies.conversation import analyze
from strategies.placeholder import kept_as, ref_id
from strategies.protection import ANCHOR

HIGH, MEDIUM, LOW = 2, 1, 0
_MIN_BUDGET = 256
USABLE_SHARE = 0.3
"""A tool output is cut to at most this share of the usable window (window less the answer's reserve): at 4,096 tokens
about 630, at 8k about 1,800; from 16k up the configured cap (4,000) is the smaller."""
_HEADER_RESERVE = 90
_MARKER_COST = 10
_HIGH = re.compile(
    r"Traceback|\bError\b|Error:|Exception\b|\bFAILED\b|\bFAIL:|\bERROR\b|\berror:|AssertionError|"
    r"panic:|fatal:|^[ \t]*File \".*\", line \d+|<returncode>|<exception>",
    re.MULTILINE,
)
_MEDIUM = re.compile(r"warning\b|\bWARN", re.IGNORECASE)
_NOT_A_PATH = re.compile(r"^\s*(?:<|\[|\(|$)")


def importance(line: str, pattern: re.Pattern[str] | None) -> int:
    """Seed 004's levels for one line: HIGH errors, tracebacks, anchors; MEDIUM search matches, warnings."""
    if _HIGH.search(line) or ANCHOR.search(line):
        return HIGH
    if (pattern is not None and pattern.search(line)) or _MEDIUM.search(line):
        return MEDIUM
    return LOW


class Lines:
    """The lines of a text as offsets into it: a 24 MiB output of 600,000 lines is one string and an array of
    starts (8 bytes a line), not 600,000 strings (about 1.6 times the text in string headers alone)."""

    def __init__(self, text: str) -> None:
        self.text = text
        starts, find, at = array("q", [0]), text.find, text.find("\n")
        while at >= 0:
            starts.append(at + 1)
            at = find("\n", at + 1)
        self.starts = starts

    def __len__(self) -> int:
        return len(self.starts)

    def span(self, i: int) -> tuple[int, int]:
        """(start, end) of line ``i`` in the text, its newline excluded."""
        starts = self.starts
        return starts[i], starts[i + 1] - 1 if i + 1 < len(starts) else len(self.text)

    def __getitem__(self, i: int) -> str:
        start, end = self.span(i)
        return self.text[start:end]

    def __iter__(self) -> Iterator[str]:
        return (self[i] for i in range(len(self)))


def ranks(lines: Lines, pattern: re.Pattern[str] | None) -> bytearray:
    """importance() of every line, found with one scan of the whole text per regex (block by block of whole
    lines: one regex call never holds the interpreter for long, so the event loop's thread gets its turns)."""
    text, starts = lines.text, lines.starts
    levels = bytearray(len(lines))  # LOW
    scans = [(_MEDIUM, MEDIUM), (_HIGH, HIGH), (ANCHOR, HIGH)] + ([(pattern, MEDIUM)] if pattern is not None else [])
    blocks = _line_blocks(text)
    for regex, level in scans:
        for lo, hi in blocks:
            for match in regex.finditer(text, lo, hi):
                line = bisect_right(starts, match.start()) - 1
                levels[line] = max(levels[line], level)
    return levels


SCAN_BLOCK = 64 * 1024
"""Characters a regex scans per call in ``ranks`` (rounded up to a line end)."""


def _line_blocks(text: str) -> list[tuple[int, int]]:
    """(start, end) of consecutive runs of whole lines, about SCAN_BLOCK characters each, covering text."""
    blocks, lo = [], 0
    while True:
        end = text.find("\n", lo + SCAN_BLOCK)
        if end < 0:
            blocks.append((lo, len(text)))
            return blocks
        blocks.append((lo, end))
        lo = end + 1


def compile_pattern(pattern: str | None) -> re.Pattern[str] | None:
    """A search call's pattern as a Python regex (grep's \\| as |), else as a literal; None without one."""
    if not pattern:
        return None
    flags = re.IGNORECASE if pattern.startswith("(?i)") else 0
    body = pattern.removeprefix("(?i)")
    try:
        return re.compile(body.replace(r"\|", "|"), flags)
    except re.error:
        return re.compile(re.escape(body), flags)


class Truncation:
    """An output over its budget keeps head and tail lines and, greedily, HIGH then MEDIUM lines between.

    The budget is max_tool_output_tokens; for a search it is also at most grep_max_tokens and
    grep_headroom of what remains of the window (never under 256 tokens); a list keeps at most
    glob_max_files lines. Omitted stretches become `[… N lines omitted …]`, and a header line says
    what was cut and where the original is kept.
    """

    name: ClassVar[str] = "truncation"

    @dataclass(frozen=True)
    class Options:
        max_tool_output_tokens: int = 4000
        """int, default 4000: any tool output over this many tokens is truncated to it."""

        grep_max_tokens: int = 50000
        """int, default 50000: a search output is kept under this many tokens."""

        grep_headroom: float = 0.5
        """float in (0, 1], default 0.5: a search output is kept under this share of the remaining window."""

        glob_max_files: int = 200
        """int, default 200: a file list keeps at most this many lines (paths)."""

        head_share: float = 0.3
        """float in (0, 1], default 0.3: share of the budget for the first lines."""

        tail_share: float = 0.3
        """float in (0, 1], default 0.3: share of the budget for the last lines."""

        def __post_init__(self) -> None:
            for name in ("max_tool_output_tokens", "grep_max_tokens", "glob_max_files"):
                check_int(name, getattr(self, name), minimum=1)
            for name in ("grep_headroom", "head_share", "tail_share"):
                check_fraction(name, getattr(self, name))

    def __init__(self, options: Truncation.Options | None = None) -> None:
        self.options = options or Truncation.Options()

    def budget(self, kind: str, ctx: StrategyContext) -> int:
        budget = self.options.max_tool_output_tokens
        if ctx.usable_tokens is not None:  # a small window: at most this share of it (4,000 tokens from 16k up)
            budget = min(budget, max(_MIN_BUDGET, int(USABLE_SHARE * ctx.usable_tokens)))
        if kind == "search":
            headroom = max(_MIN_BUDGET, int(self.options.grep_headroom * ctx.remaining_tokens))
            budget = min(budget, self.options.grep_max_tokens, headroom)
        return budget

    def propose(self, messages: list[dict[str, Any]], ctx: StrategyContext) -> list[Replacement]:
        conversation = analyze(messages, ctx)
        proposals: list[Replacement] = []
        plain, search = self.budget("other", ctx), self.budget("search", ctx)
        for call in conversation.calls:
            if call.result is None or call.result in conversation.protected:
                continue
            text = conversation.texts[call.result]
            if not text:
                continue
            budget = search if call.action.kind == "search" else plain
            too_many_files = call.action.kind == "list" and text.count("\n") > self.options.glob_max_files + 4
            size = len(text) if text.isascii() else len(text.encode("utf-8", "surrogatepass"))
            if size <= budget and not too_many_files:
                continue
            tokens = ctx.count_tokens(text)
            if tokens <= budget and not too_many_files:
                continue
            key = ("truncation", call.call_id, call.result, text_key(text), budget, self.options, ctx.recall_tool)
            known = ctx.memo.get(key) if ctx.memo is not None else None
            if known is not None:  # remembered without its original (the memo never holds an output): this text is it
                replacement: Replacement | None = replace(known, original=text)
            else:
                replacement = self._truncate(call, text, tokens, budget, ctx)
                if ctx.memo is not None and replacement is not None:
                    ctx.memo[key] = replace(replacement, original="", kept=None)
            if replacement is not None:
                proposals.append(replacement)
        return proposals

    def _truncate(self, call: Call, text: str, tokens: int, budget: int, ctx: StrategyContext) -> Replacement | None:
        shown = redact(text)  # what is kept is Ruyi's text: redacted whole, before any line is clipped
        if call.action.kind == "list":
            paths, dropped = self._limit_paths(shown.split("\n"))
            lines = Lines("\n".join(paths))
        else:
            lines, dropped = Lines(shown), 0
        identity, label = call.call_id or f"#{call.result}", redact(call.action.label)
        ref = ref_id(identity, CONTENT, text)
        pattern = compile_pattern(call.action.pattern)
        body_budget = budget - _HEADER_RESERVE
        levels = ranks(lines, pattern)
        for _ in range(4):
            kept, omitted = self._select(lines, levels, tokens / max(1, len(text)), body_budget)
            omitted += dropped
            header = (
                f"[ruyi: output of `{label}` truncated from {tokens:,} tokens, {omitted:,} lines "
                f"omitted (kept head, tail, errors and matches); run a narrower command "
                f"(grep -n, sed -n 'a,bp') for the rest; {kept_as(ref, ctx.recall_tool)}]"
            )
            new_text = "\n".join([header, *kept])
            after = ctx.count_tokens(new_text)
            if after <= budget or body_budget <= _MIN_BUDGET // 4:
                break
            body_budget -= int((after - budget) * 1.2) + 1
        if tokens - after < ctx.min_saving_tokens:
            return None
        reason = f"output over {budget:,} tokens" if tokens > budget else f"over {self.options.glob_max_files} paths"
        return Replacement(call.result or 0, CONTENT, new_text, text, tokens, after, ref, self.name, reason, kept=shown)

    def _limit_paths(self, lines: list[str]) -> tuple[list[str], int]:
        """A listing's first glob_max_files path lines; other lines (tags, headers) stay where they are."""
        out: list[str] = []
        seen = dropped = 0
        for line in lines:
            if _NOT_A_PATH.match(line):
                out.append(line)
                continue
            seen += 1
            if seen <= self.options.glob_max_files:
                out.append(line)
            else:
                dropped += 1
                if dropped == 1:
                    out.append("[… more paths omitted …]")
        return out, dropped

    def _select(self, lines: Lines, levels: bytearray, ratio: float, budget: int) -> tuple[list[str], int]:
        """The kept lines, gaps marked, and how many lines were omitted (a line's cost is its clipped length's:
        computed for the lines looked at, from offsets, never a list of every line)."""
        max_chars = max(40, int(budget * 0.25 / max(ratio, 1e-6)))

        def cost(i: int) -> int:
            start, end = lines.span(i)
            size = end - start if end - start <= max_chars else len(_clip(lines.text, start, end, max_chars))
            return int(size * ratio) + 1

        keep: set[int] = set()
        used, start, end = 0, 0, len(lines) - 1
        while start <= end and used + (c := cost(start)) <= budget * self.options.head_share:
            keep.add(start)
            used += c
            start += 1
        tail_used = 0
        while end >= start and tail_used + (c := cost(end)) <= budget * self.options.tail_share:
            keep.add(end)
            tail_used += c
            end -= 1
        used += tail_used
        for level in (HIGH, MEDIUM):
            i = levels.find(level, start, end + 1)
            while i >= 0:
                if used + (c := cost(i)) + _MARKER_COST <= budget:
                    keep.add(i)
                    used += c + _MARKER_COST
                i = levels.find(level, i + 1, end + 1)
        out: list[str] = []
        previous = -1
        for i in sorted(keep):
            if i - previous > 1:
                out.append(f"[… {i - previous - 1} lines omitted …]")
            out.append(_clip(lines.text, *lines.span(i), max_chars))
            previous = i
        if previous < len(lines) - 1:
            out.append(f"[… {len(lines) - 1 - previous} lines omitted …]")
        return out, len(lines) - len(keep)


def _clip(text: str, start: int, end: int, max_chars: int) -> str:
    """The line text[start:end], its middle cut when it is over max_chars (a huge line is never copied whole)."""
    if end - start <= max_chars:
        return text[start:end]
    half = max_chars // 2
    return f"{text[start : start + half]} […{end - start - 2 * half} characters…] {text[end - half : end]}"
