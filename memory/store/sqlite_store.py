"""The SQLite backend of the store: one file under data_dir, WAL, tiny transactions; all of Ruyi's SQL lives here."""

from __future__ import annotations

import json
import sqlite3
import threading
import time
from collections.abc import Iterator, Sequence
from contextlib import AbstractContextManager, contextmanager, nullcontext
from dataclasses import fields
from pathlib import Path
from typing import Any

import structlog

from memory.store.base import (
    Audit,
    Background,
    Changes,
    ModelRatio,
    Report,
    SessionRecord,
    Stall,
    StoredSession,
    StoreError,
    Usage,
)
from memory.store.locks import FileSessionLocks, SlotLock
from memory.store.sqlite_database import immediate, private_file
from memory.store.sqlite_recall import TABLES as RECALL_TABLES
from memory.store.sqlite_recall import delete_sessions, unindex
from memory.store.sqlite_report import TRUNCATE_WAIT_MS, SQLiteReport, SQLiteSize
from memory.store.sqlite_schema import link_key, link_of, migrate, pack, unpack
from redaction.redact import redact_value

log = structlog.get_logger(__name__)
_COLUMNS = tuple(f.name for f in fields(SessionRecord))
assert _COLUMNS[-1] == "version"  # the upsert below moves it on by its own rule
_UPSERT_SESSION = (
    f"INSERT INTO sessions ({', '.join(_COLUMNS)}) VALUES ({', '.join('?' * len(_COLUMNS))}) "
    f"ON CONFLICT (agent_id, session_id) DO UPDATE SET {', '.join(f'{c} = excluded.{c}' for c in _COLUMNS[2:-1])}, "
    "version = max(excluded.version, sessions.version + 1)"  # a write from a stale copy still moves the version on
)
_IN_LIST = "IN (SELECT value FROM json_each(?))"
_POINT_LOOKUPS = 4
_IN_BATCH = 500
CHECKPOINT_BYTES = 1 << 20
"""Fold the write-ahead log into the database once it is this big (SQLite's own default is about 4 MiB): the log's file
is reused from its start after each, so it stays about this big between two truncations (4 MiB was 0.37 KB a request
of a 10-minute soak at 20 requests/s, RELIABILITY.md "Disk per request")."""
TRUNCATE_EVERY_S = 60.0
"""At most this often (and whenever the log passed ``TRUNCATE_BYTES``) a checkpoint also empties the log file, so its size
stays bounded (a passive one reuses the file from its start but never shrinks it)."""
TRUNCATE_BYTES = 64 << 20
TRUNCATE_RETRY_S = 5.0
_PER_SESSION = (
    "links",
    "decisions",
    "refs",
    "reports",
    "audit",
    *RECALL_TABLES,
    "snapshots",
    "child_results",
    "session_facts",
    "task_calls",
    "child_notebook_versions",
    "refined_forms",
    "sessions",
)


def _many(conn: sqlite3.Connection, sql: str, rows: Sequence[Sequence[Any]]) -> None:
    if rows:  # an empty executemany still prepares its statement
        conn.executemany(sql, rows)


def _json(value: Any) -> str:
    return json.dumps(value, separators=(",", ":"))  # ASCII: lone surrogates survive the round trip


def _row(record: SessionRecord) -> tuple[Any, ...]:
    return tuple(getattr(record, name) for name in _COLUMNS)  # not dataclasses.astuple: it deep-copies


