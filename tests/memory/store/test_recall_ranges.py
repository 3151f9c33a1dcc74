"""Recall's rows numbered by agent and session (migration 7): a store written before it is carried over, and every search
gives the same hits, in the same order, as the query before it (a whole-index MATCH filtered by agent and session after);
a session's index rows go with it; the write-ahead log is emptied after a burst."""

from __future__ import annotations

import json
import random
import sqlite3
from pathlib import Path
from typing import Any

from memory.store import sqlite_schema
from memory.store.base import ChunkRow, Turn
from memory.store.sqlite_recall import Recall, index_text, match_query, matched, terms
from memory.store.sqlite_store import SQLiteStore

WORDS = (
    "parser tokenizer config loader retry backoff cache index migration schema session agent window budget stream "
    "socket timeout handler request response header payload encoder decoder buffer flush commit rollback vacuum "
    "checkpoint journal cursor"
).split()
PATHS = ("src/cli/parse_args.py", "proxy/flow.py", "memory/store/sqlite_store.py", "tests/test_args.py", "docs/DESIGN.md")


def _text(rng: random.Random) -> str:
    words = [rng.choice(WORDS) for _ in range(rng.randint(4, 40))]
    words.insert(rng.randrange(len(words)), rng.choice(PATHS))
    if rng.random() < 0.3:
        words.append(f"err_{rng.randint(1, 30)}")
    if rng.random() < 0.2:
        words.append("修复了内存泄漏")
    return "the " + " ".join(words) + "."


def _old_database(path: Path, rng: random.Random) -> list[tuple[str, str]]:
    """A store at schema 6, written as Ruyi wrote it then (five-column index); returns its (agent, session)s."""
    conn = sqlite3.connect(path, isolation_level=None)
    conn.execute("PRAGMA auto_vacuum = INCREMENTAL")
    for version, migration in enumerate(sqlite_schema.MIGRATIONS[:6], 1):
        for statement in migration.split(";"):
            if statement.strip():
                conn.execute(statement)
        conn.execute(f"PRAGMA user_version = {version}")
    keys = [(agent, f"s{i}") for agent in ("a", "b", "a/sub") for i in range(5)]
    rows = []
    conn.execute("BEGIN")
    for n in range(600):
        agent, session = rng.choice(keys)
        text = _text(rng)
        if n % 3:
            body = {"role": "tool", "content": text}
            conn.execute("INSERT INTO turns VALUES (?, ?, ?, ?, 'tool', 1.0, ?)", (agent, session, n, f"h{n}", json.dumps(body)))
            rows.append((index_text(text), agent, session, "turn", f"{n}:h{n}"))
        else:
            conn.execute("INSERT INTO chunks VALUES (?, ?, ?, 1, 2, 1.0, 'extractive', '[]', '[]', ?, ?)", (agent, session, f"c{n}", text[:40], text))
            rows.append((index_text(text), agent, session, "chunk", f"c{n}"))
    conn.executemany("INSERT INTO recall_fts VALUES (?, ?, ?, ?, ?)", rows)
    conn.execute("COMMIT")
    conn.close()
    return keys


def _old_search(
    conn: sqlite3.Connection,
    agent_id: str,
    session_id: str | None,
    text: str,
    limit: int = 5,
    kinds: tuple[str, ...] = ("chunk", "turn"),
    agents: list[str] | None = None,
) -> list[tuple[str, str, str, int]]:
    """The search before migration 7, as it was (without reading the rows back)."""
    words = terms(text)
    scope = list(agents) if agents is not None else [agent_id]
    everyone = scope == ["*"]
    sql = (
        "SELECT kind, ref, agent_id, session_id, text FROM recall_fts WHERE recall_fts MATCH ?"
        + ("" if everyone else f" AND agent_id IN ({', '.join('?' * len(scope))})")
        + (" AND session_id = ?" if session_id is not None else "")
        + f" AND kind IN ({', '.join('?' * len(kinds))}) ORDER BY bm25(recall_fts) LIMIT ?"
    )
    args = [match_query(words), *([] if everyone else scope), *([session_id] if session_id is not None else []), *kinds, limit * 4]
    hits = [(kind, ref, session, matched(words, indexed)) for kind, ref, _, session, indexed in conn.execute(sql, args).fetchall()]
    hits.sort(key=lambda h: -h[3])
    return hits[:limit]


