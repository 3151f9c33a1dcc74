"""Draft knowledge cards an archive proposed, per agent in SQLite: listed, accepted (the card file written) or rejected (never again)."""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from memory.store.sqlite_database import Database, dumps

STATUSES = ("proposed", "accepted", "rejected")


class DraftError(ValueError):
    """A judgement that cannot be made (the draft was judged already); ``status`` is the HTTP status to answer."""

    def __init__(self, message: str, code: str, status: int = 409) -> None:
        super().__init__(message)
        self.code, self.status = code, status


@dataclass(frozen=True)
class Draft:
    agent_id: str
    draft_id: int
    key: str
    title: str
    tags: tuple[str, ...]
    body: str
    status: str
    session_id: str | None
    path: str | None
    """The card file written when it was accepted."""
    created_at: float
    updated_at: float

    def view(self) -> dict[str, Any]:
        return {
            "id": self.draft_id,
            "title": self.title,
            "tags": list(self.tags),
            "body": self.body,
            "status": self.status,
            "session_id": self.session_id,
            "path": self.path,
            "created_at": self.created_at,
            "updated_at": self.updated_at,
        }


_COLUMNS = "agent_id, draft_id, key, title, tags, body, status, session_id, path, created_at, updated_at"


def _draft(row: Sequence[Any]) -> Draft:
    return Draft(row[0], row[1], row[2], row[3], tuple(json.loads(row[4])), row[5], row[6], row[7], row[8], row[9], row[10])


class CardDrafts:
    """Every agent's draft cards; each call names its agent and sees nothing of another's."""

    def __init__(self, db: Database, clock: Callable[[], float] = time.time, redact: Callable[[str], str] = lambda s: s) -> None:
        self.db = db
        self._clock = clock
        self._redact = redact

    def propose(
        self, agent_id: str, session_id: str | None, drafts: Iterable[tuple[str, str, Sequence[str], str]], known_titles: Iterable[str] = ()
    ) -> list[Draft]:
        """Keep drafts ((key, title, tags, body)) as proposed: never one proposed before (whatever became of it), one a
        person rejected, or one titled like a card already in the agent's folders. Returns those added."""
        taken = {" ".join(t.split()).lower() for t in known_titles}
        added: list[Draft] = []
        with self.db.transaction() as c:
            for key, title, tags, body in drafts:
                title = self._redact(" ".join(title.split()))
                if (
                    title.lower() in taken
                    or c.execute("SELECT 1 FROM card_drafts WHERE agent_id = ? AND key = ?", (agent_id, key)).fetchone()
                    or c.execute("SELECT 1 FROM rejected WHERE agent_id = ? AND kind = 'card' AND hash = ?", (agent_id, key)).fetchone()
                ):
                    continue
                number = c.execute("SELECT COALESCE(MAX(draft_id), 0) + 1 FROM card_drafts WHERE agent_id = ?", (agent_id,)).fetchone()[0]
                now = self._clock()
                row = (
                    agent_id,
                    number,
                    key,
                    title,
                    dumps([self._redact(t) for t in tags]),
                    self._redact(body),
                    "proposed",
                    session_id,
                    None,
                    now,
                    now,
                )
                c.execute(f"INSERT INTO card_drafts ({_COLUMNS}) VALUES ({', '.join('?' * len(row))})", row)
                taken.add(title.lower())
                added.append(_draft(row))
        return added

    def list(self, agent_id: str, status: str | None = None) -> list[Draft]:
        query = f"SELECT {_COLUMNS} FROM card_drafts WHERE agent_id = ?" + (" AND status = ?" if status else "") + " ORDER BY draft_id"
        with self.db.reading() as c:
            return [_draft(r) for r in c.execute(query, (agent_id, status) if status else (agent_id,))]

    def get(self, agent_id: str, draft_id: int) -> Draft | None:
        with self.db.reading() as c:
            row = c.execute(f"SELECT {_COLUMNS} FROM card_drafts WHERE agent_id = ? AND draft_id = ?", (agent_id, draft_id)).fetchone()
        return _draft(row) if row else None

    def _judge(self, agent_id: str, draft_id: int, status: str, write: Callable[[Draft], Path] | None) -> Draft | None:
        with self.db.transaction() as c:
            row = c.execute(f"SELECT {_COLUMNS} FROM card_drafts WHERE agent_id = ? AND draft_id = ?", (agent_id, draft_id)).fetchone()
            if row is None:
                return None
            draft = _draft(row)
            if draft.status != "proposed":
                raise DraftError(f"draft {draft_id} was {draft.status} already", f"draft_{draft.status}")
            path = str(write(draft)) if write is not None else None  # a failed write rolls the judgement back
            now = self._clock()
            c.execute(
                "UPDATE card_drafts SET status = ?, path = ?, updated_at = ? WHERE agent_id = ? AND draft_id = ?",
                (status, path, now, agent_id, draft_id),
            )
            if status == "rejected":
                c.execute("INSERT OR IGNORE INTO rejected VALUES (?, 'card', ?, ?)", (agent_id, draft.key, now))
        return replace(draft, status=status, path=path, updated_at=now)

    def accept(self, agent_id: str, draft_id: int, write: Callable[[Draft], Path]) -> Draft | None:
        """A person accepts a draft: ``write`` makes its card file (in the same transaction: if it fails, the draft stays
        proposed). None when the agent has no such draft; ``DraftError`` when it was judged already."""
        return self._judge(agent_id, draft_id, "accepted", write)

    def reject(self, agent_id: str, draft_id: int) -> Draft | None:
        """A person rejects a draft: it is never proposed again."""
        return self._judge(agent_id, draft_id, "rejected", None)
