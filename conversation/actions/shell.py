"""Shell command lines split into words, segment by segment, into what they read, write, search or list."""

from __future__ import annotations

import re
import shlex
import zlib
from dataclasses import dataclass, replace
from functools import lru_cache

from conversation.actions import shell_commands as commands
from conversation.actions import swe_agent
from conversation.actions.effect import END, Effect, resolve
from conversation.actions.shell_words import split_words

__all__ = ["END", "ShellAction", "parse_shell", "split_heredocs", "tokenize"]

_HEREDOC = re.compile(r"(?<!<)<<(-?)\s*(['\"]?)([A-Za-z_][A-Za-z0-9_]*)\2")
_CHUNK = re.compile(r"'[^']*'?|\"(?:[^\"\\]|\\.)*\"?|\\.|[^'\"\\]+|\\\Z", re.DOTALL)
_COMMENT = re.compile(r"(^|[\s;&|])#[^\n]*")
_PLACEHOLDER = re.compile(r"RUYIQ\d+")
_DOUBLE_QUOTED_ESCAPE = re.compile(r'\\(["\\$`\n])')
_OPERATOR_CHARS = frozenset("();<>|&")
_SEPARATORS = frozenset({"&&", "||", ";", "&", ";;"})
_PIPES = frozenset({"|", "|&"})
_REDIRECTS = frozenset({">", ">>", ">|", "&>", "&>>", ">&", "<", "<<", "<<<", "<>", "<&"})
_LONG_QUOTE = 160


@dataclass(frozen=True)
class ShellAction:
    """What one shell command line does, as far as pruning needs to know.

    kind: read / write / edit / search / list / other ("other" is never treated as a file op).
    path: the file read or written, or the directory searched or listed.
    range: 1-based inclusive line range of a read (end END = to the end); None = no line range.
    selector: any other narrowing of a read (tail -n 20, a filter pipeline); None = none.
    writes: every path the command changes; "*" = paths it cannot know.
    uses: scripts the command runs; applies: patch files it applies.
    script_writes: (file, paths) for files written here that write those paths when run.
    on_open_file: SWE-agent command whose path is the file last opened.
    shows_file: the output is a numbered window of the file (SWE-agent editor).
    key: canonical identity of the command for deduplication.
    """

    kind: str = "other"
    path: str | None = None
    range: tuple[int, int] | None = None
    selector: str | None = None
    writes: tuple[str, ...] = ()
    pattern: str | None = None
    uses: tuple[str, ...] = ()
    applies: tuple[str, ...] = ()
    script_writes: tuple[tuple[str, tuple[str, ...]], ...] = ()
    on_open_file: bool = False
    shows_file: bool = False
    key: str = ""


@lru_cache(maxsize=4096)
def parse_shell(command: str, cwd: str | None = None) -> ShellAction:
    """Classify a command line run in cwd (None = unknown). Pure and cached."""
    stripped = command.strip()
    first = stripped.split(None, 1)[0] if stripped else ""
    if first in swe_agent.COMMANDS:
        return _finish(swe_agent.command(stripped, cwd), f"swe\x1f{cwd}\x1f{stripped}")
    try:
        effects, key = _effects(stripped, cwd)
    except ValueError:
        return ShellAction(key=f"shell\x1f{cwd}\x1f{stripped}")
    return _finish(_combine(effects), key)


def _finish(effect: Effect, key: str) -> ShellAction:
    kind = effect.kind if effect.kind in {"read", "write", "edit", "search", "list"} else "other"
    if kind == "read" and effect.path is not None and not effect.on_open_file:
        key = f"read\x1f{effect.path}\x1f{effect.range}\x1f{effect.selector}"
    return ShellAction(
        kind=kind,
        path=effect.path,
        range=effect.range if kind == "read" else None,
        selector=effect.selector if kind == "read" else None,
        writes=tuple(dict.fromkeys(effect.writes)),
        pattern=effect.pattern,
        uses=tuple(effect.uses),
        applies=tuple(effect.applies),
        script_writes=tuple(effect.script_writes),
        on_open_file=effect.on_open_file,
        shows_file=effect.shows_file,
        key=key,
    )


def split_heredocs(command: str) -> tuple[str, list[str]]:
    """The command lines with heredoc bodies cut out, and the bodies in order."""
    if "<<" not in command:
        return command, []
    lines = command.split("\n")
    kept: list[str] = []
    bodies: list[str] = []
    i = 0
    while i < len(lines):
        line = lines[i]
        kept.append(line)
        i += 1
        for match in _HEREDOC.finditer(line):
            delimiter, start = match.group(3), i
            while i < len(lines) and (lines[i].lstrip("\t") if match.group(1) else lines[i]).rstrip() != delimiter:
                i += 1
            bodies.append("\n".join(lines[start:i]))
            i += 1
    return "\n".join(kept), bodies


