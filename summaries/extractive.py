"""The extractive digest of a stretch of history: files touched, commands and exits, the last error, anchors, plan, notes."""

from __future__ import annotations

import re
from collections.abc import Mapping, MutableMapping, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

from conversation.actions.classify import DEFAULT_TOOLS, ToolSpec
from conversation.messages import message_text
from strategies.base import StrategyContext
from strategies.conversation import analyze
from strategies.protection import ANCHOR
from strategies.purge_errors import error_lines
from summaries.evidence import Evidence, evidence_of

COMMANDS_KEPT = 12
NOTES_KEPT = 5
PLAN_KEPT = 8
LINE_CHARS = 200
ERROR_LINES = 5
_RETURNCODE = re.compile(r"<returncode>(-?\d+)</returncode>|[Ee]xit code:? (-?\d+)|\"exit_code\":\s*(-?\d+)")
_PLAN = re.compile(r"^\s*(?:[-*] \[[ xX]\]|\d+[.)]\s|(?:TODO|Todo|Next|Plan|Step \d+)\b|(?:下一步|计划|待办|步骤))")
_OBSERVATION = re.compile(r"^\s*(?:<returncode>|<output>|<exception>|Observation:|OBSERVATION:)")
_CJK = re.compile(r"[\u3400-\u9fff\uf900-\ufaff]")
_LATIN = re.compile(r"[A-Za-z]")
SAMPLE_CHARS = 600
"""Characters of each text looked at to tell the conversation's language."""
ACTIONS = {"write": "created", "edit": "edited", "read": "read", "search": "searched", "list": "listed"}


@dataclass(frozen=True)
class Command:
    """A call as a line: what was run and how it ended (exit status, or None when the output says nothing)."""

    label: str
    exit: int | None
    error: bool


