"""The SQLite side of recall: raw turns, S2 chunks and archives under FTS5, CJK as overlapping bigrams so two-character words match."""

from __future__ import annotations

import itertools
import json
import re
import sqlite3
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from memory.store.base import ChunkRow, Hit, Item, Turn
from memory.store.locks import WatchedLock
from memory.store.sqlite_schema import BLOCKS, ROWS, SCHEMA, link_key, link_of, pack, unpack

_CJK = re.compile(r"[\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff\uac00-\ud7af]+")
_WORD = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.\-/]*[A-Za-z0-9_]|[A-Za-z0-9_]")
_PIECE = re.compile(r"[A-Za-z0-9]+")
STOPWORDS = frozenset(
    """
a an and are as at be but by can do does for from has have how i if in into is it its let me my no not of on or our so
than that the their them then there these this those to up us was we were what when where which who why will with you
your now next run step file line lines output returncode true false none null self def return import
cat sed grep awk echo ls cd find head tail python python3 pytest git rm mv cp mkdir touch bash sh npm pip
""".split()
)
TERMS_MAX = 24
WAL_PAGES = 256
"""This connection folds the write-ahead log in (passive) past this many pages, 1 MiB (SQLite's default: 1,000); the
log's file, reused from its start after each, stays about this big (RELIABILITY.md, "Disk per request")."""
EXPIRE_ROWS = 200
"""Raw turns removed per transaction by ``expire_turns`` (the lock is released between two)."""
EXPIRE_PAUSE_S = 0.12
"""The rest between two steps: longer than SQLite's busy handler sleeps between two tries (up to 100 ms), so a request's
write waiting for the database gets it."""


def bigrams(run: str) -> list[str]:
    """A CJK run as its overlapping two-character pieces (a single character stays as it is)."""
    return [run] if len(run) < 2 else [run[i : i + 2] for i in range(len(run) - 1)]


def index_text(text: str) -> str:
    """What FTS5 indexes for a text: the text, each CJK run replaced by its bigrams separated by spaces."""
    return _CJK.sub(lambda m: " " + " ".join(bigrams(m.group(0))) + " ", text)


def terms(text: str, limit: int = TERMS_MAX) -> list[str]:
    """The distinctive terms of a text, in order: identifiers and paths (at least 3 characters, not stop words)
    and CJK bigrams; each term is what FTS5 should match as a phrase."""
    found: dict[str, None] = {}
    for match in _CJK.finditer(text):
        for piece in bigrams(match.group(0)):
            found.setdefault(piece, None)
    for match in _WORD.finditer(_CJK.sub(" ", text)):
        word = match.group(0).lower()
        pieces = _PIECE.findall(word)
        if len(word) < 3 or word in STOPWORDS or (len(pieces) == 1 and pieces[0].isdigit()):
            continue
        found.setdefault(" ".join(pieces), None)
    return list(found)[:limit]


def match_query(words: list[str]) -> str:
    """An FTS5 MATCH expression: any of the terms, each a quoted phrase."""
    return " OR ".join('"' + w.replace('"', '""') + '"' for w in words if w.strip())


def matched(words: list[str], text: str) -> int:
    """How strongly a text holds the terms: each term found counts 1, a path or dotted name (3 pieces or more) 2.
    Phrases are compared on the indexed form, lower-cased, word-separated."""
    indexed = index_text(text)
    flat = " " + " ".join(_PIECE.findall(indexed.lower()) + _CJK.findall(indexed)) + " "
    return sum(2 if w.count(" ") >= 2 else 1 for w in words if f" {w} " in flat)


SLOT_BITS = 21
"""A session's rows live in a block of 2**21 rowids (a fuller session gets another); an agent's sessions in a block of
2**21 session blocks (an agent with more gets another): the rowid is agent block << 42 | session slot << 21 | row."""
SLOT = 1 << SLOT_BITS
AGENT = 1 << (2 * SLOT_BITS)
TABLES = ("turns", "chunks", "archives", "recall_fts")
"""Per-session tables, removed with their session (``recall_fts``: with ``recall_rows``, by ``delete_sessions``)."""


_INDEX = "INSERT INTO recall_fts (rowid, text) VALUES (?, ?)"
_ROW = "INSERT INTO recall_rows VALUES (?, ?, ?, ?, ?, ?, ?)"


def stored_text(stored: str | bytes) -> str:
    """An index row's text as ``recall_rows`` keeps it: packed, or plain (rows carried over by migration 8)."""
    return stored if isinstance(stored, str) else str(unpack(stored))


