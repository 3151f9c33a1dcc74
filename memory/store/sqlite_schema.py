"""The SQLite store's versioned schema: migrations run in order at start-up; a newer database is refused."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import structlog

from memory.store.base import StoreError
from memory.store.packed import link_key
from memory.store.sqlite_recall import BLOCKS as RECALL_BLOCKS
from memory.store.sqlite_recall import ROWS as RECALL_ROWS
from memory.store.sqlite_recall import SCHEMA as RECALL_SCHEMA

log = structlog.get_logger(__name__)

MIGRATIONS: tuple[str, ...] = (
    # 1: sessions, their chain index, decisions, refs, reports, audit, calibration
    """
    CREATE TABLE sessions (
        agent_id TEXT NOT NULL, session_id TEXT NOT NULL, parent_id TEXT,
        created_at REAL NOT NULL, last_seen REAL NOT NULL, requests INTEGER NOT NULL,
        prompt_tokens INTEGER, upstream_prompt_tokens INTEGER, cached_tokens INTEGER, tier TEXT,
        window INTEGER, num_ctx INTEGER, calibration REAL, batch_retry_at INTEGER,
        PRIMARY KEY (agent_id, session_id)
    ) WITHOUT ROWID;
    CREATE INDEX sessions_by_last_seen ON sessions (last_seen);
    CREATE TABLE chain (
        agent_id TEXT NOT NULL, session_id TEXT NOT NULL, pos INTEGER NOT NULL, link TEXT NOT NULL,
        PRIMARY KEY (agent_id, session_id, pos)
    ) WITHOUT ROWID;
    CREATE TABLE links (
        agent_id TEXT NOT NULL, link TEXT NOT NULL, session_id TEXT NOT NULL,
        PRIMARY KEY (agent_id, link)
    ) WITHOUT ROWID;
    CREATE INDEX links_by_session ON links (agent_id, session_id);
    CREATE TABLE tips (
        agent_id TEXT NOT NULL, link TEXT NOT NULL, session_id TEXT NOT NULL,
        PRIMARY KEY (agent_id, link)
    ) WITHOUT ROWID;
    CREATE TABLE decisions (
        agent_id TEXT NOT NULL, session_id TEXT NOT NULL, link TEXT NOT NULL, body TEXT NOT NULL,
        UNIQUE (agent_id, session_id, link)
    );
    CREATE TABLE refs (
        agent_id TEXT NOT NULL, session_id TEXT NOT NULL, ref_id TEXT NOT NULL, original BLOB NOT NULL,
        UNIQUE (agent_id, session_id, ref_id)
    );
    CREATE INDEX refs_by_id ON refs (agent_id, ref_id);
    CREATE TABLE reports (
        agent_id TEXT NOT NULL, session_id TEXT NOT NULL, key TEXT NOT NULL, created_at REAL NOT NULL,
        body TEXT NOT NULL, UNIQUE (agent_id, session_id, key)
    );
    CREATE TABLE audit (
        agent_id TEXT NOT NULL, session_id TEXT NOT NULL, request_id TEXT NOT NULL, created_at REAL NOT NULL,
        body TEXT NOT NULL, UNIQUE (agent_id, session_id, request_id)
    );
    CREATE TABLE model_calibration (model TEXT PRIMARY KEY, ratio REAL NOT NULL, updated_at REAL NOT NULL);
    """,
    # 2: raw turns (S0), S2 chunks, archives, and their full-text index (memory/store/sqlite_recall.py)
    RECALL_SCHEMA,
    # 3: what the agent keeps: anchors and the lines they were captured from, the notebook's versions and its
    # compaction state, proposals a person rejected, what each session showed (the forms' facts), sub-agent snapshots and
    # results (memory/anchors, memory/notebook, memory/forms)
    """
    CREATE TABLE anchors (
        agent_id TEXT NOT NULL, anchor_id TEXT NOT NULL, kind TEXT NOT NULL, number INTEGER NOT NULL, status TEXT NOT NULL,
        title TEXT NOT NULL, fields TEXT NOT NULL, source TEXT NOT NULL, origin_session TEXT,
        created_at REAL NOT NULL, updated_at REAL NOT NULL, PRIMARY KEY (agent_id, anchor_id)
    ) WITHOUT ROWID;
    CREATE TABLE anchor_lines (
        agent_id TEXT NOT NULL, line_hash TEXT NOT NULL, anchor_id TEXT, created_at REAL NOT NULL,
        PRIMARY KEY (agent_id, line_hash)
    ) WITHOUT ROWID;
    CREATE TABLE notebook_versions (
        agent_id TEXT NOT NULL, version INTEGER NOT NULL, created_at REAL NOT NULL, reason TEXT NOT NULL, body TEXT NOT NULL,
        PRIMARY KEY (agent_id, version)
    ) WITHOUT ROWID;
    CREATE TABLE notebook_state (
        agent_id TEXT NOT NULL PRIMARY KEY, pending INTEGER NOT NULL, attempts INTEGER NOT NULL, retry_at REAL NOT NULL
    ) WITHOUT ROWID;
    CREATE TABLE rejected (
        agent_id TEXT NOT NULL, kind TEXT NOT NULL, hash TEXT NOT NULL, created_at REAL NOT NULL,
        PRIMARY KEY (agent_id, kind, hash)
    ) WITHOUT ROWID;
    CREATE TABLE snapshots (
        agent_id TEXT NOT NULL, session_id TEXT NOT NULL, parent_id TEXT NOT NULL, body TEXT NOT NULL, created_at REAL NOT NULL,
        PRIMARY KEY (agent_id, session_id)
    ) WITHOUT ROWID;
    CREATE TABLE session_facts (
        agent_id TEXT NOT NULL, session_id TEXT NOT NULL, body TEXT NOT NULL, updated_at REAL NOT NULL,
        PRIMARY KEY (agent_id, session_id)
    ) WITHOUT ROWID;
    CREATE TABLE child_results (
        agent_id TEXT NOT NULL, session_id TEXT NOT NULL, child_id TEXT NOT NULL, importance TEXT NOT NULL, text TEXT NOT NULL,
        created_at REAL NOT NULL, PRIMARY KEY (agent_id, session_id, child_id)
    ) WITHOUT ROWID;
    """,
    # 4: sub-agent task calls waiting for their child (a restart between the call and the child's first request still
    # recognises it), a sub-agent's own notebook (its writes never reach its agent's), forms refined by the summarizer
    """
    CREATE TABLE task_calls (
        agent_id TEXT NOT NULL, prompt_hash TEXT NOT NULL, session_id TEXT NOT NULL, created_at REAL NOT NULL,
        PRIMARY KEY (agent_id, prompt_hash)
    ) WITHOUT ROWID;
    CREATE INDEX task_calls_by_age ON task_calls (created_at);
    CREATE TABLE child_notebook_versions (
        agent_id TEXT NOT NULL, session_id TEXT NOT NULL, version INTEGER NOT NULL, created_at REAL NOT NULL, reason TEXT NOT NULL,
        body TEXT NOT NULL, PRIMARY KEY (agent_id, session_id, version)
    ) WITHOUT ROWID;
    CREATE TABLE refined_forms (
        agent_id TEXT NOT NULL, session_id TEXT NOT NULL, form TEXT NOT NULL, basis TEXT NOT NULL, text TEXT NOT NULL,
        created_at REAL NOT NULL, PRIMARY KEY (agent_id, session_id, form)
    ) WITHOUT ROWID;
    """,
    # 5: draft knowledge cards an archive proposed (memory/cards/sqlite_drafts.py); rejected ones also go in `rejected`
    """
    CREATE TABLE card_drafts (
        agent_id TEXT NOT NULL, draft_id INTEGER NOT NULL, key TEXT NOT NULL, title TEXT NOT NULL, tags TEXT NOT NULL,
        body TEXT NOT NULL, status TEXT NOT NULL, session_id TEXT, path TEXT, created_at REAL NOT NULL, updated_at REAL NOT NULL,
        PRIMARY KEY (agent_id, draft_id)
    ) WITHOUT ROWID;
    CREATE UNIQUE INDEX card_drafts_by_key ON card_drafts (agent_id, key);
    """,
    # 6: a version per session, bumped by every write of its row (replicas: a stale copy in memory is detected)
    """
    ALTER TABLE sessions ADD COLUMN version INTEGER NOT NULL DEFAULT 0;
    """,
    # 7: the full-text index's rows numbered by agent and session (a rowid range each), existing rows carried over: a
    # search reads its session's (its agent's) rows only (memory/store/sqlite_recall.py)
    RECALL_BLOCKS,
    # 8: the full-text index without a copy of its own (FTS5 contentless): its rows' text (packed) and columns in
    # recall_rows, existing rows carried over (memory/store/sqlite_recall.py)
    RECALL_ROWS,
    # 9: a link (a message's digest, 32 hex characters) kept as its 16 bytes in chain, links and tips (link_key)
    """
    UPDATE chain SET link = ruyi_link_key(link) WHERE typeof(link) = 'text';
    UPDATE links SET link = ruyi_link_key(link) WHERE typeof(link) = 'text';
    UPDATE tips SET link = ruyi_link_key(link) WHERE typeof(link) = 'text';
    """,
    # 10: a raw turn's content hash (32 hex characters) kept as its 16 bytes, as links are (9)
    """
    UPDATE turns SET hash = ruyi_link_key(hash) WHERE typeof(hash) = 'text';
    """,
    # 11: raw turns expire in rowid order (the order they were written in): their index by time goes
    """
    DROP INDEX turns_by_time;
    """,
)
"""Migration N (1-based) takes a database from version N-1 to N. Append; never edit a released one."""

LATEST = len(MIGRATIONS)


def version_of(conn: sqlite3.Connection) -> int:
    return int(conn.execute("PRAGMA user_version").fetchone()[0])


def migrate(conn: sqlite3.Connection, path: Path) -> int:
    """Bring the database to LATEST, each migration in its own transaction. Returns the version found."""
    found = version_of(conn)
    if found > LATEST:
        raise StoreError(
            f"{path}: the database is at schema version {found}, newer than this Ruyi understands ({LATEST}); "
            "run the Ruyi that wrote it, or point store.data_dir (RUYI_DATA_DIR) elsewhere"
        )
    conn.create_function("ruyi_link_key", 1, link_key, deterministic=True)  # migrations 9 and 10
    if found == 0:
        conn.execute("PRAGMA auto_vacuum = INCREMENTAL")  # only takes effect before the first table
    for version in range(found + 1, LATEST + 1):
        conn.execute("BEGIN IMMEDIATE")
        try:
            if version_of(conn) >= version:  # another process migrated meanwhile
                conn.execute("ROLLBACK")
                continue
            for statement in MIGRATIONS[version - 1].split(";"):
                if statement.strip():
                    conn.execute(statement)
            conn.execute(f"PRAGMA user_version = {version}")
            conn.execute("COMMIT")
        except BaseException:
            conn.execute("ROLLBACK")
            raise
        log.info("store_migrated", path=str(path), version=version)
    return found