def tokenize(text: str) -> tuple[list[str], dict[str, str]]:
    """Shell words (operators split out, as shlex splits them) and the placeholders standing for quotes.

    Long quoted strings (a `python -c "..."` script) and quoted or escaped operator characters are set
    aside as `RUYIQ<n>` placeholders before splitting, so that they are never mistaken for operators.
    Unquoted newlines separate commands; `#` at the start of a word starts a comment.
    """
    out: list[str] = []
    held: dict[str, str] = {}
    for match in _CHUNK.finditer(text):
        chunk = match.group()
        if chunk[0] in "'\"" or (chunk[0] == "\\" and len(chunk) == 2 and chunk[1] != "\n"):
            inner = _unquote(chunk)
            if len(chunk) > _LONG_QUOTE or (inner and set(inner) & _OPERATOR_CHARS) or "RUYIQ" in inner:
                name = f"RUYIQ{len(held)}"
                held[name] = inner
                chunk = name
            out.append(chunk)
        elif chunk[0] == "\\":
            out.append(" ")
        else:
            out.append(_COMMENT.sub(r"\1", chunk).replace("\n", " ; "))
    return split_words("".join(out)), held


def _unquote(chunk: str) -> str:
    if chunk[0] == "'":
        return chunk[1:-1] if len(chunk) > 1 and chunk.endswith("'") else chunk[1:]
    if chunk[0] == "\\":
        return chunk[1:]
    body = chunk[1:-1] if len(chunk) > 1 and chunk.endswith('"') else chunk[1:]
    return _DOUBLE_QUOTED_ESCAPE.sub(lambda m: "" if m.group(1) == "\n" else m.group(1), body) if "\\" in body else body


def _is_operator(token: str) -> bool:
    return bool(token) and set(token) <= _OPERATOR_CHARS


def _effects(command: str, cwd: str | None) -> tuple[list[Effect], str]:
    text, bodies = split_heredocs(command)
    if "`" in text or "$(" in text:
        raise ValueError("command substitution")
    tokens, held = tokenize(text)
    segments: list[list[list[str]]] = [[[]]]
    for token in tokens:
        if token in _SEPARATORS:
            segments.append([[]])
        elif token in _PIPES:
            segments[-1].append([])
        elif _is_operator(token) and token not in _REDIRECTS:
            raise ValueError(f"unsupported operator {token}")
        else:
            segments[-1][-1].append(token)
    effects: list[Effect] = []
    key_parts: list[str] = []
    body_iter = iter(bodies)
    for segment in segments:
        stages = [_stage(words, held, body_iter) for words in segment]
        if not any(argv or redirects for argv, redirects in stages):
            continue
        argv0 = stages[0][0]
        if len(stages) == 1 and argv0[:1] == ["cd"]:
            cwd = resolve(argv0[1], cwd) if len(argv0) == 2 and argv0[1] not in {"-", "~"} else None
            continue
        key_parts.append(" | ".join(_stage_key(argv, redirects) for argv, redirects in stages))
        effects.append(_pipeline(stages, cwd))
    return effects, f"shell\x1f{cwd}\x1f" + " ; ".join(key_parts)


Stage = tuple[list[str], list[tuple[str, str]]]


def _stage(words: list[str], held: dict[str, str], bodies: object) -> Stage:
    """argv and redirects [(operator, target or heredoc body)] of one pipeline stage."""
    argv: list[str] = []
    redirects: list[tuple[str, str]] = []
    i = 0
    while i < len(words):
        word = words[i]
        if word in _REDIRECTS:
            if argv and argv[-1].isdigit() and i > 0 and words[i - 1] == argv[-1]:
                argv.pop()
            target = words[i + 1] if i + 1 < len(words) else ""
            if word == "<<":
                target = next(bodies, "")  # type: ignore[call-overload]
            redirects.append((word, _restore(target, held) if word != "<<" else target))
            i += 2
            continue
        argv.append(_restore(word, held))
        i += 1
    return argv, redirects


def _stage_key(argv: list[str], redirects: list[tuple[str, str]]) -> str:
    """A stage as canonical text: argv, redirects, and a checksum standing for each heredoc body."""
    parts = [shlex.join(argv)]
    parts += [f"{op} #{zlib.crc32(target.encode('utf-8', 'surrogatepass')):08x}" if op == "<<" else f"{op} {target}" for op, target in redirects]
    return " ".join(parts)


def _restore(word: str, held: dict[str, str]) -> str:
    return _PLACEHOLDER.sub(lambda m: held.get(m.group(), m.group()), word) if "RUYIQ" in word else word


def _pipeline(stages: list[Stage], cwd: str | None) -> Effect:
    """The effect of `first | filter | filter`, composing line ranges where the filters keep lines."""
    argv, redirects = stages[0]
    effect = commands.command(argv, redirects, cwd)
    if effect.kind == "subshell":
        inner = parse_shell(effect.selector or "", cwd)
        effect = Effect(
            inner.kind, inner.path, inner.range, inner.selector, inner.writes, inner.pattern, inner.uses, inner.applies, inner.script_writes
        )
    for argv, redirects in stages[1:]:
        effect = commands.filtered(effect, argv, redirects, cwd)
    return effect


def _combine(effects: list[Effect]) -> Effect:
    """One effect for a whole line: the single substantive segment, or the first write, or other."""
    substantive = [e for e in effects if e.kind != "benign"]
    if len(substantive) == 1:
        return substantive[0]
    writes = [w for e in substantive for w in e.writes]
    uses = [u for e in substantive for u in e.uses]
    applies = [a for e in substantive for a in e.applies]
    script_writes = [s for e in substantive for s in e.script_writes]
    first_write = next((e for e in substantive if e.kind in {"write", "edit"}), None)
    if first_write is not None:
        return replace(first_write, writes=writes, uses=uses, applies=applies, script_writes=script_writes)
    return Effect("other", writes=writes, uses=uses, applies=applies, script_writes=script_writes)
