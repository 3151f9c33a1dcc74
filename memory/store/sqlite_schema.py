"""The SQLite store's versioned schema (migrations run in order at start-up; a newer database is refused) and how rows are packed."""

from __future__ import annotations

import json
import re
import sqlite3
import zlib
from pathlib import Path
from typing import Any

import structlog

from memory.store.base import StoreError

log = structlog.get_logger(__name__)

_AUDIT = (
    '{"request_id":"","model":"gpt-4o","mode":"on","session_how":"continued","est_before":1218,"est_after":1218,'
    '"tier":"expanded","batch":"none","window":128000,"usable":108800,"status":200,"compaction":false,'
    '"overflow_retry":false,"upstream_prompt_tokens":1215,"cached_tokens":0,"latency_llm_ms":1.57,"latency_ruyi_ms":5.03,'
    '"s2_written_count":0,"rag_chunks":0,"retrieval_path":[],"latency_retrieval_ms":null,"drop_reason":null,'
    '"archive":null,"prepare_until":null}'
)
_REPORT = (
    '{"request":16,"request_id":"","mode":"on","applied":true,"overflow_retry":false,"tokens_before":1218,'
    '"tokens_after":1218,"usage_before":0.0112,"usage_after":0.0112,"tier_before":"expanded","tier_after":"expanded",'
    '"batch":"none","strategies":{},"in_force":{"items":0,"tokens_saved":0},"protected_turns":4,"failed_strategies":{}}'
)
_TURN = (
    '{"role":"tool","tool_call_id":"call_","content":[{"type":"tool_result","tool_use_id":"toolu_","text":""}]}'
    '{"role":"assistant","content":null,"tool_calls":[{"id":"call_","type":"function","function":{"name":"","arguments":"{\\"'
    '"}}]}{"role":"user","content":"'
)
DICTIONARIES: dict[int, bytes] = {1: (_TURN + _REPORT + _AUDIT).encode()}
"""Byte → preset dictionary (the most repeated text last: deflate finds it nearest). Never edit a released one."""
CURRENT = 1
_MEM_LEVEL = 5
"""zlib's default (8) makes a compressor of about 256 KiB, and priming it with the dictionary then costs more than the
record: at 5, about 10 µs a record, no larger."""


def pack(value: Any) -> bytes:
    """A JSON-like value as a packed body (``CURRENT``'s dictionary): a BLOB whose first byte names the dictionary, the
    rest raw deflate of the value's compact JSON (UTF-8, lone surrogates kept by ``surrogatepass``). Audit records,
    reports, raw turns and the index's texts are stored so: the keys and usual values every record repeats are in the
    dictionary, not in each row (RELIABILITY.md, "Disk per request")."""
    raw = json.dumps(value, ensure_ascii=False, separators=(",", ":")).encode("utf-8", "surrogatepass")
    z = zlib.compressobj(6, zlib.DEFLATED, -15, _MEM_LEVEL, zlib.Z_DEFAULT_STRATEGY, DICTIONARIES[CURRENT])
    return bytes((CURRENT,)) + z.compress(raw) + z.flush()


def unpack(stored: str | bytes) -> Any:
    """A body as stored: packed (BLOB), or plain JSON (TEXT, written before packing)."""
    if isinstance(stored, str):
        return json.loads(stored)
    data = bytes(stored)
    dictionary = DICTIONARIES.get(data[0]) if data else None
    if dictionary is None:  # not a packed body: plain JSON stored as bytes
        return json.loads(data.decode("utf-8", "surrogatepass"))
    z = zlib.decompressobj(-15, dictionary)
    return json.loads((z.decompress(data[1:]) + z.flush()).decode("utf-8", "surrogatepass"))


_HEX_DIGEST = re.compile(r"[0-9a-f]{32}")


def link_key(digest: str) -> str | bytes:
    """A digest as the store keeps it (a chain's links, a raw turn's hash): its 32 lower-case hex characters as its 16
    bytes; any other string (none that Ruyi makes) as it is."""
    return bytes.fromhex(digest) if len(digest) == 32 and _HEX_DIGEST.fullmatch(digest) else digest


def link_of(stored: str | bytes) -> str:
    """A digest as kept (``link_key``), as the string it was."""
    return stored if isinstance(stored, str) else bytes(stored).hex()