def _new(recall: Recall, *args: Any, **kwargs: Any) -> list[tuple[str, str, str, int]]:
    return [(h.kind, h.ref, h.row["session_id"], h.matched) for h in recall.search(*args, **kwargs)]


def test_a_store_written_before_the_scope_column_is_carried_over_and_searches_give_the_same_hits(tmp_path: Path) -> None:
    rng = random.Random(27)
    path = tmp_path / "ruyi.db"
    keys = _old_database(path, rng)
    queries = [_text(rng) for _ in range(12)] + ["parse_args", "内存", "err_7 timeout", "src/cli/parse_args.py retry"]
    old = sqlite3.connect(path)
    expected = {
        (a, s, q, k, x): _old_search(old, a, s, q, kinds=k, agents=x)
        for a, s in keys
        for q in queries
        for k in (("chunk", "turn"), ("turn",))
        for x in (None,)
    }
    wide = {(a, q): _old_search(old, a, None, q, 6) for a in ("a", "b") for q in queries}
    several = {q: _old_search(old, "a", None, q, 3, agents=["a", "a/sub"]) for q in queries}
    everyone = {q: _old_search(old, "a", None, q, 3, agents=["*"]) for q in queries}
    count = old.execute("SELECT count(*) FROM recall_fts").fetchone()[0]
    old.close()
    assert sum(1 for hits in expected.values() if hits) > 100  # most searches find something

    SQLiteStore(path).close()  # migrates to the latest schema
    recall = Recall(path)
    try:
        assert recall._conn.execute("SELECT count(*) FROM recall_rows").fetchone()[0] == count  # migration 8: carried over
        assert recall._conn.execute("SELECT count(*) FROM recall_fts").fetchone()[0] == count
        recall._conn.execute("INSERT INTO recall_fts (recall_fts) VALUES ('integrity-check')")
        for (a, s, q, k, x), hits in expected.items():
            assert _new(recall, a, s, q, kinds=k, agents=x) == hits, (a, s, q, k)
        for (a, q), hits in wide.items():
            assert _new(recall, a, None, q, 6) == hits
        for q, hits in several.items():
            assert _new(recall, "a", None, q, 3, agents=["a", "a/sub"]) == hits
        for q, hits in everyone.items():
            assert _new(recall, "a", None, q, 3, agents=["*"]) == hits
        ranges = recall._conn.execute("SELECT count(*), count(DISTINCT agent_id || ' ' || session_id) FROM recall_sessions").fetchone()
        assert ranges == (len(keys), len(keys))  # one rowid range per session carried over
    finally:
        recall.close()


def test_rows_written_after_the_migration_rank_as_the_old_index_ranked_them(tmp_path: Path) -> None:
    """The same turns and chunks written through Recall (new numbering) and into a schema-6 index as Ruyi wrote them then."""
    rng = random.Random(3)
    path = tmp_path / "old.db"
    keys = _old_database(path, rng)
    old = sqlite3.connect(path)
    rows = old.execute(
        "SELECT f.kind, f.ref, f.agent_id, f.session_id, coalesce(t.body, c.summary) FROM recall_fts f "
        "LEFT JOIN turns t ON f.kind = 'turn' AND t.agent_id = f.agent_id AND t.session_id = f.session_id AND "
        "t.turn || ':' || t.hash = f.ref LEFT JOIN chunks c ON f.kind = 'chunk' AND c.agent_id = f.agent_id AND "
        "c.session_id = f.session_id AND c.chunk_id = f.ref ORDER BY f.rowid"
    ).fetchall()
    items: list[Any] = []
    for kind, ref, agent, session, stored in rows:
        if kind == "turn":
            turn, _, digest = ref.partition(":")
            body = json.loads(stored)
            items.append(Turn(agent, session, int(turn), digest, "tool", body, body["content"]))
        else:
            items.append(ChunkRow(agent, session, ref, 1, 2, "extractive", (), (), stored[:40], stored))
    recall = Recall()  # in memory: the latest schema from the start
    try:
        for start in range(0, len(items), 50):  # in several transactions, as the background writer does
            recall.write_background(items[start : start + 50])
        queries = [_text(rng) for _ in range(10)]
        for a, s in keys:
            for q in queries:
                assert _new(recall, a, s, q) == _old_search(old, a, s, q), (a, s, q)
        for q in queries:
            assert _new(recall, "a", None, q, 6) == _old_search(old, "a", None, q, 6)
            assert _new(recall, "b", None, q, 3, agents=["a", "b"]) == _old_search(old, "b", None, q, 3, agents=["a", "b"])
    finally:
        recall.close()
        old.close()


