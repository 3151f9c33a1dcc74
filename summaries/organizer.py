"""The Organizer's job (seed 003), extractively: draft knowledge cards from archived turns, each a failure and the change that fixed it."""

from __future__ import annotations

import hashlib
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from conversation.actions.classify import DEFAULT_TOOLS, ClassifyState, ToolSpec, classify
from conversation.messages import is_error_output, message_text
from strategies.purge_errors import error_lines

PER_ARCHIVE = 2
"""The most cards one archive drafts (the newest lessons)."""
ERROR_LINES = 6
TITLE_CHARS = 90
NOTE_CHARS = 300
_EXCEPTION = re.compile(r"\b([A-Z][A-Za-z0-9]*(?:Error|Exception|Failure|Warning))\b")
_HEADLINE = re.compile(r"(?i)\b(error|exception|failed|failure|fatal|cannot|not found|denied|refused|traceback)\b")
_SENTENCE = re.compile(r"\S[^\n]{10,300}?(?:[.!?](?=\s|$)|[。！？]|$)", re.M)
_DIGITS = re.compile(r"\d+")
_WRAPPER = re.compile(r"^\s*</?\w+>\s*$|^\s*(?:Exit code|exit_code)\b", re.I)


@dataclass(frozen=True)
class DraftCard:
    """A card the archive's turns suggest: proposed to a person, never written until accepted."""

    title: str
    tags: tuple[str, ...]
    body: str
    key: str = field(default="")
    """What makes two drafts the same lesson (a rejected one is never proposed again): the title without numbers."""


@dataclass
class _Open:
    """A command that failed and is not yet seen passing."""

    lines: list[str]
    changed: list[str] = field(default_factory=list)
    note: str | None = None


def _headline(lines: Sequence[str]) -> str:
    for line in reversed(lines):
        if _EXCEPTION.search(line) or _HEADLINE.search(line):
            return line.strip()
    return lines[-1].strip() if lines else "it failed"


_TEST_NAME = re.compile(r"(?:FAILED|ERROR|FAIL:)\s+(?:\S*::)?(\w*test\w*)|\b(test_\w+)")
_COUNT_LINE = re.compile(r"(?i)^\W*(?:\d+ (?:failed|passed|errors?|skipped)|in \d+(?:\.\d+)?s\b|FAILED \(|Ran \d+ tests?)")


def lesson_title(label: str, lines: Sequence[str], changed: Sequence[str]) -> str:
    """A draft card's title says what it teaches: what failed (the exception and its message, else the failing test,
    else the command's program), and the files whose change fixed it; never a count line (``1 failed in 0.2s``)."""
    program = program_of(label)
    what = None
    for line in reversed(lines):
        if _EXCEPTION.search(line) and not _COUNT_LINE.search(line.strip()):
            what = _clip(line.strip()[_EXCEPTION.search(line).start() :], 56)  # type: ignore[union-attr]
            break
    if what is None:
        tests = [m.group(1) or m.group(2) for line in lines for m in _TEST_NAME.finditer(line)]
        what = f"{tests[-1]} failing" if tests else None
    if what is None:
        headline = _headline(lines)
        what = f"{program} failing" if _COUNT_LINE.search(headline) or not headline else _clip(headline, 50)
    files = ", ".join(dict.fromkeys(p.rsplit("/", 1)[-1] for p in changed)) or "the code"
    return _clip(f"{what} ({program}): fixed in {files}", TITLE_CHARS)


def _clip(text: str, limit: int) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 1] + "…"


def key_of(title: str) -> str:
    """Two drafts of the same lesson share this (numbers such as line numbers and times aside)."""
    plain = _DIGITS.sub("#", " ".join(title.split()).lower())
    return hashlib.sha256(plain.encode("utf-8", "surrogatepass")).hexdigest()[:32]


def program_of(label: str) -> str:
    """The program a command line runs: the last step after ``&&`` or ``;``, past ``cd``, ``sudo``, ``env`` and variable
    settings, ``python -m X`` read as X (``cd /repo && python -m pytest -x`` → pytest)."""
    step = re.split(r"&&|\|\||;", label)[-1].split()
    words = [w for w in step if "=" not in w and w not in ("sudo", "env", "time", "nice")]
    if len(words) >= 3 and words[0].rsplit("/", 1)[-1].startswith("python") and words[1] == "-m":
        words = words[2:]
    name = words[0].rsplit("/", 1)[-1] if words else ""
    return name if name and name.replace("-", "").replace("_", "").replace(".", "").isalnum() else "command"


def _tags(label: str, lines: Sequence[str], changed: Sequence[str]) -> tuple[str, ...]:
    program = program_of(label)
    found = [program] if program != "command" else []
    found += [m.group(1) for line in lines for m in _EXCEPTION.finditer(line)]
    found += [p.rsplit("/", 1)[-1].rsplit(".", 1)[0] for p in changed]
    return tuple(dict.fromkeys(t for t in found if t))[:6]


def _draft(label: str, failure: _Open) -> DraftCard:
    title = lesson_title(label, failure.lines, failure.changed)
    quoted = "\n".join(f"    {line}" for line in failure.lines)
    changed = ", ".join(dict.fromkeys(failure.changed))
    body = (
        f"## Problem\n\n`{_clip(label, 200)}` failed:\n\n{quoted}\n\n## What fixed it\n\nChanged {changed}."
        + (f"\n\n{failure.note}" if failure.note else "")
        + f"\n\n## Verification\n\n`{_clip(label, 200)}` then succeeded.\n"
    )
    return DraftCard(title, _tags(label, failure.lines, failure.changed), body, key_of(title))


def draft_cards(messages: Sequence[Mapping[str, Any]], tools: Mapping[str, ToolSpec] = DEFAULT_TOOLS) -> list[DraftCard]:
    """Lessons the turns establish: a command that failed, files changed, and the same command then succeeding. The
    assistant's first sentence after the failure is kept as the diagnosis. At most ``PER_ARCHIVE``, newest last."""
    state = ClassifyState(tools=tools)
    calls: dict[str, str] = {}
    failing: dict[str, _Open] = {}
    drafts: dict[str, DraftCard] = {}
    for message in messages:
        role = message.get("role")
        if role == "assistant":
            text = message_text(message) or ""
            sentence = next(iter(_SENTENCE.findall(text.replace("```", "\n"))), None)
            for failure in failing.values():
                if failure.note is None and sentence:
                    failure.note = _clip(sentence.strip(), NOTE_CHARS)
            for call in message.get("tool_calls") or ():
                action = classify(call, state)
                spec = state.tools.get(str((call.get("function") or {}).get("name")))
                if spec is not None and spec.kind == "shell" and action.kind == "other" and action.label:
                    calls[str(call.get("id"))] = action.label  # a command run (tests, a build), not a read or a search
                changed = [w for w in action.writes if w != "*"] or ([action.path] if action.kind in ("write", "edit") and action.path else [])
                for failure in failing.values():
                    failure.changed += changed
        elif role == "tool":
            label = calls.get(str(message.get("tool_call_id")))
            if label is None:
                continue
            text = message_text(message) or ""
            if is_error_output(message, text):
                lines = [ln for ln in error_lines(text, ERROR_LINES) if not _WRAPPER.match(ln)]
                if lines:
                    failing[label] = _Open(lines)
            elif label in failing:
                failure = failing.pop(label)
                if failure.changed:
                    draft = _draft(label, failure)
                    drafts.pop(draft.key, None)
                    drafts[draft.key] = draft
    return list(drafts.values())[-PER_ARCHIVE:]