@dataclass(frozen=True)
class Digest:
    """What a stretch of history did, in plain data that merges in order (``merge``) and survives JSON."""

    first: int = -1
    """Position of the first message covered (-1: nothing yet)."""
    last: int = -1
    """Position of the last message covered."""
    turns: int = 0
    """Assistant messages covered."""
    files: tuple[tuple[str, str], ...] = ()
    """(path, last action) in the order they were last touched."""
    edited: tuple[str, ...] = ()
    """Every file written or edited, in the order first changed (always listed in full)."""
    commands: tuple[Command, ...] = ()
    """The latest calls."""
    last_error: str | None = None
    """The lines of the latest failed call's output that say what went wrong."""
    last_error_call: str | None = None
    anchors: tuple[tuple[str, str], ...] = ()
    """(anchor id, the line that first cited it)."""
    plan: tuple[str, ...] = ()
    """The latest plan or todo lines the assistant wrote."""
    notes: tuple[str, ...] = ()
    """What the user said after the task (preferences, constraints, corrections), one line each."""
    last_words: str | None = None
    """The first line of the latest assistant text: where the work stood."""
    cjk: int = 0
    """CJK characters seen in user and assistant texts (the conversation's language)."""
    latin: int = 0

    @property
    def empty(self) -> bool:
        return self.first < 0

    def to_json(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> Digest:
        values = dict(data)
        values["files"] = tuple(tuple(f) for f in values.get("files", ()))
        values["edited"] = tuple(values.get("edited", ()))
        values["commands"] = tuple(Command(**c) for c in values.get("commands", ()))
        values["anchors"] = tuple(tuple(a) for a in values.get("anchors", ()))
        values["plan"] = tuple(values.get("plan", ()))
        values["notes"] = tuple(values.get("notes", ()))
        return cls(**values)


def merge(a: Digest, b: Digest) -> Digest:
    """The digest of a's stretch followed by b's."""
    if a.empty:
        return b
    if b.empty:
        return a
    files = dict(a.files)
    for path, action in b.files:
        files.pop(path, None)
        files[path] = action
    anchors = dict(a.anchors)
    for anchor, line in b.anchors:
        anchors.setdefault(anchor, line)
    return Digest(
        a.first, b.last, a.turns + b.turns, tuple(files.items()), tuple(dict.fromkeys(a.edited + b.edited)),
        (a.commands + b.commands)[-COMMANDS_KEPT:], b.last_error or a.last_error,
        b.last_error_call if b.last_error else a.last_error_call, tuple(anchors.items()), b.plan or a.plan,
        (a.notes + b.notes)[-NOTES_KEPT:], b.last_words or a.last_words, a.cjk + b.cjk, a.latin + b.latin,
    )  # fmt: skip


@dataclass
class Extractor:
    """Digests stretches of history; ``memo`` keeps call classifications across calls (pure by key)."""

    tools: Mapping[str, ToolSpec] = field(default_factory=lambda: DEFAULT_TOOLS)
    memo: MutableMapping[Any, Any] = field(default_factory=dict)

    def evidence(self, messages: Sequence[Mapping[str, Any]], first: int = 0) -> Evidence:
        """What the agent works with in ``messages`` (the stretch starting at ``first``): each file's changes, the output
        lines it named afterwards within the stretch, its stated results, a person's constraints and decisions."""
        msgs = [m if isinstance(m, dict) else dict(m) for m in messages]
        if not msgs:
            return Evidence()
        ctx = StrategyContext(len, 0, 0, protected_turns=0, tools=self.tools, memo=self.memo)
        c = analyze(msgs, ctx)
        return evidence_of(msgs, c.texts, c.roles, c.calls, first)

    def digest(self, messages: Sequence[Mapping[str, Any]], first: int = 0) -> Digest:
        """The digest of ``messages``, the stretch starting at position ``first`` of its conversation."""
        msgs = [m if isinstance(m, dict) else dict(m) for m in messages]
        if not msgs:
            return Digest()
        if len(self.memo) > 50_000:
            self.memo.clear()
        ctx = StrategyContext(len, 0, 0, protected_turns=0, tools=self.tools, memo=self.memo)
        conversation = analyze(msgs, ctx)
        files: dict[str, str] = {}
        edited: list[str] = []
        commands: list[Command] = []
        last_error, last_error_call = None, None
        for call in conversation.calls:
            action = call.action
            output = conversation.output(call)
            for path in action.writes:
                if path != "*":
                    files.pop(path, None)
                    files[path] = "created" if action.kind == "write" and path == action.path else "edited"
                    edited.append(path)
            if action.path and action.kind in ("read", "search", "list") and action.path not in action.writes:
                files.pop(action.path, None)
                files[action.path] = ACTIONS[action.kind]
            commands.append(Command(_clip(action.label or call.name), _exit_of(output), call.is_error))
            if call.is_error and output:
                last_error = "\n".join(error_lines(output, ERROR_LINES)) or None
                last_error_call = _clip(action.label or call.name)
        anchors: dict[str, str] = {}
        plan: tuple[str, ...] = ()
        notes: list[str] = []
        last_words = None
        cjk = latin = 0
        for message, text in zip(msgs, conversation.texts):
            role = message.get("role")
            if not text:
                continue
            for line in text.splitlines():
                for anchor in ANCHOR.findall(line):
                    anchors.setdefault(anchor, _clip(line.strip()))
            if role == "assistant":
                lines = [_clip(ln.strip()) for ln in text.splitlines() if _PLAN.match(ln)]
                plan = tuple(lines[:PLAN_KEPT]) or plan
                first_line = next((ln.strip() for ln in text.splitlines() if ln.strip()), "")
                last_words = _clip(first_line) or last_words
            if role == "user" and not _OBSERVATION.match(text):
                notes.append(_clip(" ".join(text.split())))
            if role in ("user", "assistant"):
                sample = text[:SAMPLE_CHARS]
                cjk += len(_CJK.findall(sample))
                latin += len(_LATIN.findall(sample))
        return Digest(
            first,
            first + len(msgs) - 1,
            conversation.turns,
            tuple(files.items()),
            tuple(dict.fromkeys(edited)),
            tuple(commands[-COMMANDS_KEPT:]),
            last_error,
            last_error_call,
            tuple(anchors.items()),
            plan,
            tuple(notes[-NOTES_KEPT:]),
            last_words,
            cjk,
            latin,
        )


def is_chinese(digest: Digest, task: str | None = None) -> bool:
    """Whether the conversation is in Chinese (more CJK characters than a third of its Latin letters)."""
    cjk, latin = digest.cjk, digest.latin
    if task:
        cjk += len(_CJK.findall(task[:SAMPLE_CHARS]))
        latin += len(_LATIN.findall(task[:SAMPLE_CHARS]))
    return cjk * 3 > latin and cjk > 0


def _exit_of(output: str | None) -> int | None:
    if not output:
        return None
    match = _RETURNCODE.search(output[:300]) or _RETURNCODE.search(output[-300:])
    if match is None:
        return None
    return int(next(g for g in match.groups() if g is not None))


def _clip(text: str, limit: int = LINE_CHARS) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 1] + "…"


def text_of(message: Mapping[str, Any]) -> str:
    """A message's text, or its tool calls as ``name(arguments)`` when it has none."""
    text = message_text(message) or ""
    calls = [
        f"{(c.get('function') or {}).get('name')}({(c.get('function') or {}).get('arguments')})"
        for c in message.get("tool_calls") or ()
        if isinstance(c, Mapping)
    ]
    return "\n".join([text, *calls]).strip()