RECALL_SCHEMA = """
CREATE TABLE turns (
    agent_id TEXT NOT NULL, session_id TEXT NOT NULL, turn INTEGER NOT NULL, hash TEXT NOT NULL, role TEXT,
    created_at REAL NOT NULL, body TEXT NOT NULL, UNIQUE (agent_id, session_id, turn, hash)
);
CREATE INDEX turns_by_time ON turns (created_at);
CREATE TABLE chunks (
    agent_id TEXT NOT NULL, session_id TEXT NOT NULL, chunk_id TEXT NOT NULL, first INTEGER NOT NULL, last INTEGER NOT NULL,
    created_at REAL NOT NULL, source TEXT NOT NULL, tags TEXT NOT NULL, anchors TEXT NOT NULL, line TEXT NOT NULL,
    summary TEXT NOT NULL, UNIQUE (agent_id, session_id, chunk_id)
);
CREATE TABLE archives (
    agent_id TEXT NOT NULL, session_id TEXT NOT NULL, archive_id TEXT NOT NULL, number INTEGER NOT NULL,
    created_at REAL NOT NULL, body TEXT NOT NULL, UNIQUE (agent_id, session_id, archive_id)
);
CREATE VIRTUAL TABLE recall_fts USING fts5(
    text, agent_id UNINDEXED, session_id UNINDEXED, kind UNINDEXED, ref UNINDEXED, tokenize = 'unicode61 remove_diacritics 2'
)
"""
"""The tables (migration 2 of the store; run as is for a store kept in memory). No ';' inside a statement."""
RECALL_BLOCKS = """
CREATE TABLE recall_agents (
    agent_id TEXT NOT NULL, block INTEGER NOT NULL, sessions INTEGER NOT NULL, PRIMARY KEY (agent_id, block)
) WITHOUT ROWID;
CREATE UNIQUE INDEX recall_agents_by_block ON recall_agents (block);
CREATE TABLE recall_sessions (
    agent_id TEXT NOT NULL, session_id TEXT NOT NULL, base INTEGER NOT NULL, next INTEGER NOT NULL,
    PRIMARY KEY (agent_id, session_id, base)
) WITHOUT ROWID;
CREATE TABLE recall_seq (n INTEGER NOT NULL);
CREATE TEMP TABLE recall_moved (
    old INTEGER PRIMARY KEY, agent_id TEXT NOT NULL, session_id TEXT NOT NULL, row INTEGER NOT NULL, block INTEGER NOT NULL,
    slot INTEGER NOT NULL, base INTEGER NOT NULL
);
INSERT INTO recall_moved
    WITH numbered AS (
        SELECT rowid AS old, agent_id, session_id, row_number() OVER (PARTITION BY agent_id, session_id ORDER BY rowid) - 1 AS n
        FROM recall_fts
    ), placed AS (
        SELECT old, agent_id, session_id, n % 2097152 AS row,
               dense_rank() OVER (ORDER BY agent_id) AS block,
               dense_rank() OVER (PARTITION BY agent_id ORDER BY session_id, n / 2097152) - 1 AS slot
        FROM numbered
    )
    SELECT old, agent_id, session_id, row, block, slot, (block << 42) | (slot << 21) AS base FROM placed;
CREATE VIRTUAL TABLE recall_fts_blocks USING fts5(
    text, agent_id UNINDEXED, session_id UNINDEXED, kind UNINDEXED, ref UNINDEXED, seq UNINDEXED,
    tokenize = 'unicode61 remove_diacritics 2'
);
INSERT INTO recall_fts_blocks (rowid, text, agent_id, session_id, kind, ref, seq)
    SELECT m.base | m.row, f.text, f.agent_id, f.session_id, f.kind, f.ref, f.rowid
    FROM recall_fts f JOIN recall_moved m ON m.old = f.rowid ORDER BY f.rowid;
INSERT INTO recall_agents SELECT agent_id, block, max(slot) + 1 FROM recall_moved GROUP BY agent_id, block;
INSERT INTO recall_sessions SELECT agent_id, session_id, base, max(row) + 1 FROM recall_moved GROUP BY agent_id, session_id, base;
INSERT INTO recall_seq SELECT coalesce(max(rowid), 0) FROM recall_fts;
DROP TABLE recall_moved;
DROP TABLE recall_fts;
ALTER TABLE recall_fts_blocks RENAME TO recall_fts
"""
"""Migration 7: the index's rows are numbered by agent and session (sqlite_recall's ``SLOT_BITS``), existing rows carried over, so a
search is a MATCH within its session's (its agent's) rowid range: FTS5 seeks its term lists to that range, and reads
and ranks only those rows, while the ranking (bm25 over the whole index) stays what it was. ``seq`` keeps the order rows
were written in (ties are broken by it, as they were by the rowid). Limit: an existing store with over 2**21 sessions
for one agent would not migrate (none comes near)."""
RECALL_ROWS = """
CREATE TABLE recall_rows (
    id INTEGER PRIMARY KEY, agent_id TEXT NOT NULL, session_id TEXT NOT NULL, kind TEXT NOT NULL, ref TEXT NOT NULL,
    seq INTEGER NOT NULL, text NOT NULL
);
INSERT INTO recall_rows SELECT rowid, agent_id, session_id, kind, ref, seq, text FROM recall_fts ORDER BY rowid;
CREATE VIRTUAL TABLE recall_index USING fts5(text, content = '', tokenize = 'unicode61 remove_diacritics 2');
INSERT INTO recall_index (rowid, text) SELECT id, text FROM recall_rows ORDER BY id;
DROP TABLE recall_fts;
ALTER TABLE recall_index RENAME TO recall_fts
"""
"""Migration 8: the full-text index keeps no copy of its own (FTS5 contentless): what it indexed and each row's agent,
session, kind, ref and ``seq`` are in ``recall_rows`` under the same rowid, the text packed (``pack``; rows
carried over stay plain text). The rowid ranges, the terms indexed and the ranking (bm25) are what they were. A
contentless FTS5 row is removed by handing the index the text it indexed (SQLite 3.40 has no ``contentless_delete``):
``unindex`` reads it back from ``recall_rows``, exactly as it was given."""
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


SCHEMA, BLOCKS, ROWS = RECALL_SCHEMA, RECALL_BLOCKS, RECALL_ROWS
"""Recall's migrations (2, 7, 8), run as they are for a recall kept in memory (memory/store/sqlite_recall.py)."""
