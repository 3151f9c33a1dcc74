"""A session's facts, its sub-agents' task calls, snapshots (immutable once made) and results, its refined forms, in SQLite."""

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

    def learn(
        self, agent_id: str, session_id: str, messages: Sequence[Mapping[str, Any]], answer: str | None, start: int | None = None
    ) -> dict[str, Any]:
        """Fold a request's new messages and answer into the session's facts (redacted), in one transaction. With
        ``start`` (where the request's new messages begin), ``messages`` is the whole request and the facts fold in
        from the first message they have not folded yet: a process killed after recording a request but before
        learning from it leaves nothing out for good, and a request learned twice adds nothing twice."""
        with self.db.transaction() as c:
            row = c.execute("SELECT body FROM session_facts WHERE agent_id = ? AND session_id = ?", (agent_id, session_id)).fetchone()
            before = json.loads(row[0]) if row else {}
            if start is not None:
                seen = before.get("seen", start)
                begin = seen if isinstance(seen, int) and 0 <= seen <= len(messages) else start  # a shorter history: the client's own rewrite
                facts = {**learn(before, messages[begin:], answer), "seen": len(messages)}
            else:
                facts = learn(before, messages, answer)
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
            rows = c.execute(
                "SELECT session_id FROM snapshots WHERE agent_id = ? AND parent_id = ? ORDER BY created_at, session_id", (agent_id, parent_id)
            ).fetchall()
        return [r[0] for r in rows]

    def keep_result(self, agent_id: str, parent_id: str, child_id: str, importance: str, text: str) -> None:
        """A child's latest final answer (it replaces an earlier one of the same child)."""
        with self.db.transaction() as c:
            c.execute(
                "INSERT OR REPLACE INTO child_results VALUES (?, ?, ?, ?, ?, ?)",
                (agent_id, parent_id, child_id, importance, self._redact(text), self._clock()),
            )

    def results(self, agent_id: str, parent_id: str) -> list[dict[str, Any]]:
        with self.db.reading() as c:
            rows = c.execute(
                "SELECT child_id, importance, text, created_at FROM child_results WHERE agent_id = ? AND session_id = ? "
                "ORDER BY created_at, child_id",
                (agent_id, parent_id),
            ).fetchall()
        return [{"child_id": cid, "importance": imp, "text": text, "created_at": at} for cid, imp, text, at in rows]

    def keep_task_calls(self, agent_id: str, parent_id: str, hashes: Sequence[str], kept: int, ttl_s: float) -> None:
        """A parent's sub-agent calls waiting for their child (the prompts' hashes), in one transaction; calls older
        than ``ttl_s`` go, and beyond the newest ``kept`` the oldest."""
        now = self._clock()
        with self.db.transaction() as c:
            c.executemany("INSERT OR REPLACE INTO task_calls VALUES (?, ?, ?, ?)", [(agent_id, h, parent_id, now) for h in hashes])
            c.execute("DELETE FROM task_calls WHERE created_at < ?", (now - ttl_s,))
            c.execute(
                "DELETE FROM task_calls WHERE created_at < (SELECT created_at FROM task_calls ORDER BY created_at DESC LIMIT 1 OFFSET ?)", (kept - 1,)
            )

    def task_calls(self, since: float, kept: int) -> list[tuple[str, str, str, float]]:
        """The newest ``kept`` task calls made since ``since``, oldest first: (agent, prompt hash, parent, when)."""
        with self.db.reading() as c:
            rows = c.execute(
                "SELECT agent_id, prompt_hash, session_id, created_at FROM task_calls WHERE created_at >= ? ORDER BY created_at DESC LIMIT ?",
                (since, kept),
            ).fetchall()
        return [(a, h, p, at) for a, h, p, at in reversed(rows)]

    def refined(self, agent_id: str, session_id: str, form: str, basis: str) -> str | None:
        """A form the summarizer refined, if one was made from this basis (the deterministic form's hash)."""
        with self.db.reading() as c:
            row = c.execute(
                "SELECT text FROM refined_forms WHERE agent_id = ? AND session_id = ? AND form = ? AND basis = ?", (agent_id, session_id, form, basis)
            ).fetchone()
        return row[0] if row else None

    def keep_refined(self, agent_id: str, session_id: str, form: str, basis: str, text: str) -> None:
        """A refined form that passed its checks (it replaces one made from an older basis)."""
        with self.db.transaction() as c:
            c.execute(
                "INSERT OR REPLACE INTO refined_forms VALUES (?, ?, ?, ?, ?, ?)",
                (agent_id, session_id, form, basis, self._redact(text), self._clock()),
            )
