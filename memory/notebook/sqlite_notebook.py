"""An agent's notebook in SQLite (and each sub-agent's own): every change one transaction and a new version; compaction's pending state beside it."""

from __future__ import annotations

import hashlib
import json
import sqlite3
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from memory.notebook.sections import MAX_ENTRIES, SECTIONS, Cleaned, NotebookError, clean_entry, section_of
from memory.store.sqlite_database import Database, dumps

Body = dict[str, list[dict[str, Any]]]
"""Section → entries, each ``{"text", "by", "at"}``; ``by``: person, model (written by the model through Ruyi's MCP
tools), ruyi (the dynamic pool), proposed, compacted."""
VERSIONS_KEPT = 200
CHILD_VERSIONS_KEPT = 50
"""A sub-agent's notebook is temporary (seed 003): fewer versions kept; it goes with the child's session."""


def empty() -> Body:
    return {name: [] for name in SECTIONS}


def entry_hash(section: str, text: str) -> str:
    return hashlib.sha256(f"{section}\0{' '.join(text.split()).lower()}".encode("utf-8", "surrogatepass")).hexdigest()[:32]


@dataclass
class Notebook:
    """One version of an agent's notebook, or of a sub-agent's own (``session_id``: the child's session)."""

    agent_id: str
    version: int = 0
    body: Body = field(default_factory=empty)
    created_at: float = 0.0
    reason: str = "empty"
    pending: bool = False
    """Whether a section reached its limit and compaction waits for the agent to be idle (never for a child's)."""
    session_id: str | None = None
    """The sub-agent session whose own notebook this is; None: the agent's."""

    def counts(self) -> dict[str, int]:
        return {name: len(self.body.get(name, [])) for name in SECTIONS}

    def full(self) -> list[str]:
        return [name for name, n in self.counts().items() if n >= MAX_ENTRIES]


def _body(raw: str) -> Body:
    loaded = json.loads(raw)
    return {name: list(loaded.get(name, [])) for name in SECTIONS}


def _where(agent_id: str, child: str | None) -> tuple[str, str, tuple[str, ...]]:
    """The versions table, the condition naming one notebook in it, and its parameters: the agent's, or a child's own."""
    if child is None:
        return "notebook_versions", "agent_id = ?", (agent_id,)
    return "child_notebook_versions", "agent_id = ? AND session_id = ?", (agent_id, child)


