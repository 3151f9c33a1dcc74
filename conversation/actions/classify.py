"""Tool calls classified as read / write / edit / search / list / other, with their path, line range and dedup key."""

from __future__ import annotations

import json
import shlex
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from types import MappingProxyType
from typing import Any

from conversation.actions import swe_agent
from conversation.actions.effect import END, resolve
from conversation.actions.options import OptionError
from conversation.actions.shell import parse_shell
from conversation.actions.shell_writes import patch_paths
from redaction.redact import redact

KINDS = frozenset({"read", "write", "edit", "search", "list", "shell", "other"})
_LABEL_CHARS = 100


@dataclass(frozen=True)
class ToolSpec:
    """How one tool's calls are read. Every field names an argument of the call, or is a flag.

    kind: read / write / edit / search / list / shell (the command argument is parsed) / other.
    path: argument names that may hold the path, first present wins.
    command / workdir: shell tools: the command line (a string or an argv list) and its directory.
    pattern: the search or glob pattern. offset / limit (offset_base 0 or 1) or view_range: lines read.
    subcommand + subkinds: an argument whose value chooses the kind (str_replace_editor's command).
    patch: an argument holding an apply_patch / unified diff text; its headers name the paths.
    open_file: with no path argument, the path is the file the editor has open (SWE-agent).
    window: the output is a numbered window whose line numbers give the range read.
    shows_file: the output shows (part of) the file, so a later edit makes it stale.
    """

    kind: str
    path: tuple[str, ...] = ()
    command: str | None = None
    workdir: str | None = None
    pattern: str | None = None
    offset: str | None = None
    limit: str | None = None
    offset_base: int = 1
    view_range: str | None = None
    subcommand: str | None = None
    subkinds: tuple[tuple[str, str], ...] = ()
    patch: str | None = None
    open_file: bool = False
    window: bool = False
    shows_file: bool = False

    def __post_init__(self) -> None:
        if self.kind not in KINDS:
            raise OptionError(f"kind: expected one of {sorted(KINDS)}, got {self.kind!r}")


_PATHS = ("filePath", "file_path", "absolute_path", "path")
_VIEW = (("view", "read"), ("create", "write"), ("str_replace", "edit"), ("insert", "edit"), ("undo_edit", "edit"))
DEFAULT_TOOLS: Mapping[str, ToolSpec] = MappingProxyType(
    {
        # Claude Code
        "Read": ToolSpec("read", ("file_path",), offset="offset", limit="limit"),
        "Write": ToolSpec("write", ("file_path",)),
        "Edit": ToolSpec("edit", ("file_path",), shows_file=True),
        "MultiEdit": ToolSpec("edit", ("file_path",)),
        "NotebookEdit": ToolSpec("edit", ("notebook_path",)),
        "Grep": ToolSpec("search", ("path",), pattern="pattern"),
        "Glob": ToolSpec("list", ("path",), pattern="pattern"),
        "LS": ToolSpec("list", ("path",)),
        "Bash": ToolSpec("shell", command="command"),
        # opencode (edit also serves SWE-agent's search/replace edit on the open file)
        "read": ToolSpec("read", _PATHS, offset="offset", limit="limit", offset_base=0),
        "write": ToolSpec("write", _PATHS),
        "edit": ToolSpec("edit", _PATHS, open_file=True, shows_file=True),
        "multiedit": ToolSpec("edit", _PATHS),
        "patch": ToolSpec("edit", patch="patchText"),
        "grep": ToolSpec("search", ("path",), pattern="pattern"),
        "glob": ToolSpec("list", ("path",), pattern="pattern"),
        "list": ToolSpec("list", ("path",)),
        "bash": ToolSpec("shell", command="command"),
        # OpenHands
        "str_replace_editor": ToolSpec("edit", ("path",), subcommand="command", subkinds=_VIEW, view_range="view_range", shows_file=True),
        "execute_bash": ToolSpec("shell", command="command"),
        # SWE-agent function calling
        "open": ToolSpec("read", ("path",), window=True, shows_file=True),
        "goto": ToolSpec("read", open_file=True, window=True, shows_file=True),
        "scroll_up": ToolSpec("read", open_file=True, window=True, shows_file=True),
        "scroll_down": ToolSpec("read", open_file=True, window=True, shows_file=True),
        "create": ToolSpec("write", ("filename", "path"), shows_file=True),
        "insert": ToolSpec("edit", open_file=True, shows_file=True),
        "find_file": ToolSpec("search", ("dir",), pattern="file_name"),
        "search_file": ToolSpec("search", ("file",), pattern="search_term", open_file=True),
        "search_dir": ToolSpec("search", ("dir",), pattern="search_term"),
        # Codex
        "shell": ToolSpec("shell", command="command", workdir="workdir"),
        "apply_patch": ToolSpec("edit", patch="input"),
        # Gemini CLI and Cline
        "read_file": ToolSpec("read", _PATHS, offset="offset", limit="limit", offset_base=0),
        "write_file": ToolSpec("write", _PATHS),
        "write_to_file": ToolSpec("write", _PATHS),
        "replace": ToolSpec("edit", _PATHS),
        "replace_in_file": ToolSpec("edit", _PATHS),
        "search_file_content": ToolSpec("search", ("path",), pattern="pattern"),
        "search_files": ToolSpec("search", ("path",), pattern="regex"),
        "list_directory": ToolSpec("list", ("path",)),
        "list_files": ToolSpec("list", ("path",)),
        "run_shell_command": ToolSpec("shell", command="command"),
        "execute_command": ToolSpec("shell", command="command"),
    }
)


