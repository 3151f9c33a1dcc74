"""Shell commands that change files: cp/mv/rm/tee, git checkout and friends, patch, python scripts that open files for writing."""

from __future__ import annotations

import posixpath
import re

from conversation.actions.effect import Effect, positional, resolve

_PY_OPEN = re.compile(r"open\(\s*[rbf]?(['\"])([^'\"\n]+)\1\s*,\s*(?:mode\s*=\s*)?[rbf]?(['\"])([^'\"]*)\3")
_PY_PATH_WRITE = re.compile(r"Path\(\s*[rbf]?(['\"])([^'\"\n]+)\1\s*\)\.write_(?:text|bytes)\(")
_PATCH_HEADER = re.compile(r"^(?:\+\+\+ (\S+)|\*\*\* (?:Update|Add|Delete) File: (.+)|\*\*\* Move to: (.+))$", re.MULTILINE)
FILE_OPS = frozenset({"cp", "mv", "rm", "touch", "ln", "install", "truncate", "tee", "unlink", "rmdir"})


def patch_paths(text: str, strip: int = 0) -> list[str]:
    """Paths a unified diff (`+++ b/x`) or an apply_patch text (`*** Update File: x`) changes."""
    paths: list[str] = []
    for match in _PATCH_HEADER.finditer(text):
        path = (match.group(1) or match.group(2) or match.group(3) or "").strip()
        if match.group(1):
            if path == "/dev/null":
                continue
            path = "/".join(path.split("/")[strip:]) if strip else path
        paths.append(path)
    return list(dict.fromkeys(paths))


def python_writes(code: str) -> list[str]:
    """Literal paths a Python snippet opens for writing (open(p, 'w'|'a'|'x'|'+'), Path(p).write_text)."""
    paths = [m.group(2) for m in _PY_OPEN.finditer(code) if set(m.group(4)) & set("wax+")]
    paths += [m.group(2) for m in _PY_PATH_WRITE.finditer(code)]
    return list(dict.fromkeys(paths))


def script_writes(target: str, body: str) -> list[tuple[str, tuple[str, ...]]]:
    """For a file written from a heredoc: the paths it writes when later run (python) or applied (patch)."""
    inner = python_writes(body) if not target.endswith((".patch", ".diff")) else []
    inner = inner or patch_paths(body, 1)
    return [(target, tuple(inner))] if inner else []


def file_op(name: str, args: list[str], cwd: str | None) -> Effect:
    """cp/ln/install write their destination; mv, rm, touch, tee, truncate change every path named."""
    paths = [resolve(p, cwd) for p in positional(args, frozenset({"-s", "--size", "-t", "-m", "-o", "-g"}))]
    written = paths[-1:] if name in {"cp", "ln", "install"} else paths
    return Effect("write" if name == "cp" else "edit", path=written[0] if written else None, writes=written)


def sed_in_place(args: list[str], cwd: str | None) -> Effect | None:
    """`sed -i` edits its files; None when sed is not editing in place."""
    if not any(a.startswith(("-i", "--in-place")) for a in args):
        return None
    files = positional(args, frozenset({"-e", "--expression", "-f", "--file"}))
    if not any(a in {"-e", "--expression", "-f", "--file"} for a in args):
        files = files[1:]
    written = [resolve(f, cwd) for f in files] or ["*"]
    return Effect("edit", path=written[0] if written != ["*"] else None, writes=written)


def git(args: list[str], cwd: str | None) -> Effect | None:
    """git checkout/restore of files, or of everything (stash, reset --hard, apply...); None: not a write."""
    while args[:1] in (["-C"], ["-c"]) and len(args) > 1:
        cwd = resolve(args[1], cwd) if args[0] == "-C" else cwd
        args = args[2:]
    sub, rest = (args[0], args[1:]) if args else ("", [])
    if sub in {"checkout", "restore"}:
        if {"-b", "-B", "--orphan"} & set(rest):
            return Effect("other")
        files = rest[rest.index("--") + 1 :] if "--" in rest else [a for a in positional(rest) if "/" in a or "." in a]
        written = [resolve(f, cwd) for f in files] or ["*"]
        return Effect("edit", path=written[0] if files else None, writes=written)
    if sub in {"apply", "am"}:
        files = positional(rest, frozenset({"-p", "--directory", "--exclude", "--include"}))
        return Effect("edit", applies=[resolve(f, cwd) for f in files] or ["-"])
    if sub == "reset" and "--hard" not in rest:
        return None
    if sub in {"stash", "reset", "merge", "pull", "rebase", "cherry-pick", "revert", "switch", "clean"}:
        return None if rest[:1] in (["list"], ["show"]) else Effect("edit", writes=["*"])
    return None


def patch(name: str, args: list[str], cwd: str | None, heredoc: str | None, stdin: str | None) -> Effect:
    """patch / apply_patch: the headers of an inline patch, else the patch file it applies."""
    strip = next((int(a[2:]) for a in args if re.fullmatch(r"-p\d+", a)), 0)
    if name == "apply_patch" or heredoc is not None:
        text = heredoc if heredoc is not None else " ".join(args)
        written = [resolve(p, cwd) for p in patch_paths(text, strip)] or ["*"]
        return Effect("edit", path=written[0] if written != ["*"] else None, writes=written)
    files = positional(args, frozenset({"-i", "--input", "-o", "-d", "-r", "-F", "-D", "-z"}))
    source = next((args[i + 1] for i, a in enumerate(args[:-1]) if a in {"-i", "--input"}), stdin)
    if files:
        target = resolve(files[0], cwd)
        return Effect("edit", path=target, writes=[target])
    return Effect("edit", applies=[resolve(source, cwd) if source else "-"])


def python(args: list[str], cwd: str | None, heredoc: str | None) -> Effect:
    """python -c / python - <<EOF that opens files for writing; python script.py runs (uses) a script."""
    code: str | None = None
    i = 0
    while i < len(args):
        arg = args[i]
        if arg == "-c" and i + 1 < len(args):
            code = args[i + 1]
            break
        if arg == "-m":
            return Effect("other")
        if arg in {"-W", "-X"}:
            i += 2
            continue
        if arg == "-":
            break
        if not arg.startswith("-"):
            return Effect("other", uses=[resolve(arg, cwd)])
        i += 1
    code = code if code is not None else heredoc
    written = [resolve(p, cwd) for p in python_writes(code or "")]
    return Effect("write", path=written[0], writes=written) if written else Effect("other")


def perl(args: list[str], cwd: str | None) -> Effect | None:
    """perl -i / -pi -e edits its files in place; None otherwise."""
    if not any(a.startswith("-") and not a.startswith("--") and "i" in a for a in args):
        return None
    files = [resolve(f, cwd) for f in positional(args, frozenset({"-e", "-E", "-M"}))]
    return Effect("edit", path=files[0] if files else None, writes=files or ["*"])


def run_shell(args: list[str], cwd: str | None, heredoc: str | None) -> Effect:
    """bash -c STRING / bash <<EOF parse their script (kind subshell); bash script.sh uses the script."""
    flags = [a for a in args if a.startswith("-") and not a.startswith("--")]
    if any("c" in f for f in flags):
        rest = [a for a in args if not a.startswith("-")]
        return Effect("subshell", selector=rest[0]) if rest else Effect("other")
    scripts = positional(args)
    if scripts:
        return Effect("other", uses=[posixpath.normpath(resolve(scripts[0], cwd))])
    return Effect("subshell", selector=heredoc) if heredoc else Effect("other")
