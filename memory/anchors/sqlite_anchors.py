"""An agent's anchors in SQLite: numbered per agent and type, each change one transaction, captured lines remembered."""

from __future__ import annotations

import json
import sqlite3
import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from memory.anchors.anchor import Anchor, AnchorError, check_fields, check_status, check_title, check_type, format_id, split_id, write_rule
from memory.anchors.capture import Captured
from memory.store.sqlite_database import Database, dumps

_COLUMNS = "anchor_id, title, status, fields, source, origin_session, created_at, updated_at"


def _anchor(agent_id: str, row: Sequence[Any]) -> Anchor:
    anchor_id, title, status, fields, source, session, created, updated = row
    return Anchor(agent_id, anchor_id, title, status, json.loads(fields), source, session, created, updated)


class AnchorBook:
    """The anchors of every agent; each call names its agent and sees nothing of another's."""

    def __init__(self, db: Database, clock: Callable[[], float] = time.time, redact: Callable[[str], str] = lambda s: s) -> None:
        self.db = db
        self._clock = clock
        self._redact = redact

    def _next_number(self, c: sqlite3.Connection, agent_id: str, kind: str) -> int:
        row = c.execute("SELECT max(number) FROM anchors WHERE agent_id = ? AND kind = ?", (agent_id, kind)).fetchone()
        return int(row[0] or 0) + 1

    def _insert(self, c: sqlite3.Connection, a: Anchor) -> None:
        kind, number = split_id(a.anchor_id)
        c.execute(
            f"INSERT INTO anchors (agent_id, kind, number, {_COLUMNS}) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
            (a.agent_id, kind, number, a.anchor_id, a.title, a.status, dumps(a.fields), a.source, a.session_id, a.created_at, a.updated_at),
        )

    def create(self, agent_id: str, body: Mapping[str, Any], source: str = "person") -> Anchor:
        """A new anchor from an API body (``type``, ``title``, ``fields``, optional ``status``, optional ``id``);
        active unless it says pending, and then held to the write rule. AnchorError says what was wrong."""
        kind = check_type(body.get("type") or (split_id(body["id"])[0] if body.get("id") else None))
        title = self._redact(check_title(body.get("title")))
        fields = {k: self._redact(v) for k, v in check_fields(body.get("fields")).items()}
        fields.setdefault("decision", title)
        status = check_status(body.get("status", "active"))
        with self.db.transaction() as c:
            wanted = body.get("id")
            if wanted:
                if split_id(wanted)[0] != kind:
                    raise AnchorError(f"id {wanted} is not of type {kind}", "invalid_anchor_id")
                if c.execute("SELECT 1 FROM anchors WHERE agent_id = ? AND anchor_id = ?", (agent_id, wanted)).fetchone():
                    raise AnchorError(f"{wanted} exists already: PATCH it, or leave id out to get the next number", "anchor_exists")
                anchor_id = wanted
            else:
                anchor_id = format_id(kind, self._next_number(c, agent_id, kind))
            now = self._clock()
            anchor = Anchor(agent_id, anchor_id, title, status, fields, source, None, now, now)
            write_rule(anchor)
            self._insert(c, anchor)
        return anchor

    def get(self, agent_id: str, anchor_id: str) -> Anchor | None:
        split_id(anchor_id)
        with self.db.reading() as c:
            row = c.execute(f"SELECT {_COLUMNS} FROM anchors WHERE agent_id = ? AND anchor_id = ?", (agent_id, anchor_id)).fetchone()
        return _anchor(agent_id, row) if row else None

    def list(self, agent_id: str, status: str | None = None, kind: str | None = None) -> list[Anchor]:
        sql, args = f"SELECT {_COLUMNS} FROM anchors WHERE agent_id = ?", [agent_id]
        if status is not None:
            sql, args = sql + " AND status = ?", [*args, check_status(status)]
        if kind is not None:
            sql, args = sql + " AND kind = ?", [*args, check_type(kind)]
        with self.db.reading() as c:
            rows = c.execute(sql + " ORDER BY kind, number", args).fetchall()
        return [_anchor(agent_id, r) for r in rows]

    def update(self, agent_id: str, anchor_id: str, patch: Mapping[str, Any]) -> Anchor | None:
        """Change title, fields (merged; an empty string removes one) or status; the write rule holds for the result.
        None when the agent has no such anchor."""
        unknown = sorted(set(patch) - {"title", "fields", "status"})
        if unknown:
            raise AnchorError(f"a patch may change title, fields and status; not {', '.join(unknown)}", "invalid_anchor_patch")
        split_id(anchor_id)
        with self.db.transaction() as c:
            row = c.execute(f"SELECT {_COLUMNS} FROM anchors WHERE agent_id = ? AND anchor_id = ?", (agent_id, anchor_id)).fetchone()
            if row is None:
                return None
            anchor = _anchor(agent_id, row)
            if "title" in patch:
                anchor.title = self._redact(check_title(patch["title"]))
            for name, value in check_fields(patch.get("fields")).items():
                if value:
                    anchor.fields[name] = self._redact(value)
                else:
                    anchor.fields.pop(name, None)
            if "status" in patch:
                anchor.status = check_status(patch["status"])
            write_rule(anchor)
            anchor.updated_at = self._clock()
            c.execute(
                "UPDATE anchors SET title = ?, status = ?, fields = ?, updated_at = ? WHERE agent_id = ? AND anchor_id = ?",
                (anchor.title, anchor.status, dumps(anchor.fields), anchor.updated_at, agent_id, anchor_id),
            )
        return anchor

    def delete(self, agent_id: str, anchor_id: str) -> bool:
        split_id(anchor_id)
        with self.db.transaction() as c:
            return c.execute("DELETE FROM anchors WHERE agent_id = ? AND anchor_id = ?", (agent_id, anchor_id)).rowcount > 0

    def capture(self, agent_id: str, session_id: str | None, found: Sequence[Captured], source: str = "captured") -> list[Anchor]:
        """Anchors defined in an assistant's lines (or proposed by an archive's summary), as pending, each line once (a
        person's deleting one does not bring it back): a line seen before, or naming an anchor
        the agent has with the same title, is not captured again; one whose id is taken by another gets the next number."""
        made: list[Anchor] = []
        if not found:
            return made
        with self.db.transaction() as c:
            for cap in found:
                if c.execute("SELECT 1 FROM anchor_lines WHERE agent_id = ? AND line_hash = ?", (agent_id, cap.line_hash)).fetchone():
                    continue
                title, fields = self._redact(cap.title), {k: self._redact(v) for k, v in cap.fields.items()}
                row = c.execute("SELECT title FROM anchors WHERE agent_id = ? AND anchor_id = ?", (agent_id, cap.anchor_id)).fetchone()
                anchor_id = cap.anchor_id
                if row is not None:
                    if row[0] == title:
                        c.execute("INSERT INTO anchor_lines VALUES (?, ?, ?, ?)", (agent_id, cap.line_hash, anchor_id, self._clock()))
                        continue
                    kind = split_id(anchor_id)[0]
                    anchor_id = format_id(kind, self._next_number(c, agent_id, kind))
                    fields["stated_as"] = cap.anchor_id
                now = self._clock()
                anchor = Anchor(agent_id, anchor_id, title, "pending", fields, source, session_id, now, now)
                self._insert(c, anchor)
                c.execute("INSERT INTO anchor_lines VALUES (?, ?, ?, ?)", (agent_id, cap.line_hash, anchor_id, now))
                made.append(anchor)
        return made

    def propose(self, agent_id: str, session_id: str | None, found: Sequence[tuple[str, str, str]]) -> list[Anchor]:
        """Pending anchors an archive's summary found stated ((type, title, hash of the sentence)), each sentence once
        (one a person deleted is never proposed again), numbered after the agent's own."""
        made: list[Anchor] = []
        with self.db.transaction() as c:
            for kind, title, line in found:
                if c.execute("SELECT 1 FROM anchor_lines WHERE agent_id = ? AND line_hash = ?", (agent_id, line)).fetchone():
                    continue
                now = self._clock()
                title = self._redact(check_title(title))
                anchor = Anchor(
                    agent_id,
                    format_id(kind, self._next_number(c, agent_id, kind)),
                    title,
                    "pending",
                    {"decision": title},
                    "proposed",
                    session_id,
                    now,
                    now,
                )
                self._insert(c, anchor)
                c.execute("INSERT INTO anchor_lines VALUES (?, ?, ?, ?)", (agent_id, line, anchor.anchor_id, now))
                made.append(anchor)
        return made