def unindex(c: sqlite3.Connection, where: str, args: Sequence[Any]) -> int:
    """Remove the index rows of ``recall_rows`` that ``where`` selects, from both (in the caller's transaction);
    returns how many."""
    rows = c.execute(f"SELECT id, text FROM recall_rows WHERE {where}", args).fetchall()
    c.executemany("INSERT INTO recall_fts (recall_fts, rowid, text) VALUES ('delete', ?, ?)", [(i, stored_text(t)) for i, t in rows])
    c.executemany("DELETE FROM recall_rows WHERE id = ?", [(i,) for i, _ in rows])
    return len(rows)


def _index(c: sqlite3.Connection, key: tuple[str, str], kind: str, ref: str, text: str) -> None:
    rowid, seq = _next_rowid(c, *key)
    indexed = index_text(text)
    c.execute(_INDEX, (rowid, indexed))
    c.execute(_ROW, (rowid, *key, kind, ref_key(ref), seq, pack(indexed)))


def ref_key(ref: str) -> str | bytes:
    """A turn's ref (``turn:hash``) as ``recall_rows`` keeps it: the hash's 16 bytes, then the turn's number (a chunk's
    id, or a hash that is not a digest, as it is)."""
    turn, _, digest = ref.partition(":")
    kept = link_key(digest)
    return kept + turn.encode() if isinstance(kept, bytes) and turn.isdigit() else ref


def ref_of(stored: str | bytes) -> str:
    """A ref as kept (``ref_key``), as the string it was."""
    return stored if isinstance(stored, str) else f"{bytes(stored[16:]).decode()}:{bytes(stored[:16]).hex()}"


def session_ranges(c: sqlite3.Connection, agent_id: str, session_id: str) -> list[tuple[int, int]]:
    """The rowid ranges of a session's index rows (one but for a session of over 2**21 rows)."""
    rows = c.execute("SELECT base FROM recall_sessions WHERE agent_id = ? AND session_id = ? ORDER BY base", (agent_id, session_id))
    return [(base, base + SLOT - 1) for (base,) in rows]


def agent_ranges(c: sqlite3.Connection, agent_id: str) -> list[tuple[int, int]]:
    """The rowid ranges of an agent's index rows (one but for an agent of over 2**21 sessions)."""
    rows = c.execute("SELECT block FROM recall_agents WHERE agent_id = ? ORDER BY block", (agent_id,))
    return [(block * AGENT, (block + 1) * AGENT - 1) for (block,) in rows]


def delete_sessions(c: sqlite3.Connection, keys: Sequence[tuple[str, str]]) -> int:
    """Remove sessions' index rows, by their rowid ranges (in the caller's transaction); returns how many rows."""
    removed = 0
    for agent_id, session_id in keys:
        for first, last in session_ranges(c, agent_id, session_id):
            removed += unindex(c, "id BETWEEN ? AND ?", (first, last))
    c.executemany("DELETE FROM recall_sessions WHERE agent_id = ? AND session_id = ?", keys)
    return removed


def _next_rowid(c: sqlite3.Connection, agent_id: str, session_id: str) -> tuple[int, int]:
    """The rowid of a session's next index row and its ``seq`` (in the caller's transaction)."""
    ((seq,),) = c.execute("UPDATE recall_seq SET n = n + 1 RETURNING n").fetchall()
    row = c.execute(
        "SELECT base, next FROM recall_sessions WHERE agent_id = ? AND session_id = ? ORDER BY base DESC LIMIT 1", (agent_id, session_id)
    ).fetchone()
    if row is not None and row[1] < SLOT:
        c.execute("UPDATE recall_sessions SET next = next + 1 WHERE agent_id = ? AND session_id = ? AND base = ?", (agent_id, session_id, row[0]))
        return row[0] + row[1], seq
    agent = c.execute("SELECT block, sessions FROM recall_agents WHERE agent_id = ? ORDER BY block DESC LIMIT 1", (agent_id,)).fetchone()
    if agent is not None and agent[1] < SLOT:
        c.execute("UPDATE recall_agents SET sessions = sessions + 1 WHERE agent_id = ? AND block = ?", (agent_id, agent[0]))
        base = agent[0] * AGENT + agent[1] * SLOT
    else:
        (block,) = c.execute("SELECT coalesce(max(block), 0) + 1 FROM recall_agents").fetchone()
        c.execute("INSERT INTO recall_agents VALUES (?, ?, 1)", (agent_id, block))
        base = block * AGENT
    c.execute("INSERT INTO recall_sessions VALUES (?, ?, ?, 1)", (agent_id, session_id, base))
    return base, seq


