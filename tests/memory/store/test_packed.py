"""Packed rows (memory/store/sqlite_schema.py, ``pack``): audit records, reports and raw turns deflated against a preset
dictionary read back as written, rows of an older Ruyi (plain JSON text) beside them, and a grep of the files still sees them."""

from __future__ import annotations

import json
import sqlite3
import time
from pathlib import Path

from memory.store import sqlite_schema
from memory.store.base import Audit, ChainUpdate, Changes, Report, Turn
from memory.store.sqlite_recall import Recall
from memory.store.sqlite_schema import DICTIONARIES, pack, unpack
from memory.store.sqlite_store import SQLiteStore
from tests.stored_bytes import stored_bytes

AUDIT = {
    "request_id": "32b4663bb68e5d905aec30c9a8d63833",
    "model": "gpt-4o",
    "mode": "on",
    "session_how": "continued",
    "est_before": 1218,
    "est_after": 1218,
    "tier": "expanded",
    "batch": "none",
    "window": 128000,
    "usable": 108800,
    "status": 200,
    "compaction": False,
    "overflow_retry": False,
    "upstream_prompt_tokens": 1215,
    "cached_tokens": 0,
    "latency_llm_ms": 1.57,
    "latency_ruyi_ms": 5.03,
    "s2_written_count": 0,
    "rag_chunks": 0,
    "retrieval_path": [],
    "latency_retrieval_ms": None,
    "drop_reason": None,
    "archive": None,
    "prepare_until": None,
}


def test_a_body_reads_back_as_written_and_an_audit_record_packs_to_a_fraction() -> None:
    values: tuple[object, ...] = (AUDIT, {"role": "user", "content": "日本語 \ud800 lone", "n": [1.5, None, True]}, [], "", {"k": "x" * 300_000})
    for value in values:
        assert unpack(pack(value)) == value
    assert list(unpack(pack(AUDIT))) == list(AUDIT)  # the keys' order too
    assert len(pack(AUDIT)) * 4 < len(json.dumps(AUDIT, separators=(",", ":")))
    assert unpack('{"a": 1}') == {"a": 1} and unpack(b'{"a": 1}') == {"a": 1}  # plain JSON, as text or bytes
    assert set(DICTIONARIES) == {1} and pack(AUDIT)[0] == 1


def test_rows_an_older_ruyi_wrote_as_text_read_back_beside_packed_ones(tmp_path: Path) -> None:
    path = tmp_path / "ruyi.db"
    store, recall = SQLiteStore(path), Recall(path)
    try:
        old_audit, old_report = {**AUDIT, "request_id": "old"}, {"request": 1, "request_id": "old", "strategies": {}}
        old_turn = {"role": "user", "content": "the old turn about parse_config"}
        with sqlite3.connect(path) as db:  # as the store wrote them before packing: JSON text
            db.execute("INSERT INTO audit VALUES ('a', 's', 'old', 1.0, ?)", (json.dumps(old_audit, separators=(",", ":")),))
            db.execute("INSERT INTO reports VALUES ('a', 's', '1', 1.0, ?)", (json.dumps(old_report, separators=(",", ":")),))
            db.execute("INSERT INTO turns VALUES ('a', 's', 0, 'h0', 'user', 1.0, ?)", (json.dumps(old_turn, ensure_ascii=False),))
        new_audit, new_report = {**AUDIT, "request_id": "new"}, {"request": 2, "request_id": "new", "strategies": {"dedup": {"items": 1}}}
        new_turn = {"role": "assistant", "content": "the new answer about parse_config"}
        store.write_background([Audit("a", "s", "new", new_audit), Report("a", "s", "2", new_report)])
        recall.write_background([Turn("a", "s", 1, "h1", "assistant", new_turn, new_turn["content"])])
        assert store.audit("a", "s") == [old_audit, new_audit]
        assert [r.body for r in store.audit_records()] == [old_audit, new_audit]
        assert store.reports("a", "s", 10) == [old_report, new_report]
        assert recall.turns("a", "s") == [{"turn": 0, "message": old_turn}, {"turn": 1, "message": new_turn}]
        assert [h.row["message"] for h in recall.search("a", "s", "parse_config")] == [new_turn]  # the old turn was never indexed here
        with sqlite3.connect(path) as db:
            kinds = dict(db.execute("SELECT request_id, typeof(body) FROM audit"))
        assert kinds == {"old": "text", "new": "blob"}
    finally:
        recall.close()
        store.close()


def test_a_grep_of_the_files_sees_what_a_packed_body_holds(tmp_path: Path) -> None:
    path = tmp_path / "ruyi.db"
    store = SQLiteStore(path)
    try:
        store.write_background([Audit("a", "s", "r1", {**AUDIT, "drop_reason": "MARKER-31337 in a packed body"})])
        assert not any(b"MARKER-31337" in p.read_bytes() for p in tmp_path.iterdir() if p.is_file())  # packed: not as such
        assert [name for name, data in stored_bytes(tmp_path).items() if b"MARKER-31337" in data] == ["ruyi.db-wal"]
    finally:
        store.close()
    assert [name for name, data in stored_bytes(tmp_path).items() if b"MARKER-31337" in data] == ["ruyi.db"]  # folded in


