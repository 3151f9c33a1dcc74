"""The PostgreSQL store's versioned schema: the same migrations as SQLite's, in order, under an advisory lock; a newer database is refused."""

from __future__ import annotations

import re

import psycopg
import structlog

from memory.store.base import StoreError
from memory.store.sqlite_schema import MIGRATIONS as SQLITE_MIGRATIONS
from memory.store.sqlite_schema import RECALL_BLOCKS as SQLITE_RECALL_BLOCKS
from memory.store.sqlite_schema import RECALL_ROWS as SQLITE_RECALL_ROWS

log = structlog.get_logger(__name__)

MIGRATION_LOCK = (0x52555949, 1)
"""pg_advisory_lock(class, key) held while migrating (two replicas starting at once migrate one after the other)."""
KEEPER_LOCK = (0x52555949, 2)
"""Held by each change of the keeper's tables (anchors, notebook, forms): they are serialized as SQLite's writes are."""

MIGRATIONS: tuple[str, ...] = (
    # 1: sessions, their chain index, decisions, refs, reports, audit, calibration
    """
    CREATE TABLE sessions (
        agent_id TEXT NOT NULL, session_id TEXT NOT NULL, parent_id TEXT,
        created_at DOUBLE PRECISION NOT NULL, last_seen DOUBLE PRECISION NOT NULL, requests BIGINT NOT NULL,
        prompt_tokens BIGINT, upstream_prompt_tokens BIGINT, cached_tokens BIGINT, tier TEXT,
        "window" BIGINT, num_ctx BIGINT, calibration DOUBLE PRECISION, batch_retry_at BIGINT,
        PRIMARY KEY (agent_id, session_id)
    );
    CREATE INDEX sessions_by_last_seen ON sessions (last_seen);
    CREATE TABLE chain (
        agent_id TEXT NOT NULL, session_id TEXT NOT NULL, pos INTEGER NOT NULL, link TEXT NOT NULL,
        PRIMARY KEY (agent_id, session_id, pos)
    );
    CREATE TABLE links (
        agent_id TEXT NOT NULL, link TEXT NOT NULL, session_id TEXT NOT NULL,
        PRIMARY KEY (agent_id, link)
    );
    CREATE INDEX links_by_session ON links (agent_id, session_id);
    CREATE TABLE tips (
        agent_id TEXT NOT NULL, link TEXT NOT NULL, session_id TEXT NOT NULL,
        PRIMARY KEY (agent_id, link)
    );
    CREATE TABLE decisions (
        agent_id TEXT NOT NULL, session_id TEXT NOT NULL, link TEXT NOT NULL, body TEXT NOT NULL,
        PRIMARY KEY (agent_id, session_id, link)
    );
    CREATE TABLE refs (
        agent_id TEXT NOT NULL, session_id TEXT NOT NULL, ref_id TEXT NOT NULL, original BYTEA NOT NULL,
        PRIMARY KEY (agent_id, session_id, ref_id)
    );
    CREATE INDEX refs_by_id ON refs (agent_id, ref_id);
    CREATE TABLE reports (
        id BIGINT GENERATED ALWAYS AS IDENTITY, agent_id TEXT NOT NULL, session_id TEXT NOT NULL, key TEXT NOT NULL,
        created_at DOUBLE PRECISION NOT NULL, body TEXT NOT NULL, UNIQUE (agent_id, session_id, key)
    );
    CREATE INDEX reports_by_session ON reports (agent_id, session_id, id);
    CREATE TABLE audit (
        id BIGINT GENERATED ALWAYS AS IDENTITY, agent_id TEXT NOT NULL, session_id TEXT NOT NULL, request_id TEXT NOT NULL,
        created_at DOUBLE PRECISION NOT NULL, body TEXT NOT NULL, UNIQUE (agent_id, session_id, request_id)
    );
    CREATE TABLE model_calibration (model TEXT PRIMARY KEY, ratio DOUBLE PRECISION NOT NULL, updated_at DOUBLE PRECISION NOT NULL)
    """,
    # 2: raw turns (S0), S2 chunks, archives, and their full-text index (memory/store/pg_recall.py): the searched text's
    # terms (words, CJK bigrams) as a tsvector made by Ruyi, not by a text-search configuration (none splits Chinese)
    """
    CREATE TABLE turns (
        id BIGINT GENERATED ALWAYS AS IDENTITY, agent_id TEXT NOT NULL, session_id TEXT NOT NULL, turn BIGINT NOT NULL,
        hash TEXT NOT NULL, role TEXT, created_at DOUBLE PRECISION NOT NULL, body TEXT NOT NULL, UNIQUE (agent_id, session_id, turn, hash)
    );
    CREATE INDEX turns_by_time ON turns (created_at);
    CREATE TABLE chunks (
        id BIGINT GENERATED ALWAYS AS IDENTITY, agent_id TEXT NOT NULL, session_id TEXT NOT NULL, chunk_id TEXT NOT NULL,
        first BIGINT NOT NULL, last BIGINT NOT NULL, created_at DOUBLE PRECISION NOT NULL, source TEXT NOT NULL, tags TEXT NOT NULL,
        anchors TEXT NOT NULL, line TEXT NOT NULL, summary TEXT NOT NULL, UNIQUE (agent_id, session_id, chunk_id)
    );
    CREATE INDEX chunks_by_id ON chunks (agent_id, chunk_id);
    CREATE TABLE archives (
        id BIGINT GENERATED ALWAYS AS IDENTITY, agent_id TEXT NOT NULL, session_id TEXT NOT NULL, archive_id TEXT NOT NULL,
        number BIGINT NOT NULL, created_at DOUBLE PRECISION NOT NULL, body TEXT NOT NULL, UNIQUE (agent_id, session_id, archive_id)
    );
    CREATE TABLE recall_fts (
        agent_id TEXT NOT NULL, session_id TEXT NOT NULL, kind TEXT NOT NULL, ref TEXT NOT NULL, text TEXT NOT NULL,
        terms TSVECTOR NOT NULL, size INTEGER NOT NULL, PRIMARY KEY (agent_id, session_id, kind, ref)
    );
    CREATE INDEX recall_fts_terms ON recall_fts USING GIN (terms)
    """,
    # 3: what the agent keeps: anchors and the lines they were captured from, the notebook's versions and its compaction
    # state, proposals a person rejected, what each session showed, sub-agent snapshots and results
    """
    CREATE TABLE anchors (
        agent_id TEXT NOT NULL, anchor_id TEXT NOT NULL, kind TEXT NOT NULL, number BIGINT NOT NULL, status TEXT NOT NULL,
        title TEXT NOT NULL, fields TEXT NOT NULL, source TEXT NOT NULL, origin_session TEXT,
        created_at DOUBLE PRECISION NOT NULL, updated_at DOUBLE PRECISION NOT NULL, PRIMARY KEY (agent_id, anchor_id)
    );
    CREATE TABLE anchor_lines (
        agent_id TEXT NOT NULL, line_hash TEXT NOT NULL, anchor_id TEXT, created_at DOUBLE PRECISION NOT NULL,
        PRIMARY KEY (agent_id, line_hash)
    );
    CREATE TABLE notebook_versions (
        agent_id TEXT NOT NULL, version BIGINT NOT NULL, created_at DOUBLE PRECISION NOT NULL, reason TEXT NOT NULL, body TEXT NOT NULL,
        PRIMARY KEY (agent_id, version)
    );
    CREATE TABLE notebook_state (
        agent_id TEXT NOT NULL PRIMARY KEY, pending INTEGER NOT NULL, attempts INTEGER NOT NULL, retry_at DOUBLE PRECISION NOT NULL
    );
    CREATE TABLE rejected (
        agent_id TEXT NOT NULL, kind TEXT NOT NULL, hash TEXT NOT NULL, created_at DOUBLE PRECISION NOT NULL,
        PRIMARY KEY (agent_id, kind, hash)
    );
    CREATE TABLE snapshots (
        agent_id TEXT NOT NULL, session_id TEXT NOT NULL, parent_id TEXT NOT NULL, body TEXT NOT NULL,
        created_at DOUBLE PRECISION NOT NULL, PRIMARY KEY (agent_id, session_id)
    );
    CREATE TABLE session_facts (
        agent_id TEXT NOT NULL, session_id TEXT NOT NULL, body TEXT NOT NULL, updated_at DOUBLE PRECISION NOT NULL,
        PRIMARY KEY (agent_id, session_id)
    );
    CREATE TABLE child_results (
        agent_id TEXT NOT NULL, session_id TEXT NOT NULL, child_id TEXT NOT NULL, importance TEXT NOT NULL, text TEXT NOT NULL,
        created_at DOUBLE PRECISION NOT NULL, PRIMARY KEY (agent_id, session_id, child_id)
    )
    """,
)
"""PostgreSQL's own text of SQLite's migrations 1 to 3 (memory/store/sqlite_schema.py): N takes a database from version
N-1 to N. Never edit one. SQLite's later migrations are translated (``translated``), in SQLite's order whatever number
they end up with; one no translation would do (a virtual table, a column whose order matters: an ``id``) goes in
``WRITTEN``."""
_FIRST = 3
"""Migrations written here by number (before the translation existed); later ones follow SQLite's."""