class Recall:
    """Its own connection to the store's database (or to one in memory); a lock makes it safe from worker threads."""

    def __init__(self, path: Path | None = None, busy_timeout_ms: int = 5000) -> None:
        self.location = str(path) if path is not None else ":memory:"
        self._conn = sqlite3.connect(self.location, timeout=busy_timeout_ms / 1000, isolation_level=None, check_same_thread=False)
        self._lock = WatchedLock()
        if path is None:
            for statement in (*SCHEMA.split(";"), *BLOCKS.split(";"), *ROWS.split(";")):
                self._conn.execute(statement)
        else:
            self._conn.execute("PRAGMA journal_mode = WAL")
            self._conn.execute(f"PRAGMA wal_autocheckpoint = {WAL_PAGES}")
            self._conn.execute("PRAGMA synchronous = NORMAL")

    def write_background(self, items: Sequence[Item]) -> None:
        """Write in one transaction; a row written before (same key) is not written again, nor indexed again."""
        now = time.time()
        with self._lock:
            c = self._conn
            c.execute("BEGIN IMMEDIATE")
            try:
                for item in items:
                    self._write(c, item, now)
            except BaseException:
                c.execute("ROLLBACK")
                raise
            c.execute("COMMIT")

    def _write(self, c: sqlite3.Connection, item: Item, now: float) -> None:
        key = (item.agent_id, item.session_id)
        if isinstance(item, Turn):
            cur = c.execute(
                "INSERT OR IGNORE INTO turns VALUES (?, ?, ?, ?, ?, ?, ?)",
                (*key, item.turn, link_key(item.hash), item.role, now, pack(item.body)),
            )
            if cur.rowcount and item.text.strip():
                _index(c, key, "turn", f"{item.turn}:{item.hash}", item.text)
        elif isinstance(item, ChunkRow):
            cur = c.execute(
                "INSERT OR IGNORE INTO chunks VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                (
                    *key,
                    item.chunk_id,
                    item.first,
                    item.last,
                    now,
                    item.source,
                    json.dumps(item.tags),
                    json.dumps(item.anchors),
                    item.line,
                    item.summary,
                ),
            )
            if cur.rowcount:
                _index(c, key, "chunk", item.chunk_id, item.summary)
        else:
            c.execute(
                "INSERT OR IGNORE INTO archives VALUES (?, ?, ?, ?, ?, ?)",
                (*key, item.archive_id, item.number, now, json.dumps(item.body, ensure_ascii=False)),
            )

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
        everyone = scope == ["*"]  # every agent's archives: only when the config allows it and the request asks
        sql = (
            "SELECT r.kind, r.ref, r.agent_id, r.session_id, r.text, bm25(recall_fts), r.seq FROM recall_fts "
            "JOIN recall_rows r ON r.id = recall_fts.rowid WHERE recall_fts MATCH ?"
            + ("" if everyone else " AND recall_fts.rowid BETWEEN ? AND ?")
            + ("" if everyone else f" AND r.agent_id IN ({', '.join('?' * len(scope))})")
            + (" AND r.session_id = ?" if session_id is not None else "")
            + f" AND r.kind IN ({', '.join('?' * len(kinds))}) ORDER BY bm25(recall_fts), r.seq LIMIT ?"
        )
        rest = [*([] if everyone else scope), *([session_id] if session_id is not None else []), *kinds, limit * 4]
        query = match_query(words)
        with self._lock:
            c = self._conn
            if everyone:
                rows = c.execute(sql, [query, *rest]).fetchall()
            else:  # within the session's (the agents') rowid ranges: FTS5 reads only those rows; bm25 is the whole index's
                ranges = [r for a in scope for r in (session_ranges(c, a, session_id) if session_id is not None else agent_ranges(c, a))]
                rows = [row for first, last in ranges for row in c.execute(sql, [query, first, last, *rest]).fetchall()]
                if len(ranges) > 1:  # the best of each range, merged as one query would have ranked them
                    rows = sorted(rows, key=lambda r: (r[5], r[6]))[: limit * 4]
            hits = [
                Hit(kind, ref_of(ref), matched(words, stored_text(indexed)), self._row(kind, ref_of(ref), agent, session))
                for kind, ref, agent, session, indexed, _, _ in rows
            ]
        hits.sort(key=lambda h: -h.matched)
        return hits[:limit]

    def _row(self, kind: str, ref: str, agent_id: str, session_id: str) -> dict[str, Any]:
        if kind == "chunk":
            row = self._conn.execute(
                "SELECT chunk_id, first, last, source, tags, anchors, line, summary FROM chunks "
                "WHERE agent_id = ? AND session_id = ? AND chunk_id = ?",
                (agent_id, session_id, ref),
            ).fetchone()
            return {"session_id": session_id, **_chunk(row)} if row else {"session_id": session_id, "chunk_id": ref}
        turn, _, digest = ref.partition(":")
        row = self._conn.execute(
            "SELECT body FROM turns WHERE agent_id = ? AND session_id = ? AND turn = ? AND hash = ?",
            (agent_id, session_id, int(turn), link_key(digest)),
        ).fetchone()
        return {"session_id": session_id, "turn": int(turn), "message": unpack(row[0]) if row else None}

    def chunks(self, agent_id: str, session_id: str) -> list[dict[str, Any]]:
        with self._lock:
            rows = self._conn.execute(
                "SELECT chunk_id, first, last, source, tags, anchors, line, summary FROM chunks "
                "WHERE agent_id = ? AND session_id = ? ORDER BY first, rowid",
                (agent_id, session_id),
            ).fetchall()
        return [_chunk(r) for r in rows]

    def chunk(self, agent_id: str, chunk_id: str) -> list[dict[str, Any]]:
        """A chunk by id among the agent's sessions (a child made from a parent's history has the same chunks)."""
        with self._lock:
            rows = self._conn.execute(
                "SELECT chunk_id, first, last, source, tags, anchors, line, summary, session_id FROM chunks WHERE agent_id = ? AND chunk_id = ?",
                (agent_id, chunk_id),
            ).fetchall()
        return [{**_chunk(r[:-1]), "session_id": r[-1]} for r in rows]

    def archives(self, agent_id: str, session_id: str) -> list[dict[str, Any]]:
        with self._lock:
            rows = self._conn.execute(
                "SELECT body, created_at FROM archives WHERE agent_id = ? AND session_id = ? ORDER BY created_at, rowid", (agent_id, session_id)
            ).fetchall()
        return [{**json.loads(body), "created_at": created} for body, created in rows]

    def turns(self, agent_id: str, session_id: str, first: int = 0, last: int | None = None) -> list[dict[str, Any]]:
        """The session's raw turns first..last, in order (a position seen with two contents: both, oldest first)."""
        with self._lock:
            rows = self._conn.execute(
                "SELECT turn, body FROM turns WHERE agent_id = ? AND session_id = ? AND turn >= ? AND turn <= ? ORDER BY turn, rowid",
                (agent_id, session_id, first, last if last is not None else 1 << 62),
            ).fetchall()
        return [{"turn": t, "message": unpack(b)} for t, b in rows]

    def expire_turns(self, before: float, rows: int = EXPIRE_ROWS) -> int:
        """Remove raw turns written before ``before`` (``s0.retention_days``); returns how many. In steps of ``rows`` turns,
        each its own short transaction, with a rest between two (searches and writes go on meanwhile): call it off the
        event loop."""
        removed = 0
        while True:
            with self._lock:
                # the oldest by rowid (written in time order: no index on created_at), up to the first not yet due
                oldest = self._conn.execute("SELECT rowid, agent_id, session_id, turn, hash, created_at FROM turns ORDER BY rowid LIMIT ?", (rows,))
                gone = list(itertools.takewhile(lambda r: r[5] < before, oldest.fetchall()))
                gone = [g[:5] for g in gone]
                if gone:
                    self._expire_step(gone)
            removed += len(gone)
            if len(gone) < rows:
                return removed
            time.sleep(EXPIRE_PAUSE_S)  # searches and writes (of this process and others) take their turn

    def _expire_step(self, gone: list[tuple[int, str, str, int, str | bytes]]) -> None:
        by_session: dict[tuple[str, str], set[str]] = {}
        for _, agent, session, turn, digest in gone:
            by_session.setdefault((agent, session), set()).add(f"{turn}:{link_of(digest)}")
        c = self._conn
        c.execute("BEGIN IMMEDIATE")
        try:
            for (agent, session), refs in by_session.items():  # the session's index rows, by its rowid range
                for first, last in session_ranges(c, agent, session):
                    indexed = c.execute("SELECT id, ref FROM recall_rows WHERE id BETWEEN ? AND ? AND kind = 'turn'", (first, last))
                    for r in [r for r, ref in indexed.fetchall() if ref_of(ref) in refs]:
                        unindex(c, "id = ?", (r,))
            c.executemany("DELETE FROM turns WHERE rowid = ?", [(g[0],) for g in gone])
        except BaseException:
            c.execute("ROLLBACK")
            raise
        c.execute("COMMIT")

    def checkpoint(self) -> None:
        """Nothing to do: the store's own connection folds the write-ahead log."""

    def close(self) -> None:
        with self._lock:
            self._conn.close()


def _chunk(row: Sequence[Any]) -> dict[str, Any]:
    chunk_id, first, last, source, tags, anchors, line, summary = row
    return {
        "chunk_id": chunk_id,
        "first": first,
        "last": last,
        "source": source,
        "tags": json.loads(tags),
        "anchors": json.loads(anchors),
        "line": line,
        "summary": summary,
    }
