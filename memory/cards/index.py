"""The cards of some folders (project first, then global), indexed by modification time, searched by keywords."""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import replace
from pathlib import Path

import structlog

from memory.cards.card import Card, CardError, read_card
from memory.cards.score import Indexed, indexed, score, terms

log = structlog.get_logger(__name__)
MAX_FILES = 5000
"""Files looked at per folder (deeper or later ones are left out, with a warning)."""
MAX_DEPTH = 4
"""Sub-folders looked into below each folder."""

Stamp = tuple[int, int]
"""(modification time in ns, size) of a file: when either changes, the file is read again."""


class CardIndex:
    """Thread-safe. Each ``search`` first looks at the folders' listings and their files' times (no file is read again
    unless it changed; with ``recheck_seconds``, not even that more often); a malformed card is skipped with one
    warning naming its file, until the file changes."""

    def __init__(self, folders: Sequence[Path], recheck_seconds: float = 0.0, clock: Callable[[], float] = time.monotonic,
                 scopes: Sequence[str] | None = None) -> None:
        self.folders = tuple(Path(f) for f in folders)
        self.scopes = tuple(scopes) if scopes is not None else tuple("project" if i == 0 else "global" for i in range(len(self.folders)))
        self.recheck_seconds = recheck_seconds
        self._clock = clock
        self._lock = threading.Lock()
        self._files: dict[Path, tuple[Stamp, Indexed | None]] = {}
        self._order: list[Indexed] = []
        self._checked_at: float | None = None
        self.skipped: dict[Path, str] = {}
        """Files that are not cards, and why (as last read)."""
        self.reads = 0
        """Files read since the index was made (what re-indexing cost)."""

    def _scan(self) -> list[tuple[Path, str, Stamp]]:
        """Every ``*.md`` file below the folders (hidden folders and files left out), project first, each in name order."""
        found: list[tuple[Path, str, Stamp]] = []
        seen: set[Path] = set()
        for folder, scope in zip(self.folders, self.scopes):
            mine: list[tuple[Path, str, Stamp]] = []
            stack = [(folder, 0)]
            while stack:
                where, depth = stack.pop()
                try:
                    entries = list(os.scandir(where))
                except FileNotFoundError:
                    continue
                except OSError as exc:
                    log.warning("cards_folder_unreadable", path=str(where), reason=exc.strerror or str(exc))
                    continue
                for entry in entries:
                    if entry.name.startswith("."):
                        continue
                    try:
                        if entry.is_dir():
                            if depth < MAX_DEPTH:
                                stack.append((Path(entry.path), depth + 1))
                        elif entry.name.endswith(".md") and entry.is_file():
                            st = entry.stat()
                            mine.append((Path(entry.path), scope, (st.st_mtime_ns, st.st_size)))
                    except OSError:
                        continue
            mine.sort(key=lambda f: str(f[0]))
            if len(mine) > MAX_FILES:
                log.warning("cards_folder_too_big", path=str(folder), files=len(mine), kept=MAX_FILES)
                mine = mine[:MAX_FILES]
            for item in mine:
                real = item[0].resolve()
                if real not in seen:  # the same file through two folders (global inside project) counts once
                    seen.add(real)
                    found.append(item)
        return found

    def refresh(self) -> bool:
        """Bring the index up to date with the folders; True when anything changed."""
        with self._lock:
            return self._refresh(force=True)

    def _refresh(self, force: bool = False) -> bool:
        now = self._clock()
        if not force and self._checked_at is not None and now - self._checked_at < self.recheck_seconds:
            return False
        self._checked_at = now
        listing = self._scan()
        changed = len(listing) != len(self._files)
        files: dict[Path, tuple[Stamp, Indexed | None]] = {}
        for path, scope, stamp in listing:
            known = self._files.get(path)
            if known is not None and known[0] == stamp:
                files[path] = known
                continue
            changed = True
            self.reads += 1
            try:
                files[path] = (stamp, indexed(read_card(path, scope)))
                self.skipped.pop(path, None)
            except CardError as exc:
                files[path] = (stamp, None)
                self.skipped[path] = str(exc)
                log.warning("card_skipped", path=str(path), reason=str(exc))
        if changed or files.keys() != self._files.keys():
            for gone in set(self._files) - set(files):
                self.skipped.pop(gone, None)
            self._files = files
            self._order = [entry for _, entry in files.values() if entry is not None]
            return True
        return False

    def cards(self) -> list[Card]:
        """Every card, project first, each folder in file-name order."""
        with self._lock:
            self._refresh()
            return [e.card for e in self._order]

    def search(self, keywords: Sequence[str], limit: int) -> list[Card]:
        """The cards matching ``keywords``, most relevant first (ties: project before global, then file order), at most
        ``limit``; each a copy with its ``score`` set. No keywords, or nothing matching: an empty list."""
        wanted = terms(keywords)
        if not wanted or limit <= 0:
            return []
        with self._lock:
            self._refresh()
            order = self._order
        scored = [(score(entry, wanted), i, entry) for i, entry in enumerate(order)]
        best = sorted((s for s in scored if s[0] > 0), key=lambda s: (-s[0], s[1]))[:limit]
        return [replace(entry.card, score=value) for value, _, entry in best]