def test_a_store_whose_links_and_turn_hashes_are_text_migrates_to_16_bytes_and_reads_back(tmp_path: Path) -> None:
    """Migrations 9 and 10 on a file at schema 8 (links and raw turns' hashes as 32 hex characters, as Ruyi wrote them
    then); one that is not a digest stays text, and both are found and loaded as before."""
    path = tmp_path / "ruyi.db"
    digests = [f"{n:032x}" for n in (7, 8, 9)] + ["not-a-digest"]
    conn = sqlite3.connect(path, isolation_level=None)
    for version, migration in enumerate(sqlite_schema.MIGRATIONS[:8], 1):
        for statement in migration.split(";"):
            if statement.strip():
                conn.execute(statement)
        conn.execute(f"PRAGMA user_version = {version}")
    conn.execute("INSERT INTO sessions (agent_id, session_id, created_at, last_seen, requests) VALUES ('a', 's', 1.0, 1.0, 1)")
    conn.executemany("INSERT INTO chain VALUES ('a', 's', ?, ?)", list(enumerate(digests)))
    conn.executemany("INSERT INTO links VALUES ('a', ?, 's')", [(d,) for d in digests])
    conn.execute("INSERT INTO tips VALUES ('a', ?, 's')", (digests[-1],))
    turn = {"role": "user", "content": "about parse_config"}
    conn.executemany(  # raw turns' hashes as text too (migration 10), and their index rows (migration 8 carried them)
        "INSERT INTO turns VALUES ('a', 's', ?, ?, 'user', 1.0, ?)", [(n, d, json.dumps(turn)) for n, d in enumerate(digests)]
    )
    conn.close()
    store = SQLiteStore(path)  # migrates
    recall = Recall(path)
    try:
        recall.write_background([Turn("a", "s", 9, f"{99:032x}", "user", turn, turn["content"])])
        assert recall.turns("a", "s") == [{"turn": n, "message": turn} for n in (0, 1, 2, 3, 9)]
        assert [(h.ref, h.row["message"]) for h in recall.search("a", "s", "parse_config")] == [(f"9:{99:032x}", turn)]
        kinds = store._conn.execute("SELECT typeof(hash), count(*) FROM turns GROUP BY 1 ORDER BY 1").fetchall()
        assert kinds == [("blob", 4), ("text", 1)]
        assert recall.expire_turns(2e9) == 5 and recall.turns("a", "s") == []
        loaded = store.load_session("a", "s")
        assert loaded is not None and loaded.links == tuple(digests) and loaded.is_tip
        assert store.find_links("a", digests[:2]) == {d: "s" for d in digests[:2]}
        assert store.find_links("a", [*digests, "f" * 32, *(f"{n:032x}" for n in range(100, 130))]) == {d: "s" for d in digests}
        assert store.find_tips("a", digests) == {digests[-1]: "s"}
        kinds = store._conn.execute("SELECT typeof(link), count(*) FROM links GROUP BY 1 ORDER BY 1").fetchall()
        assert kinds == [("blob", 3), ("text", 1)]
        store.write(Changes(chains=[ChainUpdate("a", "s", 4, (f"{10:032x}",), False)], tips=[("a", f"{10:032x}", "s"), ("a", digests[-1], None)]))
        assert store.load_session("a", "s").links[-1] == f"{10:032x}"  # type: ignore[union-attr]
        assert store.find_tips("a", [f"{10:032x}", digests[-1]]) == {f"{10:032x}": "s"}
        store.expire(2e9, 10)
        assert store._conn.execute("SELECT count(*) FROM tips").fetchone()[0] == 0  # the session's tip went with it
        assert store._conn.execute("SELECT count(*) FROM links").fetchone()[0] == 0
    finally:
        recall.close()
        store.close()


def test_raw_turns_expire_oldest_first_without_an_index_by_time(tmp_path: Path) -> None:
    """Migration 11 dropped turns_by_time: expiry walks the turns in rowid order (the order they were written in) and
    stops at the first one not yet due, in steps."""
    path = tmp_path / "ruyi.db"
    SQLiteStore(path).close()
    recall = Recall(path)
    try:
        turn = {"role": "user", "content": "about parse_config"}
        recall.write_background([Turn("a", "s", n, f"{n:032x}", "user", turn, turn["content"]) for n in range(9)])
        between = time.time()
        time.sleep(0.01)
        recall.write_background([Turn("a", "t", n, f"{n:032x}", "user", turn, turn["content"]) for n in range(4)])
        assert recall.expire_turns(between, rows=4) == 9  # three steps: 4, 4, 1 (then the first not yet due stops it)
        assert recall.turns("a", "s") == [] and len(recall.turns("a", "t")) == 4
        assert {h.row["session_id"] for h in recall.search("a", None, "parse_config", limit=20)} == {"t"}
        assert recall._conn.execute("SELECT count(*) FROM recall_rows").fetchone()[0] == 4
        assert recall._conn.execute("SELECT count(*) FROM sqlite_master WHERE name = 'turns_by_time'").fetchone()[0] == 0
    finally:
        recall.close()
