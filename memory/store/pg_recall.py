"""The PostgreSQL side of recall: turns, S2 chunks, archives, searched by a GIN-indexed tsvector of FTS5's terms (CJK bigrams included)."""

from __future__ import annotations

import json
import re
import time
import unicodedata
from collections.abc import Sequence
from typing import Any

import psycopg

from memory.store.base import ChunkRow, Hit, Item, Turn
from memory.store.pg_database import location_of, open_pool
from memory.store.sqlite_recall import _chunk, index_text, matched, terms

_TOKEN = re.compile(r"[^\W_]+")
LEXEME_MAX = 256
"""Longer runs (a base64 blob, a hash) are not searched: a tsvector's lexeme is at most 2 KiB."""
LEXEMES_MAX = 20_000
"""Distinct terms indexed per row at most (a tsvector is at most 1 MiB)."""
POOL_MAX = 4
_TURN = "(agent_id, session_id, turn, hash, role, created_at, body) VALUES (%s, %s, %s, %s, %s, %s, %s)"
_CHUNK = (
    "(agent_id, session_id, chunk_id, first, last, created_at, source, tags, anchors, line, summary) "
    "VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s)"
)
_INDEX = "INSERT INTO recall_fts SELECT %s, %s, %s, %s, %s, array_to_tsvector(%s::text[]), %s"
"""Index a row from the one just inserted (``FROM new``): none when the row was there already."""


def _folded(ch: str) -> str:
    """A letter without its diacritics (``Ü`` → ``U``), as FTS5's ``remove_diacritics`` folds it; others as they are."""
    parts = unicodedata.normalize("NFD", ch)
    return parts[0] if len(parts) > 1 and all(unicodedata.combining(p) for p in parts[1:]) else ch


def lexemes(indexed: str) -> list[str]:
    """The distinct tokens of an indexed text (see ``index_text``) as FTS5's ``unicode61`` tokenizer makes them: runs of
    letters and digits (``_`` and punctuation separate), diacritics removed, lower-cased; CJK runs are bigrams already."""
    folded = (indexed if indexed.isascii() else "".join(_folded(ch) if ord(ch) > 127 else ch for ch in indexed)).lower()
    found = dict.fromkeys(t for t in _TOKEN.findall(folded) if len(t) <= LEXEME_MAX)
    return list(found)[:LEXEMES_MAX]


def _quoted(lexeme: str) -> str:
    return "'" + lexeme.replace("\\", "\\\\").replace("'", "''") + "'"


def term_query(word: str) -> str:
    """One query term as a tsquery: all its pieces (a phrase's adjacency is checked on the text after)."""
    return " & ".join(_quoted(p) for p in word.split(" ") if p)


def _clean(text: str) -> str:
    return text.replace("\x00", " ")  # PostgreSQL text holds no NUL


