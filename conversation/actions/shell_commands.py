"""What one shell command does to files: cat/head/tail/nl/sed -n read, grep searches, ls/find list; writes in shell_writes."""

from __future__ import annotations

import re
import shlex
from dataclasses import replace

from conversation.actions import shell_writes
from conversation.actions.effect import END, Effect, command_name, positional, resolve

WRITE_REDIRECTS = frozenset({">", ">>", ">|", "&>", "&>>"})
_PREFIXES = frozenset({"sudo", "nohup", "command", "exec", "time", "builtin", "stdbuf", "nice"})
_BENIGN = frozenset(
    {
        "echo",
        "printf",
        "true",
        "false",
        ":",
        "pwd",
        "sleep",
        "clear",
        "export",
        "unset",
        "set",
        "mkdir",
        "chmod",
        "chown",
        "which",
        "type",
        "source",
        ".",
        "date",
        "whoami",
        "hostname",
        "history",
        "alias",
        "ulimit",
    }
)
_READERS = frozenset({"cat", "nl", "less", "more", "bat", "batcat"})
_SEARCHERS = frozenset({"grep", "egrep", "fgrep", "rg", "ag", "ack"})
_FILTERS = frozenset({"wc", "sort", "uniq", "cut", "awk", "tr", "column", "fold", "jq", "rev", "expand"}) | _SEARCHERS
_GREP_VALUED = frozenset(
    {
        "-e",
        "-f",
        "-m",
        "-A",
        "-B",
        "-C",
        "-d",
        "-D",
        "--include",
        "--exclude",
        "--exclude-dir",
        "--regexp",
        "--file",
        "--max-count",
        "--context",
        "--after-context",
        "--before-context",
        "-g",
        "--glob",
        "-t",
        "--type",
        "-T",
        "--type-not",
        "-j",
        "--max-depth",
        "-M",
        "--iglob",
    }
)
_SED_LINES = re.compile(r"^\s*(\d+)\s*(?:,\s*(\d+|\$)\s*)?p\s*$")
Transform = tuple[str, int, int] | str | None


def strip_prefixes(argv: list[str]) -> list[str]:
    """argv without sudo / env A=B / timeout 10 / VAR=value in front."""
    while argv:
        head = argv[0]
        if head in _PREFIXES or re.match(r"^[A-Za-z_][A-Za-z0-9_]*=", head):
            argv = argv[1:]
        elif head in {"env", "timeout"}:
            argv = argv[1:]
            while argv and (argv[0].startswith("-") or "=" in argv[0]):
                argv = argv[1:]
            if head == "timeout" and argv[:1] and argv[0][:1].isdigit():
                argv = argv[1:]
        else:
            return argv
    return argv


def line_transform(name: str, args: list[str]) -> tuple[list[str], Transform] | None:
    """(file arguments, what the command keeps of its input's lines) for cat/nl/head/tail/sed -n.

    The transform is None (every line, maybe numbered), ("range", a, b) of the input's lines,
    ("tail", n, 0), ("from", k, 0), or a string: a selection that is no line range.
    None overall: not a line-keeping command.
    """
    if name in _READERS:
        return positional(args, frozenset({"-b", "-w", "-s", "-v", "-i", "-n", "-d"}) if name == "nl" else frozenset()), None
    if name in {"head", "tail"}:
        count, files, i = "10", [], 0
        while i < len(args):
            arg = args[i]
            if arg in {"-n", "--lines", "-c", "--bytes"} and i + 1 < len(args):
                count = args[i + 1] if arg in {"-n", "--lines"} else "bytes"
                i += 1
            elif arg.startswith("-n") and len(arg) > 2:
                count = arg[2:]
            elif re.fullmatch(r"-\d+", arg):
                count = arg[1:]
            elif arg.startswith("-") and arg != "-":
                count = "follow" if arg in {"-f", "-F", "--follow"} else count
            else:
                files.append(arg)
            i += 1
        plus = count.startswith("+")
        if not count.lstrip("+").isdigit():
            return files, f"{name} {count}"
        n = int(count.lstrip("+"))
        if name == "head":
            return files, ("range", 1, n) if not plus else f"head +{n}"
        return files, ("from", n, 0) if plus else ("tail", n, 0)
    if name == "sed":
        return _sed_print(args)
    return None


