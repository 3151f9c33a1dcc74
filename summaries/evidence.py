"""What an archived stretch holds that the agent works with, deterministically.

Each file's changes (what and where), the output lines holding identifiers the agent itself named afterwards (within
the stretch, never later), the results it stated, and a person's constraints and decisions."""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from conversation.messages import Call
from strategies.conversation import _FENCE

TERM = re.compile(r"(?<![\\\w])[A-Za-z_][A-Za-z0-9_./:-]*[A-Za-z0-9_]")
_INNER_CAPITAL = re.compile(r"[a-z][A-Z]")
_DOTTED = re.compile(r"\w\.\w")
_DEFINITION = re.compile(r"^\s*(?:\d+[:\s-]\s*)?(?:async\s+def|def|class|function|func|fn|interface|struct|type)\s+\w")
_ERROR = re.compile(r"(?:Error|Exception|Traceback|FAILED|FAIL:|ERROR|[Aa]ssert|panic:|fatal:)")
_LOCATED = re.compile(r"(?:[\w./-]+\.\w+:\d+|File \"[^\"]+\", line \d+|^\s*\d+[:-])")
_NUMBERS = re.compile(
    r"(?:\bline[s]?\s+(\d+)(?:\s*(?:-|–|to)\s*(\d+))?|(?<![\w.])(\d+),(\d+)[pdsic]\b|(?<![\w.])(\d+)[sdi]/|"
    r"\"(?:insert_line|view_range|line|start_line|end_line)\":\s*\[?(\d+)(?:,\s*(\d+))?)"
)
_NAMED_DEF = re.compile(r"^\s*(?:async\s+def|def|class|function|func|fn)\s+(\w+)", re.M)
_RESULT = re.compile(
    r"(?i)\b(?:now pass(?:es)?|all (?:\d+ )?tests? pass(?:ed)?|tests? pass(?:ed|es)?|works? (?:now|correctly)|"
    r"(?:is|was|are) fixed|fix(?:ed)? (?:the|this)|root cause|the cause|the (?:issue|problem|bug) (?:is|was)|"
    r"(?:I|we) found|confirm(?:s|ed)? (?:that|the))|(?:已修复|通过了|原因是|找到了)"
)
_CONSTRAINT = re.compile(
    r"(?i)\b(?:must(?:n't| not)?|never|always|do not|don't|avoid|only use|should not|shouldn't|"
    r"cannot|can't|not allowed|required?)\b|(?:必须|不要|禁止|不能|务必|只能|不得)"
)
_DECISION = re.compile(
    r"(?i)\b(?:decided?|decision|we(?:'ll| will) use|let's use|use \S+ instead|go(?:ing)? with|chose|prefer)\b"
    r"|(?:决定|选择|采用|改用)"
)
_NEW_TEXT = ("new_str", "file_text", "content", "new_string", "text", "patch", "diff", "code")
_HEREDOC = re.compile(r"<<-?\s*['\"]?(\w+)['\"]?[^\n]*\n(.*?)\n\1\b", re.S)
LINE_CHARS = 160
CHANGE_CHARS = 240
CHANGES_PER_FILE = 2
LINES_KEPT = 24
RESULTS_KEPT = 4
STATED_KEPT = 4


@dataclass(frozen=True)
class Change:
    """One change of a file: where (functions, classes, line numbers) and what (its new text or command, trimmed)."""

    path: str
    where: str
    what: str
    position: int


@dataclass(frozen=True)
class Evidence:
    """What the agent works with, of one stretch (positions are the conversation's)."""

    changes: tuple[Change, ...] = ()
    """The files changed, each with its latest changes, newest last."""
    lines: tuple[tuple[int, str], ...] = ()
    """(position, line) of tool outputs the agent named afterwards: definitions, errors, test names, located lines."""
    results: tuple[str, ...] = ()
    """What the agent stated it found or achieved, newest last."""
    constraints: tuple[str, ...] = ()
    """A person's instructions that state a rule (must, never, only, …)."""
    decisions: tuple[str, ...] = ()
    """Lines that state a decision (a person's, or the agent's own ``decided``/``we will use``)."""

    def by_file(self) -> dict[str, list[Change]]:
        out: dict[str, list[Change]] = {}
        for change in self.changes:
            out.setdefault(change.path, []).append(change)
        ordered = sorted(out.items(), key=lambda kv: kv[1][-1].position)  # the file changed last comes last
        return {path: changes[-CHANGES_PER_FILE:] for path, changes in ordered}


def terms(text: str) -> set[str]:
    """Distinctive terms: identifiers with ``_``, paths, dotted names, words with digits or inner capitals."""
    found = set()
    for match in TERM.finditer(text):
        whole = match.group(0)
        for term in {whole, *whole.split(":")} if ":" in whole else (whole,):  # a test id's parts: file, name
            term = term.rstrip(".:-/")
            if len(term) >= 4 and (
                "_" in term or "/" in term or _INNER_CAPITAL.search(term) or _DOTTED.search(term) or any(c.isdigit() for c in term)
            ):
                found.add(term)
    return found


def clip(text: str, limit: int) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 1] + "…"


_FILLER = re.compile(r"^\s*(?:#|//|print\(|echo |\"\"\"|'\'\''|$)")


