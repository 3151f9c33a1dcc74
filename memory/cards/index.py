"""The cards of some folders (project first, then global), indexed by modification time, searched by keywords."""

from __future__ import annotations

import bisect
import os
import threading
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path

import structlog

from memory.cards.card import Card, CardError, read_card
from memory.cards.score import BODY, BODY_HITS, TAG, TITLE, Indexed, Term, indexed, terms

log = structlog.get_logger(__name__)
MAX_FILES = 5000
"""Files looked at per folder (deeper or later ones are left out, with a warning)."""
MAX_DEPTH = 4
"""Sub-folders looked into below each folder."""

SETTLE_SECONDS = 2.0
"""A card that no longer reads right but changed less than this long ago is being written: it keeps its last good
version until then (a search never misses it for a half-written file)."""

Stamp = tuple[int, int]
"""(modification time in ns, size) of a file: when either changes, the file is read again."""


class CardIndex:
    """Thread-safe. Each ``search`` first looks at the folders' listings and their files' times (no file is read again
    unless it changed; with ``recheck_seconds``, not even that more often); a malformed card is skipped with one
    warning naming its file, until the file changes."""

    def __init__(
        self, folders: Sequence[Path], recheck_seconds: float = 0.0, clock: Callable[[], float] = time.monotonic, scopes: Sequence[str] | None = None
    ) -> None:
        self.folders = tuple(Path(f) for f in folders)
        self.scopes = tuple(scopes) if scopes is not None else tuple("project" if i == 0 else "global" for i in range(len(self.folders)))
        self.recheck_seconds = recheck_seconds
        self._clock = clock
        self._lock = threading.Lock()
        self._files: dict[str, tuple[Stamp, Indexed | None]] = {}
        self._order: list[Indexed] = []
        self._postings = Postings()
        self._checked_at: float | None = None
        self.skipped: dict[Path, str] = {}
        """Files that are not cards, and why (as last read)."""
        self.reads = 0
        """Files read since the index was made (what re-indexing cost)."""

    def _scan(self) -> list[tuple[str, str, Stamp]]:
        """Every ``*.md`` file below the folders (hidden folders and files left out), project first, each in name order."""
        found: list[tuple[str, str, Stamp]] = []
        seen: set[tuple[int, int]] = set()
        for folder, scope in zip(self.folders, self.scopes):
            mine: list[tuple[str, str, Stamp, tuple[int, int]]] = []
            stack = [(str(folder), 0)]
            while stack:
                where, depth = stack.pop()
                try:
                    entries = list(os.scandir(where))
                except FileNotFoundError:
                    continue
                except OSError as exc:
                    log.warning("cards_folder_unreadable", path=where, reason=exc.strerror or str(exc))
                    continue
                for entry in entries:
                    if entry.name.startswith("."):
                        continue
                    try:
                        if entry.is_dir():
                            if depth < MAX_DEPTH:
                                stack.append((entry.path, depth + 1))
                        elif entry.name.endswith(".md") and entry.is_file():
                            st = entry.stat()
                            mine.append((entry.path, scope, (st.st_mtime_ns, st.st_size), (st.st_dev, st.st_ino)))
                    except OSError:
                        continue
            mine.sort()
            if len(mine) > MAX_FILES:
                log.warning("cards_folder_too_big", path=str(folder), files=len(mine), kept=MAX_FILES)
                mine = mine[:MAX_FILES]
            for path, where, stamp, inode in mine:
                if inode not in seen:  # the same file through two folders (global inside project) counts once
                    seen.add(inode)
                    found.append((path, where, stamp))
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
        files: dict[str, tuple[Stamp, Indexed | None]] = {}
        for path, scope, stamp in listing:
            known = self._files.get(path)
            if known is not None and known[0] == stamp:
                files[path] = known
                continue
            changed = True
            self.reads += 1
            try:
                files[path] = (stamp, indexed(read_card(Path(path), scope)))
                self.skipped.pop(Path(path), None)
            except Exception as exc:  # noqa: BLE001 - a file is never a failed request: CardError says why, anything else is named
                reason = str(exc) if isinstance(exc, CardError) else f"unexpected {type(exc).__name__}: {exc}"
                if known is not None and known[1] is not None and time.time() - stamp[0] / 1e9 < SETTLE_SECONDS:
                    files[path] = known  # caught in the middle of being written: the card as it was, read again next time
                    continue
                files[path] = (stamp, None)
                self.skipped[Path(path)] = reason
                log.warning("card_skipped", path=path, reason=reason)
        if changed or files.keys() != self._files.keys():
            for gone in set(self._files) - set(files):
                self.skipped.pop(Path(gone), None)
            self._files = files
            self._order = [entry for _, entry in files.values() if entry is not None]
            self._postings = Postings.of(self._order)
            return True
        return False

    def skipped_files(self) -> dict[Path, str]:
        """A copy of ``skipped`` (the files that are not cards, and why), as of the last look at the folders."""
        with self._lock:
            return dict(self.skipped)

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
            order, postings = self._order, self._postings
        scored = _scores(order, postings, wanted)
        best = sorted(((v, i) for i, v in scored.items() if v > 0), key=lambda s: (-s[0], s[1]))[:limit]
        return [replace(order[i].card, score=value) for value, i in best]