_RESERVED = frozenset(
    """all analyse analyze and any array as asc asymmetric both case cast check collate column constraint create
current_date current_role current_time current_timestamp current_user default deferrable desc distinct do else end except
false fetch for foreign from grant group having in initially intersect into lateral leading limit localtime localtimestamp
not null offset on only or order placing primary references returning select session_user some symmetric table then to
trailing true union unique user using variadic when where window with""".split()
)
"""PostgreSQL's reserved words: quoted where SQLite's DDL names a column so (lower-case: its keywords are upper-case)."""


def translated(sqlite_ddl: str) -> str:
    """A migration of SQLite's in PostgreSQL's words: REAL → DOUBLE PRECISION, INTEGER → BIGINT (a rowid alias → an
    identity), BLOB → BYTEA, no WITHOUT ROWID, reserved column names quoted. Refuses a virtual table (write that one)."""
    if re.search(r"\bCREATE\s+VIRTUAL\s+TABLE\b", sqlite_ddl, re.IGNORECASE):
        raise ValueError("a virtual table has no translation: write this migration in pg_schema.MIGRATIONS")
    ddl = re.sub(r"\)\s*WITHOUT\s+ROWID", ")", sqlite_ddl, flags=re.IGNORECASE)
    ddl = re.sub(r"\bINTEGER\s+PRIMARY\s+KEY\b", "BIGINT GENERATED BY DEFAULT AS IDENTITY PRIMARY KEY", ddl)
    for sqlite_type, pg_type in (("INTEGER", "BIGINT"), ("REAL", "DOUBLE PRECISION"), ("BLOB", "BYTEA")):
        ddl = re.sub(rf"\b{sqlite_type}\b", pg_type, ddl)
    return re.sub(r"\b[a-z_]+\b", lambda m: f'"{m.group(0)}"' if m.group(0) in _RESERVED else m.group(0), ddl)


