"""A map of the code the agent has seen in an archived stretch: per file, the definitions its outputs showed.

In the spirit of Aider's repo map, but only from what this request's archived tool outputs held: for each file the
agent saw (``cat``, ``sed -n``, an editor's view, ``grep -n`` hits, a traceback's frames), the definitions shown —
classes with their bases, functions, methods as ``Class.method``, module-level names and class attributes, imports —
with the line numbers where the output gave them, and the names each definition's shown body used (those the agent
named first), one compact line per file: the files the agent looked at and named most first, then the newest. A name
is kept only where it is new to the request (what the summary, the head, the newest turns or the agent's kept lines
already hold costs nothing); the map stops at the budget. A pure function of the messages: the same bytes after a
restart and on a replica."""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from conversation.actions.classify import DEFAULT_TOOLS, ToolSpec
from strategies.base import StrategyContext
from strategies.conversation import analyze
from summaries.evidence import terms

CHARS_PER_TOKEN = 3
"""Characters per token the budget is counted with (as ``summaries.recent``)."""
USES_PER_DEFINITION = 12
"""At most this many names a definition's shown body uses are listed beside it: those the agent itself named in the
stretch first, then in the order the body uses them (of the first ``4 × USES_PER_DEFINITION`` it uses)."""
MIN_PART = 60
"""Files are looked at while at least this many characters of the budget are left."""

_NUMBERED = re.compile(r"^\s{0,8}(\d{1,6})(?:\t|:|-)(.*)$")
"""``cat -n``/``nl``/an editor's view (``   12\\tcode``), ``grep -n`` (``12:code``, ``12-context``)."""
_GREP_HIT = re.compile(r"^\.?/?([\w./-]+\.\w+)[:-](\d{1,6})[:-](.*)$")
"""``grep -rn`` across files: ``path:12:code`` or ``path-12-context``."""
_DEF = re.compile(r"^(\s*)(?:async\s+def|def|class|function|func|fn)\s+([A-Za-z_]\w*)")
_ASSIGN = re.compile(r"^(\s*)([A-Za-z_]\w*)\s*(?::\s*[^=]+)?=(?!=)")
_IMPORT = re.compile(r"^(?:from\s+([\w.]+)\s+import\b|import\s+([\w.]+))")
_FRAME = re.compile(r'^\s*File "([^"]+)", line (\d+), in (\w+)')
"""A traceback's frame: where the code ran (any output, a script's run included)."""
_WORD = re.compile(r"\w+")
_WRAPPER = re.compile(r"^\s*</?(?:returncode|output|warning)>")
_TOKEN_LIKE = re.compile(r"^(?=(?:.*\d){3})(?=.*[A-Za-z]\d)(?=.*\d[A-Za-z])[\w-]{16,}$")
"""A long run of letters and digits without a dot or a slash: a key, a hash or an id, not a name the code uses
(left out of the names a body uses: the block is redacted, and such a run says nothing of the code)."""


@dataclass
class _Def:
    """One definition seen: its name as listed (``Class.method``), its line, the names its shown body used."""

    name: str
    line: int | None
    uses: list[str] = field(default_factory=list)


@dataclass
class _File:
    path: str
    last: int
    """Position (in the stretch) of the newest output that showed this file."""
    defs: dict[str, _Def] = field(default_factory=dict)
    views: set[int] = field(default_factory=set)
    """Positions of the outputs that showed it."""


def _lines_of(text: str, path: str | None, start: int | None) -> list[tuple[str | None, int | None, str]]:
    """The output's lines as (path, line number, code): numbers from the output's own numbering, else counted from
    ``start`` (a read's first line), else None; a ``grep -rn`` hit names its own path."""
    out: list[tuple[str | None, int | None, str]] = []
    k = 0
    for raw in text.splitlines():
        if _WRAPPER.match(raw):
            continue
        hit = _GREP_HIT.match(raw)
        if hit:
            out.append((hit.group(1), int(hit.group(2)), hit.group(3)))
            continue
        numbered = _NUMBERED.match(raw)
        if numbered and path is not None:
            out.append((path, int(numbered.group(1)), numbered.group(2)))
            continue
        out.append((path, start + k if start is not None else None, raw))
        k += 1
    return out