def _scores(order: Sequence[Indexed], postings: Postings, wanted: Sequence[Term]) -> dict[int, float]:
    """``score`` of every card that matches, through the postings: only the cards holding a term are touched (a whole
    keyword run together, ``cardindex`` in "Card index", and a term that is no ASCII word are found in the joined texts)."""
    raw: dict[int, float] = {}

    def add(cards: Iterable[int], value: float) -> None:
        for i in cards:
            raw[i] = raw.get(i, 0.0) + value

    for t in wanted:
        titled = set(postings.title.get(t.text, ())) if t.word else postings.title_text.holding(t.text)
        if t.weight == 1.0 and len(t.squashed) >= 4:
            titled |= postings.title_squashed.holding(t.squashed)
        add(titled, t.weight * TITLE)
        add(set(postings.tags.get(t.text, ())) | set(postings.tags.get(t.squashed, ())), t.weight * TAG)
        if t.word:
            for i, n in postings.body.get(t.text, ()):
                raw[i] = raw.get(i, 0.0) + t.weight * BODY * n
        else:
            for i, n in postings.body_text.counts(t.text, BODY_HITS).items():
                raw[i] = raw.get(i, 0.0) + t.weight * BODY * n
    return {i: value * order[i].card.relevance_score for i, value in raw.items()}


class Joined:
    """One field of every card joined into one text, to find a term in all of them at C speed."""

    def __init__(self, texts: Sequence[str]) -> None:
        self.starts: list[int] = []
        at = 0
        for text in texts:
            self.starts.append(at)
            at += len(text) + 1
        self.text = "\x00".join(texts)

    def counts(self, term: str, cap: int) -> dict[int, int]:
        """Card → occurrences of ``term`` in its text (at most ``cap``)."""
        out: dict[int, int] = {}
        at = self.text.find(term)
        while at >= 0:
            i = bisect.bisect_right(self.starts, at) - 1
            out[i] = out.get(i, 0) + 1
            if out[i] >= cap and i + 1 < len(self.starts):
                at = self.text.find(term, self.starts[i + 1])  # this card counted enough: on to the next one
            else:
                at = self.text.find(term, at + len(term))
        return out

    def holding(self, term: str) -> set[int]:
        return set(self.counts(term, 1))


@dataclass
class Postings:
    """Word → the cards holding it, per field (positions in the index's order; the body's with its count, capped)."""

    title: dict[str, list[int]] = field(default_factory=dict)
    tags: dict[str, list[int]] = field(default_factory=dict)
    body: dict[str, list[tuple[int, int]]] = field(default_factory=dict)
    title_text: Joined = field(default_factory=lambda: Joined([]))
    title_squashed: Joined = field(default_factory=lambda: Joined([]))
    body_text: Joined = field(default_factory=lambda: Joined([]))

    @classmethod
    def of(cls, order: Sequence[Indexed]) -> Postings:
        out = cls(
            title_text=Joined([e.title for e in order]),
            title_squashed=Joined([e.title_squashed for e in order]),
            body_text=Joined([e.body for e in order]),
        )
        for i, e in enumerate(order):
            for word in e.title_words:
                out.title.setdefault(word, []).append(i)
            for tag in e.tags | e.tags_squashed:
                out.tags.setdefault(tag, []).append(i)
            for word, n in e.body_words.items():
                out.body.setdefault(word, []).append((i, min(BODY_HITS, n)))
        return out