def _sed_print(args: list[str]) -> tuple[list[str], Transform] | None:
    quiet, scripts, files, i = False, [], [], 0
    while i < len(args):
        arg = args[i]
        if arg in {"-e", "--expression"} and i + 1 < len(args):
            scripts.append(args[i + 1])
            i += 1
        elif arg in {"-n", "--quiet", "--silent"}:
            quiet = True
        elif arg.startswith(("-i", "--in-place")) or arg in {"-f", "--file"}:
            return None
        elif arg.startswith("-") and not arg.startswith("--") and len(arg) > 1:
            quiet = quiet or "n" in arg
            if "i" in arg[1:]:
                return None
            if arg.endswith("e") and i + 1 < len(args):
                scripts.append(args[i + 1])
                i += 1
        elif not arg.startswith("-") and not scripts:
            scripts.append(arg)
        elif not arg.startswith("-"):
            files.append(arg)
        i += 1
    if not quiet:
        return None
    match = _SED_LINES.match(scripts[0]) if len(scripts) == 1 else None
    if match is None:
        return files, "sed -n " + ";".join(scripts)
    start = int(match.group(1))
    end = END if match.group(2) == "$" else int(match.group(2) or start)
    return files, ("range", start, end)


def compose(effect: Effect, transform: Transform) -> Effect:
    """Narrow a read's range (or selector) by a line transform applied to its output."""
    if transform is None:
        return effect
    if isinstance(transform, str) or effect.selector is not None:
        label = transform if isinstance(transform, str) else f"{transform[0]} {transform[1]} {transform[2]}"
        return replace(effect, selector=f"{effect.selector} | {label}" if effect.selector else label)
    how, a, b = transform
    start, end = effect.range or (1, END)
    if how == "range":
        return replace(effect, range=(start + a - 1, min(end, start + b - 1)))
    if how == "from":
        return replace(effect, range=(start + a - 1, end))
    if end != END:
        return replace(effect, range=(max(start, end - a + 1), end))
    return replace(effect, selector=f"tail {a}")


def command(argv: list[str], redirects: list[tuple[str, str]], cwd: str | None) -> Effect:
    """The effect of the first command of a pipeline, its redirects included."""
    argv = strip_prefixes(argv)
    name, args = command_name(argv), argv[1:]
    heredoc = next((t for op, t in redirects if op in {"<<", "<<<"}), None)
    stdin = next((t for op, t in redirects if op == "<"), None)
    effect = _first(name, args, cwd, heredoc, stdin)
    targets = [
        resolve(t, cwd) for op, t in redirects if op in WRITE_REDIRECTS and t and not t.startswith("&") and not t.isdigit() and t != "/dev/null"
    ]
    if not targets:
        return effect
    sw = list(effect.script_writes)
    if heredoc is not None and name in {"cat", "tee"}:
        sw += shell_writes.script_writes(targets[0], heredoc)
    appends = all(op == ">>" for op, _ in redirects if op in WRITE_REDIRECTS)
    kind = "edit" if effect.kind == "edit" or appends else "write"
    return replace(
        effect,
        kind=kind,
        path=effect.path if effect.kind == "edit" else targets[0],
        range=None,
        selector=None,
        writes=[*effect.writes, *targets],
        script_writes=sw,
    )


def _first(name: str, args: list[str], cwd: str | None, heredoc: str | None, stdin: str | None) -> Effect:
    lines = line_transform(name, args)
    if lines is not None:
        files, transform = lines
        if len(files) != 1 or files[0] == "-":
            return Effect("filter" if not files else "other")
        return compose(Effect("read", path=resolve(files[0], cwd)), transform)
    if name in _SEARCHERS:
        return search(name, args, cwd)
    if name in {"ls", "tree", "dir"}:
        paths = positional(args, frozenset({"-I", "--ignore", "-w", "--width", "-L", "-P"}))
        return Effect("list", path=resolve(paths[0] if paths else ".", cwd))
    if name == "find":
        return _find(args, cwd)
    if name in _BENIGN:
        return Effect("benign")
    if name in shell_writes.FILE_OPS:
        return shell_writes.file_op(name, args, cwd)
    written: Effect | None = None
    if name == "sed":
        written = shell_writes.sed_in_place(args, cwd)
    elif name == "git":
        if args[:1] == ["grep"]:
            return replace(search("grep", [*args[1:], "-r"], cwd), kind="search")
        written = shell_writes.git(args, cwd)
    elif name in {"patch", "apply_patch"}:
        written = shell_writes.patch(name, args, cwd, heredoc, stdin)
    elif name == "python":
        written = shell_writes.python(args, cwd, heredoc)
    elif name in {"bash", "sh", "zsh", "dash"}:
        written = shell_writes.run_shell(args, cwd, heredoc)
    elif name == "perl":
        written = shell_writes.perl(args, cwd)
    return written or Effect("other")