def tools_from_mapping(data: Mapping[str, Mapping[str, Any]] | None) -> Mapping[str, ToolSpec]:
    """The default table with config entries added or replacing defaults; errors name the tool."""
    table = dict(DEFAULT_TOOLS)
    for name, entry in (data or {}).items():
        try:
            values: dict[str, Any] = {k: tuple(v) if isinstance(v, list) else v for k, v in dict(entry).items()}
            subkinds = values.get("subkinds")
            if isinstance(subkinds, Mapping):
                values["subkinds"] = tuple(subkinds.items())
            table[name] = ToolSpec(**values)
        except (TypeError, OptionError) as exc:
            raise OptionError(f"tools.{name}: {exc}") from None
    return MappingProxyType(table)


@dataclass(frozen=True)
class ToolAction:
    """What a call does: kind, path, line range (None = whole file / no range) and dedup key.

    selector narrows a read in a way that is no line range; writes lists every path changed
    ("*" = unknown); label is the call in a few words, for placeholders.
    """

    kind: str
    path: str | None = None
    range: tuple[int, int] | None = None
    key: str = ""
    selector: str | None = None
    writes: tuple[str, ...] = ()
    pattern: str | None = None
    label: str = ""
    shows_file: bool = False
    window: bool = False


@dataclass
class ClassifyState:
    """What classifying one conversation in order learns: working directory, open file, scripts."""

    tools: Mapping[str, ToolSpec] = field(default_factory=lambda: DEFAULT_TOOLS)
    cwd: str | None = None
    open_file: str | None = None
    script_writes: dict[str, tuple[str, ...]] = field(default_factory=dict)


def parse_arguments(raw: object) -> dict[str, Any] | None:
    """The arguments of a call as a dict, or None when they are not a JSON object."""
    if isinstance(raw, dict):
        return raw
    try:
        value = json.loads(raw) if isinstance(raw, str | bytes) else None
    except ValueError:
        return None
    return value if isinstance(value, dict) else None


def read_key(path: str | None, line_range: tuple[int, int] | None, selector: str | None) -> str:
    return f"read\x1f{path}\x1f{line_range}\x1f{selector}"


def classify(tool_call: Mapping[str, Any], state: ClassifyState) -> ToolAction:
    """Classify one OpenAI tool_call given what the conversation so far has established."""
    function = tool_call.get("function") or {}
    name = str(function.get("name") or "")
    args = parse_arguments(function.get("arguments"))
    spec = state.tools.get(name)
    if args is None or spec is None or spec.kind == "other":
        said = args.get("description") if args is not None else None  # a sub-agent's (Claude Code, Qwen Code, opencode)
        label = _clip(f"{name}: {said}") if isinstance(said, str) and said.strip() else name
        return ToolAction("other", key=f"{name}\x1f{function.get('arguments')}", label=label)
    if spec.kind == "shell":
        return _shell(name, spec, args, state)
    kind = dict(spec.subkinds).get(str(args.get(spec.subcommand)), "other") if spec.subcommand else spec.kind
    raw_path = next((args[p] for p in spec.path if isinstance(args.get(p), str) and args[p]), None)
    path = resolve(raw_path, state.cwd) if raw_path else (state.open_file if spec.open_file else None)
    writes: tuple[str, ...] = ()
    if spec.patch and isinstance(args.get(spec.patch), str):
        writes = tuple(resolve(p, state.cwd) for p in patch_paths(args[spec.patch], 1)) or ("*",)
        path = path or (writes[0] if writes != ("*",) else None)
    elif kind in {"write", "edit"}:
        writes = (path,) if path else ("*",)
    line_range = _range(spec, args)
    pattern = args.get(spec.pattern) if spec.pattern and isinstance(args.get(spec.pattern), str) else None
    selector = "window" if spec.window and kind == "read" else None
    canonical = json.dumps({k: v for k, v in args.items() if v is not None}, sort_keys=True, ensure_ascii=False)
    key = read_key(path, line_range, selector) if kind == "read" else f"{name}\x1f{canonical}\x1f{path}"
    label = f"{name} {raw_path or path or canonical}"
    if kind == "write" and path:
        state.script_writes.pop(path, None)
    return ToolAction(kind, path, line_range, key, selector, writes, pattern, _clip(label), spec.shows_file, spec.window)