class NotebookStore:
    """The notebooks of every agent; each call names its agent and sees nothing of another's."""

    def __init__(self, db: Database, clock: Callable[[], float] = time.time, redact: Callable[[str], str] = lambda s: s) -> None:
        self.db = db
        self._clock = clock
        self._redact = redact

    # reading

    def _latest(self, c: sqlite3.Connection, agent_id: str, child: str | None = None) -> Notebook:
        table, where, key = _where(agent_id, child)
        row = c.execute(f"SELECT version, body, created_at, reason FROM {table} WHERE {where} ORDER BY version DESC LIMIT 1", key).fetchone()
        pending = False
        if child is None:
            state = c.execute("SELECT pending FROM notebook_state WHERE agent_id = ?", (agent_id,)).fetchone()
            pending = bool(state and state[0])
        if row is None:
            return Notebook(agent_id, pending=pending, session_id=child)
        return Notebook(agent_id, row[0], _body(row[1]), row[2], row[3], pending, child)

    def current(self, agent_id: str, child: str | None = None) -> Notebook:
        """The agent's notebook, or with ``child`` that sub-agent session's own."""
        with self.db.reading() as c:
            return self._latest(c, agent_id, child)

    def versions(self, agent_id: str, child: str | None = None) -> list[dict[str, Any]]:
        table, where, key = _where(agent_id, child)
        with self.db.reading() as c:
            rows = c.execute(f"SELECT version, created_at, reason, body FROM {table} WHERE {where} ORDER BY version", key).fetchall()
        return [{"version": v, "created_at": at, "reason": why, "entries": {k: len(e) for k, e in _body(b).items()}} for v, at, why, b in rows]

    def version(self, agent_id: str, number: int, child: str | None = None) -> Notebook | None:
        table, where, key = _where(agent_id, child)
        with self.db.reading() as c:
            row = c.execute(f"SELECT body, created_at, reason FROM {table} WHERE {where} AND version = ?", (*key, number)).fetchone()
        return Notebook(agent_id, number, _body(row[0]), row[1], row[2], session_id=child) if row else None

    # writing: each one transaction, each a new version

    def _save(self, c: sqlite3.Connection, before: Notebook, body: Body, reason: str, pending: bool | None = None) -> Notebook:
        now = self._clock()
        version = before.version + 1
        if before.session_id is not None:  # a child's own notebook: never pending (it is temporary), fewer versions
            c.execute(
                "INSERT INTO child_notebook_versions VALUES (?, ?, ?, ?, ?, ?)",
                (before.agent_id, before.session_id, version, now, reason, dumps(body)),
            )
            c.execute(
                "DELETE FROM child_notebook_versions WHERE agent_id = ? AND session_id = ? AND version <= ?",
                (before.agent_id, before.session_id, version - CHILD_VERSIONS_KEPT),
            )
            return Notebook(before.agent_id, version, body, now, reason, False, before.session_id)
        c.execute("INSERT INTO notebook_versions VALUES (?, ?, ?, ?, ?)", (before.agent_id, version, now, reason, dumps(body)))
        c.execute("DELETE FROM notebook_versions WHERE agent_id = ? AND version <= ?", (before.agent_id, version - VERSIONS_KEPT))
        after = Notebook(before.agent_id, version, body, now, reason, before.pending)
        if pending is None:
            pending = before.pending or bool(after.full())
        if pending != before.pending or pending:
            c.execute(
                "INSERT INTO notebook_state VALUES (?, ?, 0, 0) ON CONFLICT (agent_id) DO UPDATE SET pending = excluded.pending"
                + ("" if pending else ", attempts = 0, retry_at = 0"),
                (before.agent_id, int(pending)),
            )
        after.pending = pending
        return after

    def _entry(self, cleaned: Cleaned, by: str) -> dict[str, Any]:
        return {"text": self._redact(cleaned.line), "by": by, "at": self._clock()}

    def add(self, agent_id: str, section: str, text: Any, by: str = "person", child: str | None = None) -> tuple[Notebook, tuple[str, ...]]:
        """Append an entry (to a child's own notebook with ``child``). A full section refuses a person's entry (409:
        compact or replace it first); the dynamic pool, Ruyi's own, drops its oldest line instead. Returns the new
        version and what was done to the text."""
        name = section_of(section)
        cleaned = clean_entry(text)
        with self.db.transaction() as c:
            before = self._latest(c, agent_id, child)
            body = {k: list(v) for k, v in before.body.items()}
            entries = body[name]
            if len(entries) >= MAX_ENTRIES:
                if by != "ruyi":
                    how = (
                        f"compact it (POST /ruyi/v1/notebook/compact?session={child})"
                        if child is not None
                        else "compaction is pending (it runs when the agent is idle, or now: POST /ruyi/v1/notebook/compact)"
                    )
                    raise NotebookError(
                        f"section {name} holds {MAX_ENTRIES} entries, the most; {how}, or replace the section (PUT)", "section_full", 409
                    )
                del entries[: len(entries) - MAX_ENTRIES + 1]
            entries.append(self._entry(cleaned, by))
            return self._save(c, before, body, f"add {name}"), cleaned.notes

    def propose(self, agent_id: str, proposals: Sequence[tuple[str, str]]) -> Notebook | None:
        """Entries an archive's summary proposes ((section, text)), marked proposed: never over what a person wrote (a
        full section takes none), never one a person rejected or one already there. None when nothing was added."""
        with self.db.transaction() as c:
            before = self._latest(c, agent_id)
            body = {k: list(v) for k, v in before.body.items()}
            added = 0
            for section, text in proposals:
                try:
                    name, cleaned = section_of(section), clean_entry(text)
                except NotebookError:
                    continue
                key = entry_hash(name, cleaned.line)
                if (
                    len(body[name]) >= MAX_ENTRIES - 1
                    or any(entry_hash(name, e["text"]) == key for e in body[name])
                    or c.execute("SELECT 1 FROM rejected WHERE agent_id = ? AND kind = 'entry' AND hash = ?", (agent_id, key)).fetchone()
                ):
                    continue
                body[name].append(self._entry(cleaned, "proposed"))
                added += 1
            return self._save(c, before, body, "proposed") if added else None

    def put(self, agent_id: str, section: str, texts: Any, child: str | None = None) -> tuple[Notebook, tuple[str, ...]]:
        """Replace a section with these entries (at most MAX_ENTRIES)."""
        name = section_of(section)
        if isinstance(texts, str):
            texts = [texts]
        if not isinstance(texts, list) or len(texts) > MAX_ENTRIES:
            raise NotebookError(f'a section is replaced by a list of at most {MAX_ENTRIES} entries: {{"entries": ["…", …]}}', "invalid_section")
        cleaned = [clean_entry(t) for t in texts]
        with self.db.transaction() as c:
            before = self._latest(c, agent_id, child)
            body = {k: list(v) for k, v in before.body.items()}
            body[name] = [self._entry(x, "person") for x in cleaned]
            return self._save(c, before, body, f"replace {name}"), tuple(n for x in cleaned for n in x.notes)

    def change(self, agent_id: str, section: str, number: int, text: Any | None, child: str | None = None) -> tuple[Notebook, tuple[str, ...]]:
        """The model's memory_edit (seed 001): entry ``number`` (from 1, as read) of a section rewritten to ``text``, or
        removed when ``text`` is None. Only an entry the model itself wrote, or one Ruyi or its compaction wrote: a
        person's entry, or one proposed to a person, is never changed by the model (refused, 403)."""
        name = section_of(section)
        cleaned = clean_entry(text) if text is not None else None
        with self.db.transaction() as c:
            before = self._latest(c, agent_id, child)
            body = {k: list(v) for k, v in before.body.items()}
            entries = body[name]
            if not 1 <= number <= len(entries):
                raise NotebookError(
                    f"section {name} has {len(entries)} entries; n is from 1 to {len(entries)} (read the notebook)", "entry_not_found", 404
                )
            if entries[number - 1].get("by") in ("person", "proposed"):
                raise NotebookError(
                    f"entry {number} of {name} is a person's (or proposed to one): the model may not change it; add a new entry instead",
                    "entry_is_a_persons",
                    403,
                )
            if cleaned is None:
                del entries[number - 1]
                return self._save(c, before, body, f"model removes {name} {number}"), ()
            entries[number - 1] = self._entry(cleaned, "model")
            return self._save(c, before, body, f"model edits {name} {number}"), cleaned.notes

    def judge(self, agent_id: str, section: str, index: int, accept: bool, child: str | None = None) -> Notebook | None:
        """A person accepts a proposed entry (it becomes theirs) or rejects it (it goes, and is never proposed again).
        None when there is no proposed entry at that place (a child's own notebook is proposed nothing)."""
        name = section_of(section)
        with self.db.transaction() as c:
            before = self._latest(c, agent_id, child)
            body = {k: list(v) for k, v in before.body.items()}
            if not 0 <= index < len(body[name]) or body[name][index].get("by") != "proposed":
                return None
            entry = body[name].pop(index)
            if accept:
                body[name].insert(index, {**entry, "by": "person"})
            else:
                c.execute("INSERT OR IGNORE INTO rejected VALUES (?, 'entry', ?, ?)", (agent_id, entry_hash(name, entry["text"]), self._clock()))
            return self._save(c, before, body, f"{'accept' if accept else 'reject'} {name}")

    def rollback(self, agent_id: str, number: int, child: str | None = None) -> Notebook | None:
        """A new version equal to version ``number`` (history is kept); None when there is no such version."""
        table, where, key = _where(agent_id, child)
        with self.db.transaction() as c:
            row = c.execute(f"SELECT body FROM {table} WHERE {where} AND version = ?", (*key, number)).fetchone()
            if row is None:
                return None
            return self._save(c, self._latest(c, agent_id, child), _body(row[0]), f"rollback to {number}")

    # compaction

    def pending(self, now: float) -> list[str]:
        """Agents whose notebook waits for compaction and whose retry time has come."""
        with self.db.reading() as c:
            return [r[0] for r in c.execute("SELECT agent_id FROM notebook_state WHERE pending = 1 AND retry_at <= ? ORDER BY agent_id", (now,))]

    def compacted(
        self, agent_id: str, read_version: int, body: Mapping[str, list[dict[str, Any]]], how: str, child: str | None = None
    ) -> Notebook | None:
        """Write a compaction's result as a new version and clear pending, unless the notebook changed since it was read
        (then nothing is written: it stays pending, and the next try reads the newer version)."""
        with self.db.transaction() as c:
            before = self._latest(c, agent_id, child)
            if before.version != read_version:
                return None
            return self._save(c, before, {k: list(body.get(k, [])) for k in SECTIONS}, f"compacted ({how})", pending=False)

    def failed(self, agent_id: str, backoff: Callable[[int], float]) -> float:
        """A compaction that changed nothing: it stays pending, tried again after ``backoff(attempts)`` seconds."""
        with self.db.transaction() as c:
            row = c.execute("SELECT attempts FROM notebook_state WHERE agent_id = ?", (agent_id,)).fetchone()
            attempts = (row[0] if row else 0) + 1
            retry_at = self._clock() + backoff(attempts)
            c.execute(
                "INSERT INTO notebook_state VALUES (?, 1, ?, ?) ON CONFLICT (agent_id) DO UPDATE SET attempts = excluded.attempts, "
                "retry_at = excluded.retry_at",
                (agent_id, attempts, retry_at),
            )
        return retry_at
