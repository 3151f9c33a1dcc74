"""A session's facts, its sub-agents' snapshots (immutable once made) and their results, in SQLite."""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from memory.forms.facts import learn
from memory.store.sqlite_database import Database, dumps


class SessionMemory:
    """Per agent and session; each call names its agent and sees nothing of another's."""

    def __init__(self, db: Database, clock: Callable[[], float] = time.time, redact: Callable[[str], str] = lambda s: s) -> None:
        self.db = db
        self._clock = clock
        self._redact = redact

    def facts(self, agent_id: str, session_id: str) -> dict[str, Any]:
        with self.db.reading() as c:
            row = c.execute("SELECT body FROM session_facts WHERE agent_id = ? AND session_id = ?", (agent_id, session_id)).fetchone()
        return json.loads(row[0]) if row else {}

    def learn(self, agent_id: str, session_id: str, messages: Sequence[Mapping[str, Any]], answer: str | None) -> dict[str, Any]:
        """Fold a request's new messages and answer into the session's facts (redacted), in one transaction."""
        with self.db.transaction() as c:
            row = c.execute("SELECT body FROM session_facts WHERE agent_id = ? AND session_id = ?", (agent_id, session_id)).fetchone()
            facts = learn(json.loads(row[0]) if row else {}, messages, answer)
            body = self._redact(dumps(facts))
            c.execute("INSERT OR REPLACE INTO session_facts VALUES (?, ?, ?, ?)", (agent_id, session_id, body, self._clock()))
        return json.loads(body)

    def snapshot(self, agent_id: str, session_id: str) -> tuple[str, str] | None:
        """A child's snapshot and its parent, once made."""
        with self.db.reading() as c:
            row = c.execute("SELECT parent_id, body FROM snapshots WHERE agent_id = ? AND session_id = ?", (agent_id, session_id)).fetchone()
        return (row[0], row[1]) if row else None

    def keep_snapshot(self, agent_id: str, session_id: str, parent_id: str, body: str) -> str:
        """Keep a child's snapshot; one kept before wins (a snapshot never changes). Returns the one in force."""
        with self.db.transaction() as c:
            c.execute("INSERT OR IGNORE INTO snapshots VALUES (?, ?, ?, ?, ?)", (agent_id, session_id, parent_id, body, self._clock()))
            return str(c.execute("SELECT body FROM snapshots WHERE agent_id = ? AND session_id = ?", (agent_id, session_id)).fetchone()[0])

    def children(self, agent_id: str, parent_id: str) -> list[str]:
        with self.db.reading() as c:
            rows = c.execute("SELECT session_id FROM snapshots WHERE agent_id = ? AND parent_id = ? ORDER BY created_at, session_id",
                             (agent_id, parent_id)).fetchall()
        return [r[0] for r in rows]

    def keep_result(self, agent_id: str, parent_id: str, child_id: str, importance: str, text: str) -> None:
        """A child's latest final answer (it replaces an earlier one of the same child)."""
        with self.db.transaction() as c:
            c.execute("INSERT OR REPLACE INTO child_results VALUES (?, ?, ?, ?, ?, ?)",
                      (agent_id, parent_id, child_id, importance, self._redact(text), self._clock()))

    def results(self, agent_id: str, parent_id: str) -> list[dict[str, Any]]:
        with self.db.reading() as c:
            rows = c.execute("SELECT child_id, importance, text, created_at FROM child_results WHERE agent_id = ? AND session_id = ? "
                             "ORDER BY created_at, child_id", (agent_id, parent_id)).fetchall()
        return [{"child_id": cid, "importance": imp, "text": text, "created_at": at} for cid, imp, text, at in rows]
