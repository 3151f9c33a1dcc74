"""The keeper's tables on PostgreSQL take SQLite's SQL: placeholders, INSERT OR IGNORE and INSERT OR REPLACE (on the primary key)."""

from __future__ import annotations

from memory.store.pg_database import PgDatabase


def test_sqlite_s_insert_or_becomes_an_upsert_on_the_primary_key(pg_url: str) -> None:
    db = PgDatabase(pg_url)
    sql = db.tables.sql
    assert sql("SELECT 1 FROM anchors WHERE agent_id = ? AND title LIKE '%x'") == "SELECT 1 FROM anchors WHERE agent_id = %s AND title LIKE '%%x'"
    assert sql("INSERT OR IGNORE INTO snapshots VALUES (?, ?, ?, ?, ?)") == "INSERT INTO snapshots VALUES (%s, %s, %s, %s, %s) ON CONFLICT DO NOTHING"
    assert sql("INSERT OR REPLACE INTO session_facts VALUES (?, ?, ?, ?)") == (
        "INSERT INTO session_facts VALUES (%s, %s, %s, %s) ON CONFLICT (agent_id, session_id) DO UPDATE SET body = excluded.body, "
        "updated_at = excluded.updated_at"
    )
    assert sql("insert or replace into anchor_lines (agent_id, line_hash, anchor_id) values (?, ?, ?)").endswith(
        "ON CONFLICT (agent_id, line_hash) DO UPDATE SET anchor_id = excluded.anchor_id"
    )
    with db.transaction() as c:
        for body in ("first", "second"):
            c.execute("INSERT OR REPLACE INTO session_facts VALUES (?, ?, ?, ?)", ("a", "s", body, 1.0))
            c.execute("INSERT OR IGNORE INTO snapshots VALUES (?, ?, ?, ?, ?)", ("a", "child", "s", body, 1.0))
    with db.reading() as c:
        assert c.execute("SELECT body FROM session_facts WHERE agent_id = ?", ("a",)).fetchall() == [("second",)]
        assert c.execute("SELECT body FROM snapshots WHERE agent_id = ?", ("a",)).fetchall() == [("first",)]
    db.close()
