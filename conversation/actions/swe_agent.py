"""SWE-agent's editor commands (open, goto, scroll_*, create, edit, insert, find_file, search_*) and its output headers."""

from __future__ import annotations

import re
import shlex

from conversation.actions.effect import Effect, resolve

COMMANDS = frozenset({"open", "goto", "scroll_up", "scroll_down", "create", "edit", "insert", "find_file", "search_file", "search_dir", "submit"})
_FILE_HEADER = re.compile(r"^\[File: (.+?) \(\d+ lines total\)\]", re.MULTILINE)
_OPEN_FILE = re.compile(r"^\(Open file: (.+?)\)\s*$", re.MULTILINE)
_CURRENT_DIR = re.compile(r"^\(Current directory: (.+?)\)\s*$", re.MULTILINE)
_NUMBERED = re.compile(r"^(\d+):", re.MULTILINE)


def command(text: str, cwd: str | None) -> Effect:
    """The effect of one editor command line (an edit's body on later lines is ignored)."""
    first_line = text.split("\n", 1)[0]
    try:
        words = shlex.split(first_line)
    except ValueError:
        words = first_line.split()
    name, args = (words[0], words[1:]) if words else ("", [])
    if name == "open" and args:
        return Effect("read", path=resolve(args[0], cwd), selector="window", shows_file=True)
    if name in {"goto", "scroll_up", "scroll_down"}:
        return Effect("read", selector="window", on_open_file=True, shows_file=True)
    if name == "create" and args:
        path = resolve(args[0], cwd)
        return Effect("write", path=path, writes=[path], shows_file=True)
    if name in {"edit", "insert"}:
        return Effect("edit", on_open_file=True, shows_file=True)
    if name in {"find_file", "search_dir"} and args:
        return Effect("search", path=resolve(args[1] if len(args) > 1 else ".", cwd), pattern=args[0])
    if name == "search_file" and args:
        if len(args) > 1:
            return Effect("search", path=resolve(args[1], cwd), pattern=args[0])
        return Effect("search", pattern=args[0], on_open_file=True)
    return Effect("other")


def shown_file(output: str) -> str | None:
    """The file an editor window shows: `[File: path (N lines total)]`."""
    head = output[:2000]
    match = _FILE_HEADER.search(head) if "[File: " in head else None
    return match.group(1).strip() if match else None


def footer(output: str) -> tuple[str | None, str | None]:
    """(open file, current directory) from the `(Open file: …)` / `(Current directory: …)` footer."""
    tail = output[-2000:]
    if "(Open file:" not in tail and "(Current directory:" not in tail:
        return None, None
    open_match, dir_match = _OPEN_FILE.search(tail), _CURRENT_DIR.search(tail)
    open_file = open_match.group(1).strip() if open_match else None
    return (None if open_file == "n/a" else open_file), (dir_match.group(1).strip() if dir_match else None)


def window(output: str) -> tuple[int, int] | None:
    """The line range a numbered window shows (`273:` … `372:`), or None."""
    numbers = [int(n) for n in _NUMBERED.findall(output)]
    return (min(numbers), max(numbers)) if numbers else None