def dense(text: str) -> str:
    """A new text with its comments, prints and blank lines left out, lines joined by `` ⏎ ``: more of what it does
    in fewer characters (the whole text when nothing else is left)."""
    kept = [line.strip() for line in text.splitlines() if not _FILLER.match(line)]
    return " ⏎ ".join(kept) if kept else text


def _arguments(call: Call) -> dict[str, Any]:
    try:
        value = json.loads(call.arguments) if call.arguments else {}
    except ValueError:
        return {}
    return value if isinstance(value, dict) else {}


def _fenced(text: str | None) -> str:
    """The command a text-only agent wrote in a fenced block (its call's arguments are empty)."""
    match = _FENCE.search(text or "")
    return match.group(1).strip() if match else ""


def change_of(call: Call, path: str, position: int, fenced: str = "") -> Change:
    """Where and what of one call's change to ``path``: the new text it wrote (a tool's argument, a heredoc) or the command."""
    args = _arguments(call)
    new = next((args[k] for k in _NEW_TEXT if isinstance(args.get(k), str) and args[k].strip()), None)
    command = (call.arguments or fenced) if not args else next((v for k, v in args.items() if k in ("command", "cmd") and isinstance(v, str)), "")
    if new is None and command:
        heredoc = _HEREDOC.search(command)
        new = heredoc.group(2) if heredoc else None
    source = json.dumps(args) if args else command or ""
    numbers = []
    for m in _NUMBERS.finditer(source):
        found = [g for g in m.groups() if g]
        numbers.append("–".join(found[:2]))
    names = list(dict.fromkeys(_NAMED_DEF.findall(new or "")))[:3]
    where = ", ".join([*(f"`{n}`" for n in names), *(f"line {n}" for n in dict.fromkeys(numbers))][:4])
    what = clip(dense(new), CHANGE_CHARS) if new else clip(command or call.name, CHANGE_CHARS)
    return Change(path, where, what, position)


def evidence_of(
    messages: Sequence[Mapping[str, Any]],
    texts: Sequence[str | None],
    roles: Sequence[str | None],
    calls: Sequence[Call],
    first: int,
    task_end: int = 0,
) -> Evidence:
    """The evidence of a stretch starting at position ``first``: ``texts``, ``roles`` and ``calls`` are its analysis
    (positions relative to the stretch). ``task_end``: messages before it (relative) are the task, not mined."""
    n = len(messages)
    own: list[set[str]] = [set() for _ in range(n)]
    for call in calls:
        own[call.index] |= terms(call.arguments or _fenced(texts[call.index]))
    for i in range(n):
        if roles[i] == "assistant" and texts[i]:
            own[i] |= terms(texts[i] or "")
    named_after: list[set[str]] = [set() for _ in range(n + 1)]
    for i in range(n - 1, -1, -1):
        named_after[i] = named_after[i + 1] | own[i]
    changes: list[Change] = []
    for call in calls:
        for path in call.action.writes:
            if path != "*":
                changes.append(change_of(call, path, first + call.index, _fenced(texts[call.index])))
    scored: list[tuple[int, int, str]] = []
    seen: set[str] = set()
    for call in calls:
        if call.result is None or not texts[call.result]:
            continue
        later = named_after[call.result + 1]
        if not later:
            continue
        for raw in (texts[call.result] or "").splitlines():
            line = raw.strip()
            if len(line) < 6 or line in seen:
                continue
            kind = 3 if _DEFINITION.match(raw) else 2 if _ERROR.search(line) else 1 if _LOCATED.search(raw) else 0
            if not kind:
                continue
            hits = terms(line) & later
            if not hits:
                continue
            seen.add(line)
            scored.append((kind + 2 * len(hits), first + call.result, clip(line, LINE_CHARS)))
    best = sorted(scored, key=lambda s: (-s[0], -s[1]))[:LINES_KEPT]
    lines = tuple((position, line) for _, position, line in sorted(best, key=lambda s: s[1]))
    results: list[str] = []
    constraints: list[str] = []
    decisions: list[str] = []
    for i in range(task_end, n):
        text = texts[i]
        if not text or roles[i] not in ("user", "assistant"):
            continue
        for sentence in re.split(r"(?<=[.!?。！？])\s+|\n", text):
            s = sentence.strip()
            if len(s) < 12 or s.startswith(("<", "```", "$")):
                continue
            if roles[i] == "assistant" and _RESULT.search(s):
                results.append(clip(s, LINE_CHARS))
            elif roles[i] == "user" and not _observation(text) and _CONSTRAINT.search(s):
                constraints.append(clip(s, LINE_CHARS))
            if (
                not _observation(text)
                and _DECISION.search(s)
                and (roles[i] == "user" or s.lower().startswith(("we decided", "decision", "i decided", "决定")))
            ):
                decisions.append(clip(s, LINE_CHARS))
    return Evidence(
        tuple(changes),
        lines,
        tuple(dict.fromkeys(results))[-RESULTS_KEPT:],
        tuple(dict.fromkeys(constraints))[-STATED_KEPT:],
        tuple(dict.fromkeys(decisions))[-STATED_KEPT:],
    )


_OBSERVATION_START = re.compile(r"^\s*(?:<returncode>|<output>|<exception>|Observation:|OBSERVATION:|<warning>)")


def _observation(text: str) -> bool:
    """A user message that is a tool's output in a text-only agent (mini-swe-agent, SWE-agent), not a person."""
    return bool(_OBSERVATION_START.match(text))