def _owned_tables(conn: sqlite3.Connection) -> tuple[tuple[str, bool], ...]:
    """Every table with an agent_id column, and whether it also has session_id: what `forget` clears
    (tables added by later migrations included, with no change here)."""
    names = [r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table' ORDER BY name")]
    owned = []
    for name in names:
        columns = {r[1] for r in conn.execute(f"PRAGMA table_info({name})")}
        if "agent_id" in columns:
            owned.append((name, "session_id" in columns))
    return tuple(owned)


def _text(original: str) -> bytes:
    return original.encode("utf-8", "surrogatepass")


REF_PIECE = 1 << 20
"""An original longer than this many characters is written into its row a piece at a time (SQLite's incremental
blob I/O): a 24 MiB tool output never becomes a 24 MiB bytes object and SQLite's own copy of it at once."""


def _put_large_ref(conn: sqlite3.Connection, agent_id: str, session_id: str, ref_id: str, original: str) -> None:
    """The same row as ``INSERT OR REPLACE INTO refs VALUES (?, ?, ?, _text(original))``, encoded piece by piece
    (UTF-8 with surrogatepass encodes each code point alone: the pieces join to the whole's bytes)."""
    pieces = range(0, len(original), REF_PIECE)
    size = len(original) if original.isascii() else sum(len(_text(original[i : i + REF_PIECE])) for i in pieces)
    row = conn.execute("INSERT OR REPLACE INTO refs VALUES (?, ?, ?, zeroblob(?))", (agent_id, session_id, ref_id, size)).lastrowid
    assert row is not None  # an INSERT always sets it
    with conn.blobopen("refs", "original", row) as blob:
        for i in pieces:
            blob.write(_text(original[i : i + REF_PIECE]))


class SQLiteStore(SQLiteReport, SQLiteSize):
    """The store in one SQLite file. Use it from one thread (the event loop's); only ``checkpoint``
    may be called from another, on its own connection. The report's reading is in sqlite_report."""

    def __init__(self, path: Path, busy_timeout_ms: int = 5000, deadline_ms: int | None = None, max_bytes: int = 0) -> None:
        self.path = path
        self.max_bytes = max_bytes
        """``store.max_bytes``: the file's size kept under it by `shrink_step`, in the background (0: no limit)."""
        self.shrunk: dict[str, int] = {}
        """Rows removed to keep the store under ``max_bytes`` since start-up, by table, and the steps taken."""
        self.bytes = 0
        """The database's size on disk (the file and its write-ahead log) when last measured (`size`)."""
        self.location = str(path)
        self._timeout = busy_timeout_ms / 1000
        self.stall = Stall(min(busy_timeout_ms, deadline_ms) if deadline_ms is not None else busy_timeout_ms, self.location)
        """The deadline of the writes that hold up requests (under the session registry's lock): ``store.deadline_ms``."""
        try:
            private_file(path)  # originals of replaced text live here
            self._conn = self._connect()
        except (OSError, sqlite3.Error) as exc:
            raise StoreError(f"{path}: cannot open the database ({exc})") from None
        try:
            migrate(self._conn, path)
        except sqlite3.DatabaseError as exc:
            self._conn.close()
            raise StoreError(f"{path}: cannot use the database ({exc})") from None
        except BaseException:
            self._conn.close()
            raise
        self._checkpoint_conn: sqlite3.Connection | None = None
        self._checkpoint_lock = threading.Lock()
        self._truncated_at = float("-inf")
        self.truncated = 0
        """Checkpoints that emptied the log file since start-up."""
        self._owned = _owned_tables(self._conn)
        self._locks = FileSessionLocks(path.with_name(path.name + "-locks"))

    def _connect(self) -> sqlite3.Connection:
        conn = sqlite3.connect(self.path, timeout=self._timeout, isolation_level=None, check_same_thread=False)
        conn.execute("PRAGMA auto_vacuum = INCREMENTAL")  # before WAL writes the header: a new file gets it (no effect later)
        conn.execute("PRAGMA journal_mode = WAL")
        conn.execute("PRAGMA synchronous = NORMAL")  # durable against a crash of the process (not of the machine)
        conn.execute("PRAGMA wal_autocheckpoint = 0")  # checkpoints run off the event loop (checkpoint())
        conn.execute("PRAGMA temp_store = MEMORY")
        return conn

    @contextmanager
    def _transaction(self) -> Iterator[sqlite3.Connection]:
        with immediate(self._conn) as conn:
            yield conn

    @contextmanager
    def _bounded(self) -> Iterator[sqlite3.Connection]:
        """A write that requests wait for: its wait for the database bounded by the deadline, refused while stalled."""
        with self.stall.call() as wait_ms:
            self._conn.execute(f"PRAGMA busy_timeout = {wait_ms}")
            try:
                with self._transaction() as conn:
                    yield conn
            finally:
                self._conn.execute(f"PRAGMA busy_timeout = {int(self._timeout * 1000)}")

    def write(self, changes: Changes) -> None:
        with self._bounded() as c:
            _many(c, _UPSERT_SESSION, [_row(r) for r in changes.sessions])
            for chain in changes.chains:
                key = (chain.agent_id, chain.session_id)
                if chain.replaces:
                    c.execute("DELETE FROM chain WHERE agent_id = ? AND session_id = ? AND pos >= ?", (*key, chain.start))
                _many(c, "INSERT INTO chain VALUES (?, ?, ?, ?)", [(*key, chain.start + i, link_key(link)) for i, link in enumerate(chain.links)])
            _many(c, "INSERT OR REPLACE INTO links VALUES (?, ?, ?)", [(a, link_key(link), s) for a, link, s in changes.links])
            _many(c, "DELETE FROM tips WHERE agent_id = ? AND link = ?", [(a, link_key(link)) for a, link, s in changes.tips if s is None])
            _many(c, "INSERT OR REPLACE INTO tips VALUES (?, ?, ?)", [(a, link_key(link), s) for a, link, s in changes.tips if s is not None])
            _many(
                c,
                "INSERT INTO decisions VALUES (?, ?, ?, ?) ON CONFLICT (agent_id, session_id, link) DO UPDATE SET body = excluded.body",
                [(a, s, link, _json(body)) for a, s, link, body in changes.decisions],
            )
            _many(c, "INSERT OR REPLACE INTO refs VALUES (?, ?, ?, ?)", [(a, s, r, _text(o)) for a, s, r, o in changes.refs if len(o) <= REF_PIECE])
            for a, s, r, o in changes.refs:
                if len(o) > REF_PIECE:
                    _put_large_ref(c, a, s, r, o)
            _many(
                c,
                f"INSERT OR IGNORE INTO refs SELECT agent_id, ?, ref_id, original FROM refs WHERE agent_id = ? AND session_id = ? AND ref_id {_IN_LIST}",
                [(child, a, parent, json.dumps(ids)) for a, parent, child, ids in changes.ref_copies],
            )

    def write_background(self, items: Sequence[Background], lock: AbstractContextManager[object] | None = None) -> None:
        now = time.time()
        reports = [i for i in items if isinstance(i, Report)]
        # rows made (redacted, as JSON) before the connection's ``lock`` is taken: requests wait for it meanwhile
        report_rows = [(r.agent_id, r.session_id, r.key, now, pack(redact_value(r.body))) for r in reports]
        kept = {(r.agent_id, r.session_id, r.keep) for r in reports}
        usage_rows = [(u.upstream_prompt_tokens, u.cached_tokens, u.calibration, u.agent_id, u.session_id) for u in items if isinstance(u, Usage)]
        audit_rows = [(a.agent_id, a.session_id, a.request_id, now, pack(redact_value(a.body))) for a in items if isinstance(a, Audit)]
        ratio_rows = [(m.model, m.ratio, now) for m in items if isinstance(m, ModelRatio)]
        with lock if lock is not None else nullcontext(), self._bounded() as c:
            _many(c, "INSERT OR IGNORE INTO reports VALUES (?, ?, ?, ?, ?)", report_rows)
            for agent_id, session_id, keep in kept:
                c.execute(
                    "DELETE FROM reports WHERE rowid IN (SELECT rowid FROM reports WHERE agent_id = ? AND session_id = ? "
                    "ORDER BY rowid DESC LIMIT -1 OFFSET ?)",
                    (agent_id, session_id, keep),
                )
            _many(
                c,
                "UPDATE sessions SET upstream_prompt_tokens = coalesce(?, upstream_prompt_tokens), cached_tokens = coalesce(?, cached_tokens), "
                "calibration = coalesce(?, calibration) WHERE agent_id = ? AND session_id = ?",
                usage_rows,
            )
            _many(c, "INSERT OR IGNORE INTO audit VALUES (?, ?, ?, ?, ?)", audit_rows)
            _many(c, "INSERT OR REPLACE INTO model_calibration VALUES (?, ?, ?)", ratio_rows)

    def _find(self, table: str, agent_id: str, links: Sequence[str]) -> dict[str, str]:
        if len(links) <= _POINT_LOOKUPS:  # the usual case (the messages since the last request): cheaper one by one
            sql = f"SELECT session_id FROM {table} WHERE agent_id = ? AND link = ?"
            found = ((link, self._conn.execute(sql, (agent_id, link_key(link))).fetchone()) for link in links)
            return {link: row[0] for link, row in found if row is not None}
        out: dict[str, str] = {}
        for start in range(0, len(links), _IN_BATCH):  # blobs: no JSON list; as parameters, a batch at a time
            batch = [link_key(link) for link in links[start : start + _IN_BATCH]]
            sql = f"SELECT link, session_id FROM {table} WHERE agent_id = ? AND link IN ({', '.join('?' * len(batch))})"
            out.update((link_of(link), session) for link, session in self._conn.execute(sql, (agent_id, *batch)))
        return out

    def find_tips(self, agent_id: str, links: Sequence[str]) -> dict[str, str]:
        return self._find("tips", agent_id, links)

    def find_links(self, agent_id: str, links: Sequence[str]) -> dict[str, str]:
        return self._find("links", agent_id, links)

    def load_session(self, agent_id: str, session_id: str) -> StoredSession | None:
        c, key = self._conn, (agent_id, session_id)
        row = c.execute(f"SELECT {', '.join(_COLUMNS)} FROM sessions WHERE agent_id = ? AND session_id = ?", key).fetchone()
        if row is None:
            return None
        links = tuple(link_of(r[0]) for r in c.execute("SELECT link FROM chain WHERE agent_id = ? AND session_id = ? ORDER BY pos", key))
        decisions = {
            link: json.loads(body) for link, body in c.execute("SELECT link, body FROM decisions WHERE agent_id = ? AND session_id = ?", key)
        }
        tip = (
            bool(links)
            and c.execute(
                "SELECT 1 FROM tips WHERE agent_id = ? AND link = ? AND session_id = ?", (agent_id, link_key(links[-1]), session_id)
            ).fetchone()
            is not None
        )
        return StoredSession(SessionRecord(*row), links, decisions, tip)

    def session_version(self, agent_id: str, session_id: str) -> int | None:
        row = self._conn.execute("SELECT version FROM sessions WHERE agent_id = ? AND session_id = ?", (agent_id, session_id)).fetchone()
        return None if row is None else int(row[0])

    def session_lock(self, agent_id: str, session_id: str) -> SlotLock:
        """Honoured by every process on this file (and every thread of this one): a record lock on a byte of
        ``ruyi.db-locks`` (memory/store/locks.py)."""
        return self._locks.lock(agent_id, session_id)

    def reports(self, agent_id: str, session_id: str, limit: int) -> list[dict[str, Any]]:
        rows = self._conn.execute(
            "SELECT body FROM reports WHERE agent_id = ? AND session_id = ? ORDER BY rowid DESC LIMIT ?", (agent_id, session_id, limit)
        )
        return [unpack(b) for (b,) in rows][::-1]

    def session_ids(self, agent_id: str) -> list[str]:
        rows = self._conn.execute("SELECT session_id FROM sessions WHERE agent_id = ? ORDER BY last_seen DESC", (agent_id,))
        return [r[0] for r in rows]

    def agents(self) -> list[tuple[str, int, float]]:
        rows = self._conn.execute("SELECT agent_id, COUNT(*), MAX(last_seen) FROM sessions GROUP BY agent_id ORDER BY MAX(last_seen) DESC")
        return [(r[0], int(r[1]), float(r[2])) for r in rows]

    def find_ref(self, agent_id: str, ref_id: str) -> str | None:
        row = self._conn.execute("SELECT original FROM refs WHERE agent_id = ? AND ref_id = ? LIMIT 1", (agent_id, ref_id)).fetchone()
        return bytes(row[0]).decode("utf-8", "surrogatepass") if row else None

    def audit(self, agent_id: str, session_id: str) -> list[dict[str, Any]]:
        rows = self._conn.execute("SELECT body FROM audit WHERE agent_id = ? AND session_id = ? ORDER BY rowid", (agent_id, session_id))
        return [unpack(b) for (b,) in rows]

    def ratios(self) -> list[tuple[str, float]]:
        return [(m, float(r)) for m, r in self._conn.execute("SELECT model, ratio FROM model_calibration ORDER BY updated_at, rowid")]

    def expire(self, before: float, limit: int) -> list[tuple[str, str]]:
        gone = self._conn.execute("SELECT agent_id, session_id FROM sessions WHERE last_seen < ? LIMIT ?", (before, limit)).fetchall()
        if not gone:
            return []
        self._conn.execute("PRAGMA secure_delete = ON")  # expired content is overwritten, not left in free pages
        try:
            self._expire(gone)
        finally:
            self._conn.execute("PRAGMA secure_delete = OFF")
        return [(a, s) for a, s in gone]

    def _expire(self, gone: list[tuple[str, str]]) -> None:
        with self._transaction() as c:
            c.executemany(  # a session's only tip is its last link: no index by session needed
                "DELETE FROM tips WHERE agent_id = ? AND session_id = ? AND link = "
                "(SELECT link FROM chain WHERE agent_id = tips.agent_id AND session_id = tips.session_id ORDER BY pos DESC LIMIT 1)",
                gone,
            )
            c.executemany("DELETE FROM chain WHERE agent_id = ? AND session_id = ?", gone)
            for table in _PER_SESSION:
                if table == "recall_fts":  # by the sessions' rowid ranges (a scan of the whole index otherwise)
                    delete_sessions(c, gone)
                else:
                    c.executemany(f"DELETE FROM {table} WHERE agent_id = ? AND session_id = ?", gone)

    def forget(self, agent_id: str, session_id: str | None = None) -> dict[str, int]:
        removed: dict[str, int] = {}
        self._conn.execute("PRAGMA secure_delete = ON")  # what is deleted is overwritten with zeros, not left in free space
        try:
            with self._transaction() as c:
                for table, per_session in sorted(self._owned, key=lambda t: t[0] != "recall_rows"):  # its ranges first
                    if table == "recall_rows":  # the full-text index's rows, counted as its (the index is told what it indexed)
                        removed["recall_fts"] = (
                            unindex(c, "agent_id = ? OR substr(agent_id, 1, ?) = ?", (agent_id, len(agent_id) + 1, agent_id + "/"))
                            if session_id is None
                            else delete_sessions(c, [(agent_id, session_id)])
                        )
                    elif session_id is None:  # the agent and its sub-agents (agent/…)
                        removed[table] = c.execute(
                            f"DELETE FROM {table} WHERE agent_id = ? OR substr(agent_id, 1, ?) = ?", (agent_id, len(agent_id) + 1, agent_id + "/")
                        ).rowcount
                    elif per_session:
                        removed[table] = c.execute(f"DELETE FROM {table} WHERE agent_id = ? AND session_id = ?", (agent_id, session_id)).rowcount
        finally:
            self._conn.execute("PRAGMA secure_delete = OFF")
        with self._checkpoint_lock:  # fold the log in and empty it: the pages it held before are gone too
            self._conn.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchall()
        return removed

    def compact(self, pages: int | None = None) -> int:
        """Give up to ``pages`` free pages back to the file system (all by default); returns those left."""
        # executescript steps the pragma to its end: execute() stops after one step (one page) as it returns no column
        self._conn.executescript("PRAGMA incremental_vacuum" + (f"({int(pages)})" if pages else ""))
        return int(self._conn.execute("PRAGMA freelist_count").fetchone()[0])

    def checkpoint(self) -> None:
        if self._wal_bytes() < CHECKPOINT_BYTES:
            return
        with self._checkpoint_lock:
            if self._checkpoint_conn is None:
                self._checkpoint_conn = sqlite3.connect(self.path, timeout=self._timeout, isolation_level=None, check_same_thread=False)
            conn, now = self._checkpoint_conn, time.monotonic()
            since = now - self._truncated_at  # a big log is tried sooner, but never more than every few seconds
            if since >= TRUNCATE_EVERY_S or (since >= TRUNCATE_RETRY_S and self._wal_bytes() >= TRUNCATE_BYTES):
                self._truncated_at = now
                conn.execute(f"PRAGMA busy_timeout = {TRUNCATE_WAIT_MS}")  # a reader or writer in the way: give up soon
                try:
                    busy = conn.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchone()[0]
                finally:
                    conn.execute(f"PRAGMA busy_timeout = {int(self._timeout * 1000)}")
                if not busy:
                    self.truncated += 1
                    return
            conn.execute("PRAGMA wal_checkpoint(PASSIVE)").fetchall()

    def _wal_bytes(self) -> int:
        try:
            return self.path.with_name(self.path.name + "-wal").stat().st_size
        except OSError:
            return 0

    def close(self) -> None:
        with self._checkpoint_lock:
            if self._checkpoint_conn is not None:
                self._checkpoint_conn.close()
                self._checkpoint_conn = None
        try:
            self._conn.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchall()
        except sqlite3.Error as exc:  # another process holds it: the next start folds the log in
            log.info("store_checkpoint_skipped", path=self.location, reason=str(exc))
        self._conn.close()
        self._locks.close()
