"""Project rules: the ``AGENTS.md`` (and other configured) files under a workspace root, nearest the root first, cached by modification time."""

from __future__ import annotations

import os
import threading
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

import structlog

log = structlog.get_logger(__name__)
MAX_DEPTH = 3
"""Sub-folders below the root looked into for rule files."""
MAX_FOLDERS = 2000
"""Folders looked at per root (a bigger tree is cut, with a warning)."""
SKIPPED = frozenset({"node_modules", "__pycache__", "venv", "site-packages", "dist", "build", "target", "vendor"})
"""Folders never looked into (besides hidden ones, such as .git and .venv)."""
MAX_FILE_BYTES = 1 << 20
NOTE_FILES = 5
"""The files a cut note names (then "and N more")."""


@dataclass(frozen=True)
class Rules:
    """The rules an agent gets: the files' text concatenated, nearest the root first."""

    text: str = ""
    cut: bool = False
    """Whether ``text`` was cut to the size allowed (it then ends with a note saying so)."""
    files: tuple[Path, ...] = ()
    """The files read, in order."""
    chars: int = 0
    """Characters of all the files together, before any cut."""
    problems: tuple[str, ...] = field(default=(), compare=False)
    """Files (or a root) that could not be read, and why."""


@dataclass
class _Cached:
    folders: dict[Path, int]
    """Every folder looked at and its modification time: a file added or removed changes its folder's time."""
    files: dict[Path, tuple[int, int]]
    """Every rule file found and its (mtime, size)."""
    rules: Rules


class ProjectRules:
    """One per app: the rules of each root, read again only when a folder's listing or a rule file changed. Thread-safe.
    An unreadable file or a missing root is a warning (once per change), never an error."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._cache: dict[tuple[Path, tuple[str, ...], int], _Cached] = {}
        self.reads = 0
        """Times a root's files were read (what caching saved)."""

    def read(self, root: Path, names: Sequence[str], max_chars: int) -> Rules:
        key = (Path(root), tuple(names), max_chars)
        with self._lock:
            cached = self._cache.get(key)
            if cached is not None and _unchanged(cached):
                return cached.rules
            fresh = _read(key[0], key[1], max_chars)
            self.reads += 1
            if cached is None or fresh.rules != cached.rules or fresh.rules.problems != cached.rules.problems:
                for problem in fresh.rules.problems:
                    log.warning("project_rules_unreadable", root=str(root), problem=problem)
            self._cache[key] = fresh
            return fresh.rules


def project_rules(root: Path, names: Sequence[str], max_chars: int, cache: ProjectRules | None = None) -> Rules:
    """The rules under ``root`` (through ``cache``, which keeps them until a file changes; without one, read now)."""
    return (cache or ProjectRules()).read(root, names, max_chars)


def _mtime(path: Path) -> int | None:
    try:
        return path.stat().st_mtime_ns
    except OSError:
        return None


def _stamp(path: Path) -> tuple[int, int]:
    """(mtime, size); (-1, -1) for a file that cannot be looked at (a dangling link: it counts as changed once it resolves)."""
    try:
        st = path.stat()
    except OSError:
        return (-1, -1)
    return (st.st_mtime_ns, st.st_size)


def _unchanged(cached: _Cached) -> bool:
    return all(_mtime(folder) == mtime for folder, mtime in cached.folders.items()) and all(
        _stamp(path) == stamp for path, stamp in cached.files.items()
    )


def _walk(root: Path, names: Sequence[str]) -> tuple[dict[Path, int], list[tuple[int, Path]], list[str]]:
    """Folders seen (with their times), rule files found as (depth, path), problems."""
    folders: dict[Path, int] = {}
    found: list[tuple[int, Path]] = []
    problems: list[str] = []
    wanted = set(names)
    level = [root]
    for depth in range(MAX_DEPTH + 1):
        below: list[Path] = []
        for folder in sorted(level):
            if len(folders) >= MAX_FOLDERS:
                problems.append(f"{root}: more than {MAX_FOLDERS} folders; deeper rule files left out")
                return folders, found, problems
            try:
                folders[folder] = folder.stat().st_mtime_ns
                entries = sorted(os.scandir(folder), key=lambda e: e.name)
            except OSError as exc:
                problems.append(f"{folder}: {exc.strerror or exc}")
                continue
            for entry in entries:
                try:
                    if entry.name in wanted and (entry.is_file() or entry.is_symlink()):
                        found.append((depth, Path(entry.path)))
                    elif entry.is_dir(follow_symlinks=False) and not entry.name.startswith(".") and entry.name not in SKIPPED and depth < MAX_DEPTH:
                        below.append(Path(entry.path))
                except OSError:
                    continue
        level = below
    return folders, found, problems


def _read(root: Path, names: Sequence[str], max_chars: int) -> _Cached:
    if not root.is_dir():
        return _Cached({}, {}, Rules(problems=(f"{root}: the workspace root is not a folder",)))
    folders, found, problems = _walk(root, names)
    order = {name: i for i, name in enumerate(names)}
    found.sort(key=lambda f: (f[0], str(f[1].parent), order.get(f[1].name, 0)))
    files: dict[Path, tuple[int, int]] = {}
    parts: list[str] = []
    read: list[Path] = []
    for _, path in found:
        files[path] = stamp = _stamp(path)
        try:
            if stamp[1] > MAX_FILE_BYTES:
                raise OSError(f"over {MAX_FILE_BYTES} bytes")
            text = path.read_text(encoding="utf-8", errors="replace").strip()
        except OSError as exc:
            problems.append(f"{path}: {exc.strerror or exc}")
            continue
        if text:
            read.append(path)
            parts.append(f"<!-- {path.relative_to(root).as_posix()} -->\n{text}")
    whole = "\n\n".join(parts)
    text, cut = whole, False
    if len(whole) > max_chars:
        names = [p.relative_to(root).as_posix() for p in read]
        listed = ", ".join(names[:NOTE_FILES]) + (f" and {len(names) - NOTE_FILES} more" if len(names) > NOTE_FILES else "")
        note = f"\n\n[project rules cut: {len(whole)} characters, {max_chars} allowed; the rest is in {listed}]"
        text, cut = whole[: max(0, max_chars - len(note))].rstrip() + note, True
    return _Cached(folders, files, Rules(text, cut, tuple(read), len(whole), tuple(problems)))