def _range(spec: ToolSpec, args: Mapping[str, Any]) -> tuple[int, int] | None:
    view = args.get(spec.view_range) if spec.view_range else None
    if isinstance(view, list) and len(view) == 2 and all(isinstance(v, int) for v in view):
        return (view[0], END if view[1] < 0 else view[1])
    offset = args.get(spec.offset) if spec.offset else None
    limit = args.get(spec.limit) if spec.limit else None
    if not isinstance(offset, int) and not isinstance(limit, int):
        return None
    start = (offset if isinstance(offset, int) else spec.offset_base) + 1 - spec.offset_base
    return (start, start + limit - 1) if isinstance(limit, int) and limit > 0 else (start, END)


def _shell(name: str, spec: ToolSpec, args: Mapping[str, Any], state: ClassifyState) -> ToolAction:
    command = args.get(spec.command or "command")
    if isinstance(command, list) and all(isinstance(c, str) for c in command):
        command = command[2] if len(command) == 3 and command[1] in {"-c", "-lc"} else shlex.join(command)
    if not isinstance(command, str):
        return ToolAction("other", key=f"{name}\x1f{command!r}", label=name)
    workdir = args.get(spec.workdir) if spec.workdir else None
    cwd = resolve(workdir, state.cwd) if isinstance(workdir, str) and workdir else state.cwd
    parsed = parse_shell(command, cwd)
    path = state.open_file if parsed.on_open_file else parsed.path
    writes = list(parsed.writes)
    if parsed.on_open_file and parsed.kind in {"write", "edit"}:
        writes.append(path or "*")
    for script in parsed.uses:
        base = script.rsplit("/", 1)[0] if "/" in script else cwd
        writes += [resolve(p, base) for p in state.script_writes.get(script, ())]
    for applied in parsed.applies:
        writes += [resolve(p, cwd) for p in state.script_writes[applied]] if applied in state.script_writes else ["*"]
    for written in parsed.writes:
        state.script_writes.pop(written, None)
    state.script_writes.update(dict(parsed.script_writes))
    kind = parsed.kind
    if kind == "other" and writes:
        kind, path = "edit", next((w for w in writes if w != "*"), None)
    key = read_key(path, parsed.range, parsed.selector) if kind == "read" else f"{name}\x1f{parsed.key}\x1f{path}"
    label = _clip(command.strip().split("\n", 1)[0])
    return ToolAction(
        kind,
        path,
        parsed.range,
        key,
        parsed.selector,
        tuple(dict.fromkeys(writes)),
        parsed.pattern,
        label,
        parsed.shows_file,
        parsed.selector == "window",
    )


def observe(action: ToolAction, output: str | None, state: ClassifyState) -> ToolAction:
    """Learn from a call's output (SWE-agent headers and footers, `pwd`); return the action made exact."""
    if not output:
        return action
    if action.shows_file:
        shown = swe_agent.shown_file(output)
        if shown:
            path = resolve(shown, state.cwd)
            action = replace(action, path=path, writes=tuple(path if w == "*" else w for w in action.writes))
    if action.window and action.kind == "read":
        window = swe_agent.window(output)
        selector = None if window else action.selector
        action = replace(action, range=window, selector=selector, key=read_key(action.path, window, selector))
    open_file, directory = swe_agent.footer(output)
    state.cwd = directory or state.cwd
    if action.label.strip() == "pwd" or action.label.startswith("pwd &&"):
        first = output.replace("<returncode>0</returncode>", "").replace("<output>", "").strip().split("\n", 1)[0]
        state.cwd = first.strip() if first.startswith("/") else state.cwd
    if open_file:
        state.open_file = resolve(open_file, state.cwd)
    elif action.shows_file and action.path and action.kind in {"read", "write"}:
        state.open_file = action.path
    return action


def _clip(text: str) -> str:
    """A label: one line, redacted before it is clipped (a key cut in half escapes every pattern)."""
    text = redact(" ".join(text.split())).replace("`", "'")
    return text if len(text) <= _LABEL_CHARS else text[: _LABEL_CHARS - 1] + "…"