WRITTEN: dict[str, str] = {
    # SQLite's recall index numbered by agent and session (7): PostgreSQL's recall_fts is keyed by (agent_id, session_id,
    # kind, ref) already, so a session's rows are found by its primary key's index: nothing to change
    SQLITE_RECALL_BLOCKS: "SELECT 1",
    # SQLite's recall index without its own copy of the text (8): PostgreSQL's recall_fts is a table of its own already
    SQLITE_RECALL_ROWS: "SELECT 1",
    # SQLite's links as 16 bytes (9): PostgreSQL keeps them as text (not changed there)
    SQLITE_MIGRATIONS[8]: "SELECT 1",
    # SQLite's raw turns' hashes as 16 bytes (10): PostgreSQL keeps them as text
    SQLITE_MIGRATIONS[9]: "SELECT 1",
    # SQLite's raw turns expire in rowid order (11): PostgreSQL keeps its index by time (its DELETE uses it)
    SQLITE_MIGRATIONS[10]: "SELECT 1",
}
"""SQLite's text of a later migration → PostgreSQL's own, where a translation would not do."""
ALL_MIGRATIONS: tuple[str, ...] = MIGRATIONS[:_FIRST] + tuple(WRITTEN.get(m) or translated(m) for m in SQLITE_MIGRATIONS[_FIRST:])
"""Every migration, in SQLite's order: the first three written here, then SQLite's, translated (or written)."""
LATEST = len(ALL_MIGRATIONS)


def version_of(conn: psycopg.Connection) -> int:
    """The schema's version (0: no Ruyi table yet)."""
    # pg_tables through the statement's own snapshot: to_regclass reads the backend's catalog cache, which an advisory
    # lock does not refresh, so a replica that waited for another's migration would not see its table
    row = conn.execute(
        "SELECT EXISTS (SELECT 1 FROM pg_catalog.pg_tables WHERE schemaname = current_schema() AND tablename = 'schema_version')"
    ).fetchone()
    if not row or not row[0]:
        return 0
    found = conn.execute("SELECT max(version) FROM schema_version").fetchone()
    return int(found[0] or 0) if found else 0


def refuse_newer(found: int, location: str) -> None:
    if found > LATEST:
        raise StoreError(
            f"{location}: the database is at schema version {found}, newer than this Ruyi understands ({LATEST}); "
            "run the Ruyi that wrote it, or point store.url (RUYI_STORE__URL) elsewhere"
        )


def migrate(conn: psycopg.Connection, location: str) -> int:
    """Bring the schema to LATEST, each migration in its own transaction (DDL included), under an advisory lock held
    across them (taken before any of them begins: a transaction that began before another replica's migration
    committed could miss the tables it made). ``conn`` is in autocommit. Returns the version found."""
    found = version_of(conn)
    refuse_newer(found, location)
    if found == LATEST:
        return found
    conn.execute("SELECT pg_advisory_lock(%s, %s)", MIGRATION_LOCK)
    try:
        now = version_of(conn)  # another replica may have migrated meanwhile
        refuse_newer(now, location)
        for version in range(now + 1, LATEST + 1):
            with conn.transaction():
                if version == 1:
                    conn.execute("CREATE TABLE schema_version (version INTEGER PRIMARY KEY, applied_at TIMESTAMPTZ NOT NULL DEFAULT now())")
                for statement in ALL_MIGRATIONS[version - 1].split(";"):
                    if statement.strip():
                        conn.execute(statement)  # our own constant SQL
                conn.execute("INSERT INTO schema_version (version) VALUES (%s)", (version,))
            log.info("store_migrated", location=location, version=version)
    finally:
        conn.execute("SELECT pg_advisory_unlock(%s, %s)", MIGRATION_LOCK)
    return found