def _scan(lines: Sequence[tuple[str | None, int | None, str]], files: dict[str, _File], position: int, uses: bool) -> None:
    """Add the definitions (and the names their bodies use) of one output's lines to ``files``."""
    stack: list[tuple[int, str, bool]] = []  # (indent, name, is_class) of the enclosing definitions
    current: _Def | None = None
    current_indent = -1
    own_path: str | None = None
    for path, number, code in lines:
        frame = _FRAME.match(code)
        if frame:
            where = files.setdefault(frame.group(1), _File(frame.group(1), position))
            where.last = max(where.last, position)
            if frame.group(3) != "<module>":
                where.defs.setdefault(frame.group(3), _Def(frame.group(3), int(frame.group(2))))
            continue
        if path is None or not code.strip():
            continue
        if path != own_path:
            stack, current, current_indent, own_path = [], None, -1, path
        entry = files.get(path)
        if entry is None:
            entry = files[path] = _File(path, position)
        entry.last = max(entry.last, position)
        entry.views.add(position)
        indent = len(code) - len(code.lstrip())
        match = _DEF.match(code)
        if match:
            while stack and stack[-1][0] >= indent:
                stack.pop()
            name = match.group(2)
            is_class = code.lstrip().startswith("class ")
            inside_function = any(not c for _, _, c in stack)
            if not inside_function:
                owner = next((n for _, n, c in reversed(stack) if c), None)
                listed = f"{owner}.{name}" if owner and not is_class else name
                found = entry.defs.pop(listed, None) or _Def(listed, number)
                found.line = number if number is not None else found.line
                entry.defs[listed] = found  # seen again: moved to the end (the newest view's order)
                current, current_indent = found, indent
                if is_class:  # its bases first: what the class is
                    bases = sorted(terms(code[match.end() :]), key=lambda t: (code.find(t), t))  # ties by name: never set order
                    found.uses[:0] = [b for b in bases if b not in found.uses]
            stack.append((indent, name, is_class))
            continue
        imported = _IMPORT.match(code) if not stack else None
        if imported:
            module = imported.group(1) or imported.group(2)
            if terms(module):
                entry.defs.setdefault("import " + module, _Def("import " + module, number))
            continue
        assign = _ASSIGN.match(code)
        if assign and (not stack or (stack[-1][2] and len(assign.group(1)) > stack[-1][0])):
            owner = stack[-1][1] if stack else None
            name = assign.group(2)
            listed = f"{owner}.{name}" if owner else name
            if listed not in entry.defs and (terms(name) or name.isupper()):
                entry.defs[listed] = _Def(listed, number)
            continue
        if uses and current is not None and indent > current_indent:
            for term in sorted(terms(code), key=lambda t: (code.find(t), t)):  # a name and a longer one found at the same place: by name
                if _TOKEN_LIKE.match(term):
                    continue
                if term not in current.uses and len(current.uses) < 4 * USES_PER_DEFINITION:
                    current.uses.append(term)


def code_map(
    messages: Sequence[Mapping[str, Any]],
    first: int,
    budget_tokens: int,
    known: str = "",
    uses: bool = True,
    tools: Mapping[str, ToolSpec] = DEFAULT_TOOLS,
) -> str:
    """The map of the code ``messages`` (client positions from ``first``) showed, within ``budget_tokens``: one line per
    file, ``path [n]: Name L12 (a, b.c), Class.method L40, CONSTANT`` (``[n]``: the message that showed it last; in
    brackets the names the body used), ranked by the outputs that showed the file plus the agent's messages and calls
    in the stretch naming it or its definitions, then the newest; within a file the definitions the agent named first. A definition or a used name is listed only where it names something ``known`` (what
    the request holds anyway) and no line above names; a file none of whose names is new is left out. Empty when none
    fits."""
    if budget_tokens <= 0 or not messages:
        return ""
    msgs = [m if isinstance(m, dict) else dict(m) for m in messages]
    ctx = StrategyContext(len, 0, 0, protected_turns=0, tools=tools, memo={})
    conversation = analyze(msgs, ctx)
    files: dict[str, _File] = {}
    for call in conversation.calls:
        if call.result is None or call.is_error:
            continue
        text = conversation.texts[call.result]
        if not text:
            continue
        action = call.action
        path = action.path if action.kind in ("read", "search") and action.path and "*" not in action.path else None
        start = action.range[0] if action.kind == "read" and action.range else 1 if action.kind == "read" and action.selector is None else None
        _scan(_lines_of(text, path, start), files, call.result, uses)
    said = [t or "" for t, r in zip(conversation.texts, conversation.roles) if r == "assistant"] + [c.arguments for c in conversation.calls]
    words = [set(_WORD.findall(text)) for text in said]
    spoken = set().union(*words)

    def named(name: str) -> bool:  # the agent's words or calls in the stretch name it
        return name.rsplit(".", 1)[-1] in spoken

    def referred(f: _File) -> int:  # how many of the agent's messages and calls name the file (its stem) or its definitions
        names = {f.path.rsplit("/", 1)[-1].split(".")[0], *(d.name.rsplit(".", 1)[-1] for d in f.defs.values() if len(d.name) > 5)}
        return sum(1 for w in words if not names.isdisjoint(w))

    score = {f.path: len(f.views) + referred(f) for f in files.values()}
    budget = budget_tokens * CHARS_PER_TOKEN
    seen = terms(known)

    def new(term: str) -> bool:  # named nowhere in the request (a part of a longer name there counts as named)
        return term not in seen and term not in known

    out: list[str] = []
    used = 0
    for entry in sorted(files.values(), key=lambda f: (-score[f.path], -f.last)):
        if budget - used < MIN_PART:
            break
        label = f"{entry.path.removeprefix('./')} [{first + entry.last}]:"
        items: list[str] = []
        size = len(label)
        first_named = [d for d in entry.defs.values() if named(d.name)]
        for d in [*first_named, *(d for d in entry.defs.values() if not named(d.name))]:
            new_uses = sorted((u for u in d.uses if new(u)), key=lambda u: not named(u))[:USES_PER_DEFINITION]
            if not new_uses and not any(new(t) for t in terms(d.name)):
                continue
            item = _item(d, new_uses)
            while new_uses and used + size + len(item) + 2 > budget:  # fewer of its names rather than none
                new_uses.pop()
                item = _item(d, new_uses)
            if used + size + len(item) + 2 > budget:
                break
            items.append(item)
            size += len(item) + 2
            seen.update(terms(item))
            seen.update(p for t in terms(item) for p in t.split("."))
        if not items:
            continue
        seen.update(terms(entry.path))
        out.append(label + " " + ", ".join(items))
        used += size + 1
    return "\n".join(out)


def _item(d: _Def, uses: Sequence[str]) -> str:
    return d.name + (f" L{d.line}" if d.line is not None else "") + (" (" + ", ".join(uses) + ")" if uses else "")