def test_a_session_forgotten_or_expired_leaves_no_index_row_and_the_others_keep_theirs(tmp_path: Path) -> None:
    path = tmp_path / "ruyi.db"
    _old_database(path, random.Random(5))
    store = SQLiteStore(path)
    recall = Recall(path)
    by_session = "SELECT agent_id || ' ' || session_id, count(*) FROM recall_rows GROUP BY 1"
    try:
        before = dict(recall._conn.execute(by_session).fetchall())
        removed = store.forget("a", "s1")
        assert removed["recall_fts"] == before["a s1"] > 0
        assert dict(recall._conn.execute(by_session).fetchall()) == {k: v for k, v in before.items() if k != "a s1"}
        assert recall.search("a", "s1", "parser tokenizer config loader retry") == []
        turns = recall._conn.execute("SELECT count(*) FROM turns").fetchone()[0]
        assert recall.expire_turns(2.0, rows=7) == turns > 7  # all were written at 1.0: gone, seven a transaction
        assert recall._conn.execute("SELECT DISTINCT kind FROM recall_rows").fetchall() == [("chunk",)]
        # the index (contentless: told the text each removed row had) holds the rows left, no more, and is sound
        left = recall._conn.execute("SELECT count(*) FROM recall_rows").fetchone()[0]
        assert recall._conn.execute("SELECT count(*) FROM recall_fts").fetchone()[0] == left
        every = " OR ".join(f'"{w}"' for w in ("parser", "tokenizer", "config", "loader", "retry"))
        matched = {r for (r,) in recall._conn.execute("SELECT rowid FROM recall_fts WHERE recall_fts MATCH ?", (every,))}
        assert matched and matched <= {r for (r,) in recall._conn.execute("SELECT id FROM recall_rows")}
        recall._conn.execute("INSERT INTO recall_fts (recall_fts) VALUES ('integrity-check')")
        assert recall.search("b", "s2", "parser tokenizer config loader retry", kinds=("turn",)) == []
        assert recall.search("b", "s2", "parser tokenizer config loader retry", kinds=("chunk",))
    finally:
        recall.close()
        store.close()


def test_a_checkpoint_after_a_write_burst_empties_the_log_file_and_a_passive_one_follows(tmp_path: Path) -> None:
    from memory.store import sqlite_store

    store = SQLiteStore(tmp_path / "ruyi.db")
    recall = Recall(tmp_path / "ruyi.db")
    wal = tmp_path / "ruyi.db-wal"
    try:
        rng = random.Random(1)
        for batch in range(6):  # a burst: a few MiB of log
            recall.write_background([ChunkRow("a", f"s{batch}", f"c{i}", 1, 2, "x", (), (), "l", _text(rng) * 20) for i in range(300)])
        assert wal.stat().st_size >= sqlite_store.CHECKPOINT_BYTES
        store.checkpoint()
        assert wal.stat().st_size == 0 and store.truncated == 1  # emptied, not only folded in
        for batch in range(6):
            recall.write_background([ChunkRow("b", f"s{batch}", f"c{i}", 1, 2, "x", (), (), "l", _text(rng) * 20) for i in range(300)])
        grown = wal.stat().st_size
        store.checkpoint()  # within TRUNCATE_EVERY_S of the last: passive (the file is reused, not shrunk)
        assert wal.stat().st_size == grown and store.truncated == 1
    finally:
        recall.close()
        store.close()
