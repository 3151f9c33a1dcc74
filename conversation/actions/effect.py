"""The Effect of one shell command on files, and the path helpers the shell parser shares."""

from __future__ import annotations

import posixpath
import re
from dataclasses import dataclass

END = 10**9  # open end of a line range ("tail -n +K" reads to the end)


@dataclass(frozen=True)
class Effect:
    """What one command or pipeline does; kinds beyond ShellAction's: benign, filter, subshell.

    The fields mean what ShellAction's mean; applies holds patch files applied (their targets
    are known only if the patch was written earlier in the conversation).
    """

    kind: str
    path: str | None = None
    range: tuple[int, int] | None = None
    selector: str | None = None
    writes: tuple[str, ...] | list[str] = ()
    pattern: str | None = None
    uses: tuple[str, ...] | list[str] = ()
    applies: tuple[str, ...] | list[str] = ()
    script_writes: tuple[tuple[str, tuple[str, ...]], ...] | list[tuple[str, tuple[str, ...]]] = ()
    on_open_file: bool = False
    shows_file: bool = False


def resolve(path: str, cwd: str | None) -> str:
    """Normalise a path against cwd (unknown cwd leaves it relative); ~ and $VAR paths kept as written."""
    if not path or path.startswith(("~", "$")):
        return path
    if not path.startswith("/") and cwd:
        path = posixpath.join(cwd, path)
    return posixpath.normpath(path)


def positional(args: list[str], valued: frozenset[str] = frozenset()) -> list[str]:
    """Arguments that are not options (options in valued take the next argument; -- ends options)."""
    out: list[str] = []
    i = 0
    while i < len(args):
        arg = args[i]
        if arg == "--":
            return out + args[i + 1 :]
        if arg in valued:
            i += 2
            continue
        if not (arg.startswith("-") and arg != "-"):
            out.append(arg)
        i += 1
    return out


def command_name(argv: list[str]) -> str:
    """The program's base name, python3.11 and friends as python."""
    name = posixpath.basename(argv[0]) if argv else ""
    return "python" if re.fullmatch(r"python[\d.]*", name) else name
