"""The SQLite store's reading for ``ruyi report`` (audit records since a time, streamed oldest first) and its size (``store.max_bytes``)."""

from __future__ import annotations

import sqlite3
import threading
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager
from pathlib import Path

from memory.store.base import AuditRecord
from memory.store.sqlite_recall import session_ranges, unindex
from memory.store.sqlite_schema import unpack

TRUNCATE_WAIT_MS = 100
"""How long a truncating checkpoint waits for readers and writers (it blocks new writers meanwhile): past it, passive."""
SHRINK_SESSIONS = 5
"""Sessions whose rows one step toward ``store.max_bytes`` removes (one short transaction)."""
SHRINK_PAGES = 256
SHRINK_TO = 0.9
"""Rows are removed until they use this share of ``max_bytes`` (room for what comes next before the next step)."""


class SQLiteReport:
    """Mixed into SQLiteStore: the report's queries on its connection (a CLI's, or a worker thread's under the store's lock)."""

    _conn: sqlite3.Connection

    def audit_records(self, since: float | None = None) -> Iterator[AuditRecord]:
        rows = self._conn.execute(
            "SELECT agent_id, session_id, request_id, created_at, body FROM audit WHERE created_at >= ? ORDER BY created_at, rowid",
            (since if since is not None else float("-inf"),),
        )
        for agent_id, session_id, request_id, created_at, body in rows:
            yield AuditRecord(agent_id, session_id, request_id, float(created_at), unpack(body))


class SQLiteSize:
    """Mixed into SQLiteStore: its size on disk, and the small steps that keep it under ``store.max_bytes``."""

    _conn: sqlite3.Connection
    _timeout: float
    _checkpoint_lock: threading.Lock
    path: Path
    max_bytes: int
    shrunk: dict[str, int]
    bytes: int
    _transaction: Callable[[], AbstractContextManager[sqlite3.Connection]]
    _expire: Callable[[list[tuple[str, str]]], None]
    compact: Callable[..., int]
    _wal_bytes: Callable[[], int]

    def size(self) -> tuple[int, int]:
        """(bytes the rows use, bytes on disk: the file and its write-ahead log)."""
        pages, free, page = (int(self._conn.execute(f"PRAGMA {p}").fetchone()[0]) for p in ("page_count", "freelist_count", "page_size"))
        try:
            disk = self.path.stat().st_size + self._wal_bytes()
        except OSError:
            disk = pages * page
        self.bytes = disk
        return (pages - free) * page, disk

    def shrink_step(self, sessions: int = SHRINK_SESSIONS, pages: int = SHRINK_PAGES) -> str | None:
        """One small step toward ``max_bytes`` (one short transaction): the oldest sessions' raw turns and chunks (with
        their index rows) first; when none are left, their reports and audit records; then whole sessions, oldest first,
        their decisions with them (what is in force goes last). Space freed is given back ``pages`` at a time. Returns what
        the step did (``turns``, ``records``, ``sessions``, ``compact``), None when the store is within its limit."""
        if self.max_bytes <= 0:
            return None
        used, disk = self.size()
        if disk <= self.max_bytes:
            return None
        if used <= self.max_bytes * SHRINK_TO:  # the rows fit: only the file is too big
            before = int(self._conn.execute("PRAGMA freelist_count").fetchone()[0])
            if before and self.compact(pages) < before:
                self._count("compact", 1)
                return "compact"
            wal = self._wal_bytes()
            if wal and self._truncate() and self._wal_bytes() < wal:  # the log of the removals, emptied
                self._count("checkpoint", 1)
                return "checkpoint"
            return None  # nothing more to give back (a file made before incremental vacuum): rows are not removed for it
        c = self._conn
        oldest = c.execute(
            "SELECT agent_id, session_id FROM sessions s WHERE EXISTS (SELECT 1 FROM turns t WHERE t.agent_id = s.agent_id AND "
            "t.session_id = s.session_id) OR EXISTS (SELECT 1 FROM chunks k WHERE k.agent_id = s.agent_id AND k.session_id = s.session_id) "
            "ORDER BY last_seen LIMIT ?",
            (sessions,),
        ).fetchall()
        if oldest:
            with self._transaction() as c:
                for key in oldest:
                    for first, last in session_ranges(c, *key):
                        self._count(
                            "recall_fts",
                            unindex(c, "id BETWEEN ? AND ? AND kind IN ('turn', 'chunk')", (first, last)),
                        )
                    for table in ("turns", "chunks"):
                        self._count(table, c.execute(f"DELETE FROM {table} WHERE agent_id = ? AND session_id = ?", key).rowcount)
            self._count("steps", 1)
            return "turns"
        oldest = c.execute(
            "SELECT agent_id, session_id FROM sessions s WHERE EXISTS (SELECT 1 FROM reports r WHERE r.agent_id = s.agent_id AND "
            "r.session_id = s.session_id) OR EXISTS (SELECT 1 FROM audit a WHERE a.agent_id = s.agent_id AND a.session_id = s.session_id) "
            "ORDER BY last_seen LIMIT ?",
            (sessions,),
        ).fetchall()
        if oldest:
            with self._transaction() as c:
                for table in ("reports", "audit"):
                    self._count(table, sum(c.execute(f"DELETE FROM {table} WHERE agent_id = ? AND session_id = ?", key).rowcount for key in oldest))
            self._count("steps", 1)
            return "records"
        newest = c.execute("SELECT agent_id, session_id FROM sessions ORDER BY last_seen DESC LIMIT 1").fetchone()
        oldest = [
            k
            for k in c.execute("SELECT agent_id, session_id FROM sessions ORDER BY last_seen LIMIT ?", (sessions + 1,)).fetchall()
            if tuple(k) != tuple(newest or ())
        ][:sessions]
        if not oldest:
            return None  # the newest session stays, whatever its size
        self._expire([(a, s) for a, s in oldest])
        self._count("sessions", len(oldest))
        self._count("steps", 1)
        return "sessions"

    def _truncate(self) -> bool:
        """Fold the write-ahead log in and empty it, waiting at most TRUNCATE_WAIT_MS for readers and writers."""
        with self._checkpoint_lock:
            self._conn.execute(f"PRAGMA busy_timeout = {TRUNCATE_WAIT_MS}")
            try:
                busy = self._conn.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchone()[0]
            finally:
                self._conn.execute(f"PRAGMA busy_timeout = {int(self._timeout * 1000)}")
        return not busy

    def _count(self, what: str, n: int) -> None:
        self.shrunk[what] = self.shrunk.get(what, 0) + n