class PgRecall:
    """Recall in the store's PostgreSQL database, on a pool of its own; safe from any thread."""

    def __init__(self, url: str, pool_max: int = POOL_MAX, lock_timeout_ms: int = 5000) -> None:
        self.location = location_of(url)
        self.pool = open_pool(url, pool_max, "ruyi-recall", checked=True, lock_timeout_ms=lock_timeout_ms)

    def write_background(self, items: Sequence[Item]) -> None:
        """Write in one transaction, its statements in one pipeline; a row written before (same key, by this replica or
        another) is not written again, nor indexed again (the index row is made only from the row just inserted)."""
        now = time.time()
        with self.pool.connection() as c, c.pipeline(), c.transaction():
            for item in items:
                self._write(c, item, now)

    def _write(self, c: psycopg.Connection, item: Item, now: float) -> None:
        key = (item.agent_id, item.session_id)
        if isinstance(item, Turn):
            row = (*key, item.turn, item.hash, item.role, now, json.dumps(item.body))
            if not item.text.strip():
                c.execute(f"INSERT INTO turns {_TURN} ON CONFLICT DO NOTHING", row)
                return
            c.execute(
                f"WITH new AS (INSERT INTO turns {_TURN} ON CONFLICT DO NOTHING RETURNING 1) {_INDEX} FROM new ON CONFLICT DO NOTHING",
                (*row, *self._indexed(item.agent_id, item.session_id, "turn", f"{item.turn}:{item.hash}", item.text)),
            )
        elif isinstance(item, ChunkRow):
            row = (
                *key,
                item.chunk_id,
                item.first,
                item.last,
                now,
                _clean(item.source),
                json.dumps(item.tags),
                json.dumps(item.anchors),
                _clean(item.line),
                _clean(item.summary),
            )
            c.execute(
                f"WITH new AS (INSERT INTO chunks {_CHUNK} ON CONFLICT DO NOTHING RETURNING 1) {_INDEX} FROM new ON CONFLICT DO NOTHING",
                (*row, *self._indexed(item.agent_id, item.session_id, "chunk", item.chunk_id, item.summary)),
            )
        else:
            c.execute(
                "INSERT INTO archives (agent_id, session_id, archive_id, number, created_at, body) VALUES (%s, %s, %s, %s, %s, %s) "
                "ON CONFLICT DO NOTHING",
                (*key, item.archive_id, item.number, now, json.dumps(item.body)),
            )

    @staticmethod
    def _indexed(agent_id: str, session_id: str, kind: str, ref: str, text: str) -> tuple[Any, ...]:
        indexed = _clean(index_text(text))
        found = lexemes(indexed)
        return agent_id, session_id, kind, ref, indexed, found, len(found)

    def search(
        self,
        agent_id: str,
        session_id: str | None,
        text: str,
        limit: int = 5,
        kinds: Sequence[str] = ("chunk", "turn"),
        agents: Sequence[str] | None = None,
    ) -> list[Hit]:
        """The best matches of a text's terms among an agent's session (None: all its sessions; ``agents``: those agents)."""
        words = terms(text)
        if not words:
            return []
        scope = list(agents) if agents is not None else [agent_id]
        everyone = scope == ["*"]
        queries = [term_query(w) for w in words]
        score = " + ".join(f"(CASE WHEN terms @@ %s::tsquery THEN {2 if w.count(' ') >= 2 else 1} ELSE 0 END)" for w in words)
        sql = (
            f"SELECT kind, ref, agent_id, session_id, text, {score} AS score FROM recall_fts WHERE terms @@ %s::tsquery"
            + ("" if everyone else " AND agent_id = ANY(%s)")
            + (" AND session_id = %s" if session_id is not None else "")
            + " AND kind = ANY(%s) ORDER BY score DESC, size, agent_id, session_id, kind, ref LIMIT %s"
        )
        args: list[Any] = [*queries, " | ".join(f"({q})" for q in queries)]
        args += ([] if everyone else [scope]) + ([session_id] if session_id is not None else []) + [list(kinds), limit * 4]
        with self.pool.connection() as c:
            rows = c.execute(sql, args).fetchall()
            hits = [
                Hit(kind, ref, matched(words, indexed), self._row(c, kind, ref, agent, session)) for kind, ref, agent, session, indexed, _ in rows
            ]
        hits = [h for h in hits if h.matched]  # a phrase's pieces all there but not side by side: FTS5 would not match it
        hits.sort(key=lambda h: -h.matched)
        return hits[:limit]

    def _row(self, c: psycopg.Connection, kind: str, ref: str, agent_id: str, session_id: str) -> dict[str, Any]:
        if kind == "chunk":
            row = c.execute(
                "SELECT chunk_id, first, last, source, tags, anchors, line, summary FROM chunks "
                "WHERE agent_id = %s AND session_id = %s AND chunk_id = %s",
                (agent_id, session_id, ref),
            ).fetchone()
            return {"session_id": session_id, **_chunk(row)} if row else {"session_id": session_id, "chunk_id": ref}
        turn, _, digest = ref.partition(":")
        row = c.execute(
            "SELECT body FROM turns WHERE agent_id = %s AND session_id = %s AND turn = %s AND hash = %s", (agent_id, session_id, int(turn), digest)
        ).fetchone()
        return {"session_id": session_id, "turn": int(turn), "message": json.loads(row[0]) if row else None}

    def chunks(self, agent_id: str, session_id: str) -> list[dict[str, Any]]:
        with self.pool.connection() as c:
            rows = c.execute(
                "SELECT chunk_id, first, last, source, tags, anchors, line, summary FROM chunks "
                "WHERE agent_id = %s AND session_id = %s ORDER BY first, id",
                (agent_id, session_id),
            ).fetchall()
        return [_chunk(r) for r in rows]

    def chunk(self, agent_id: str, chunk_id: str) -> list[dict[str, Any]]:
        """A chunk by id among the agent's sessions (a child made from a parent's history has the same chunks)."""
        with self.pool.connection() as c:
            rows = c.execute(
                "SELECT chunk_id, first, last, source, tags, anchors, line, summary, session_id FROM chunks "
                "WHERE agent_id = %s AND chunk_id = %s ORDER BY id",
                (agent_id, chunk_id),
            ).fetchall()
        return [{**_chunk(r[:-1]), "session_id": r[-1]} for r in rows]

    def archives(self, agent_id: str, session_id: str) -> list[dict[str, Any]]:
        with self.pool.connection() as c:
            rows = c.execute(
                "SELECT body, created_at FROM archives WHERE agent_id = %s AND session_id = %s ORDER BY created_at, id", (agent_id, session_id)
            ).fetchall()
        return [{**json.loads(body), "created_at": created} for body, created in rows]

    def turns(self, agent_id: str, session_id: str, first: int = 0, last: int | None = None) -> list[dict[str, Any]]:
        """The session's raw turns first..last, in order (a position seen with two contents: both, oldest first)."""
        with self.pool.connection() as c:
            rows = c.execute(
                "SELECT turn, body FROM turns WHERE agent_id = %s AND session_id = %s AND turn >= %s AND turn <= %s ORDER BY turn, id",
                (agent_id, session_id, first, last if last is not None else 1 << 62),
            ).fetchall()
        return [{"turn": t, "message": json.loads(b)} for t, b in rows]

    def expire_turns(self, before: float) -> int:
        """Remove raw turns written before ``before`` (``s0.retention_days``); returns how many."""
        with self.pool.connection() as c, c.transaction():
            c.execute(
                "DELETE FROM recall_fts f USING turns t WHERE t.created_at < %s AND f.agent_id = t.agent_id AND "
                "f.session_id = t.session_id AND f.kind = 'turn' AND f.ref = t.turn || ':' || t.hash",
                (before,),
            )
            return c.execute("DELETE FROM turns WHERE created_at < %s", (before,)).rowcount

    def checkpoint(self) -> None:
        """Nothing to do: PostgreSQL checkpoints on its own."""

    def close(self) -> None:
        self.pool.close()