def search(name: str, args: list[str], cwd: str | None) -> Effect:
    """grep / rg / ag: the pattern and the one path searched (None: several); no path and no -r: a filter."""
    pattern: str | None = None
    paths: list[str] = []
    recursive, ignore_case, i = name in {"rg", "ag", "ack"}, False, 0
    while i < len(args):
        arg = args[i]
        if arg in _GREP_VALUED and i + 1 < len(args):
            pattern = args[i + 1] if arg in {"-e", "--regexp"} else pattern
            i += 2
            continue
        if arg.startswith("--regexp="):
            pattern = arg.split("=", 1)[1]
        elif arg.startswith("-") and arg != "-":
            short = arg[1:] if not arg.startswith("--") else ""
            recursive = recursive or "r" in short or "R" in short or arg == "--recursive"
            ignore_case = ignore_case or "i" in short or arg == "--ignore-case"
        elif pattern is None:
            pattern = arg
        else:
            paths.append(arg)
        i += 1
    if ignore_case and pattern is not None:
        pattern = "(?i)" + pattern
    if not paths and not recursive:
        return Effect("filter", pattern=pattern)
    path = resolve(paths[0], cwd) if len(paths) == 1 else (resolve(".", cwd) if not paths else None)
    return Effect("search", path=path, pattern=pattern)


def _find(args: list[str], cwd: str | None) -> Effect:
    roots = []
    for arg in args:
        if arg.startswith(("-", "(", "!")):
            break
        roots.append(arg)
    root = resolve(roots[0] if roots else ".", cwd)
    rest = args[len(roots) :]
    pattern = next((rest[i + 1] for i, a in enumerate(rest[:-1]) if a in {"-name", "-iname", "-path", "-regex"}), None)
    if "-delete" in rest:
        return Effect("edit", path=root, writes=[root])
    for i, arg in enumerate(rest):
        if arg in {"-exec", "-execdir", "-ok", "-okdir"}:
            sub = rest[i + 1 :]
            sub = sub[: next((j for j, a in enumerate(sub) if a in {";", "+"}), len(sub))]
            sub_name = command_name(sub)
            if sub_name in _SEARCHERS:
                found = search(sub_name, [a for a in sub[1:] if a != "{}"] + ["-r"], cwd)
                return replace(found, kind="search", path=root)
            if sub_name in {"rm", "sed", "mv", "perl", "truncate", "tee"}:
                return Effect("edit", path=root, writes=[root])
            return Effect("other")
    return Effect("list", path=root, pattern=pattern)


def filtered(effect: Effect, argv: list[str], redirects: list[tuple[str, str]], cwd: str | None) -> Effect:
    """The effect of `effect | argv`: a line-keeping filter narrows a read, anything else makes it other."""
    argv = strip_prefixes(argv)
    name, args = command_name(argv), argv[1:]
    if name == "xargs":
        sub = strip_prefixes(args[next((i for i, a in enumerate(args) if not a.startswith("-")), len(args)) :])
        if command_name(sub) in _SEARCHERS and effect.kind in {"list", "search"}:
            found = search(command_name(sub), sub[1:] + ["-r"], cwd)
            return replace(effect, kind="search", pattern=found.pattern, selector=shlex.join(argv))
        if command_name(sub) in {"rm", "sed", "perl", "mv"}:
            return Effect("edit", writes=[*effect.writes, effect.path or "*"])
    if effect.kind == "benign" or name in {"tee", "xargs"} or any(op in WRITE_REDIRECTS for op, _ in redirects):
        after = command(argv, redirects, cwd)
        kind = after.kind if after.kind in {"write", "edit"} else "other"
        return replace(after, kind=kind, writes=[*effect.writes, *after.writes])
    lines = line_transform(name, args)
    if lines is not None and not lines[0]:
        return compose(effect, lines[1]) if effect.kind in {"read", "search", "list"} else effect
    if name in _FILTERS and effect.kind in {"read", "search", "list"}:
        grep = search(name, args, cwd) if name in _SEARCHERS else None
        narrowed = replace(effect, pattern=grep.pattern) if grep is not None and grep.kind == "filter" else effect
        return compose(narrowed, shlex.join(argv))
    return Effect("other", writes=effect.writes, uses=effect.uses, applies=effect.applies, script_writes=effect.script_writes)
