"""Recall on both backends (SQLite FTS5, PostgreSQL tsvector): Chinese two-character words (as bigrams) and code identifiers
match; rows once; isolation; both backends give the same hits."""

from __future__ import annotations

import sqlite3
import time
from collections.abc import Callable
from typing import Any

import pytest

from memory.store.base import ArchiveRow, ChunkRow, Turn
from memory.store.pg_recall import PgRecall
from memory.store.sqlite_recall import Recall, index_text, terms

MakeRecall = Callable[[], Any]


def chunk(agent: str, session: str, chunk_id: str, summary: str) -> ChunkRow:
    return ChunkRow(agent, session, chunk_id, 2, 9, "extractive", ("facts",), (), summary.splitlines()[0], summary)


def test_two_character_chinese_words_match_which_the_trigram_tokenizer_never_does(make_recall: MakeRecall) -> None:
    text = "修复了内存泄漏，然后更新配置文件。"
    trigram = sqlite3.connect(":memory:")
    trigram.execute("CREATE VIRTUAL TABLE t USING fts5(x, tokenize='trigram')")
    trigram.execute("INSERT INTO t VALUES (?)", (text,))
    assert trigram.execute("SELECT count(*) FROM t WHERE t MATCH '\"内存\"'").fetchone()[0] == 0
    recall = make_recall()
    recall.write_background([chunk("a", "s", "c1", text), chunk("a", "s", "c2", "Edited parser.py and ran the tests.")])
    for word in ("内存", "配置", "泄漏"):
        hits = recall.search("a", "s", word)
        assert [h.ref for h in hits] == ["c1"] and hits[0].matched == 1
    assert index_text("内存泄漏") == " 内存 存泄 泄漏 "


def test_code_identifiers_and_paths_match_as_phrases(make_recall: MakeRecall) -> None:
    recall = make_recall()
    recall.write_background(
        [
            chunk("a", "s", "c1", "changed src/cli/parse_args.py: ParseArgs now rejects --verbose=0"),
            chunk("a", "s", "c2", "read tests/test_args.py; the args parse fine"),
        ]
    )
    assert [h.ref for h in recall.search("a", "s", "parse_args")] == ["c1"]
    assert recall.search("a", "s", "ParseArgs")[0].ref == "c1"
    assert recall.search("a", "s", "src/cli/parse_args.py")[0].ref == "c1"
    assert "the" not in terms("the parse_args of the cli") and "parse args" in terms("the parse_args of the cli")


def test_rows_are_written_once_and_each_agent_and_session_sees_only_its_own(make_recall: MakeRecall) -> None:
    recall = make_recall()
    turn = Turn("a", "s", 3, "h1", "tool", {"role": "tool", "content": "grep found needle_value"}, "grep found needle_value")
    recall.write_background([turn, turn, chunk("a", "s", "c1", "needle_value here"), chunk("b", "s", "c1", "needle_value there")])
    recall.write_background([turn, ArchiveRow("a", "s", "a1", 1, {"number": 1, "s1": "summary"})])
    assert len(recall.turns("a", "s")) == 1 and [a["number"] for a in recall.archives("a", "s")] == [1]
    assert {h.kind for h in recall.search("a", "s", "needle_value")} == {"turn", "chunk"}
    assert [h.row["summary"] for h in recall.search("b", "s", "needle_value")] == ["needle_value there"]
    assert recall.search("a", "other", "needle_value") == [] and recall.archives("b", "s") == []
    assert recall.expire_turns(time.time() + 1) == 1 and recall.search("a", "s", "needle_value", kinds=("turn",)) == []


def test_the_store_migrates_recall_in_and_removes_it_with_its_session(make_store: Callable[[], Any], make_recall: MakeRecall) -> None:
    store = make_store()
    recall = make_recall()
    recall.write_background([chunk("a", "s", "c1", "needle_value")])
    assert recall.search("a", "s", "needle_value")
    from memory.store.base import Changes, SessionRecord

    store.write(Changes(sessions=[SessionRecord("a", "s", last_seen=1.0)]))
    assert store.expire(time.time(), 10) == [("a", "s")]
    assert recall.search("a", "s", "needle_value") == [] and recall.chunks("a", "s") == []


CORPUS = [
    "修复了内存泄漏，然后更新配置文件。",
    "配置文件在 config/default.yaml 里，内存上限是 4 GiB",
    "changed src/cli/parse_args.py: ParseArgs now rejects --verbose=0",
    "read tests/test_args.py; the args parse fine",
    "the parser leaks memory when parse_args is called twice",
    "数据库迁移失败：schema_version 比代码新",
    "ran pytest tests/memory -q: 3 failed in test_recall.py",
    "用户希望回答简短，用中文",
    "内存 内存 内存 重复的词",
    "PostgreSQL 15 at 127.0.0.1:5432, database test",
    "grep -rn parse_args src/ found two callers",
]
QUERIES = [
    "内存",
    "配置文件 内存",
    "parse_args",
    "src/cli/parse_args.py",
    "schema_version 迁移",
    "用中文回答",
    "ParseArgs tests",
    "database 127.0.0.1",
    "nothing here matches",
    "test_recall.py failed",
]


def test_both_backends_find_the_same_hits_chinese_included(pg_url: str) -> None:
    """For each query: the same rows, the same strength, in the same order of strength (ties may differ in order)."""
    lite, pg = Recall(), PgRecall(pg_url)
    for i, text in enumerate(CORPUS):
        items = [chunk("a", "s", f"c{i}", text), Turn("a", "s", i, f"h{i}", "user", {"role": "user", "content": text}, text)]
        lite.write_background(items)
        pg.write_background(items)
    for query in QUERIES:
        for limit in (3, 20):
            ours, theirs = pg.search("a", None, query, limit), lite.search("a", None, query, limit)
            assert [h.matched for h in ours] == [h.matched for h in theirs], query
            if limit == 20:
                assert sorted((h.kind, h.ref) for h in ours) == sorted((h.kind, h.ref) for h in theirs), query
    assert [h.ref for h in pg.search("a", "s", "内存", 20, kinds=("chunk",))] and pg.search("b", None, "内存") == []
    pg.close()


def test_two_replicas_recording_the_same_turns_at_once_leave_one_row_each(pg_url: str) -> None:
    import threading

    import psycopg

    replicas = [PgRecall(pg_url), PgRecall(pg_url)]
    items = [Turn("a", "s", i, f"h{i}", "tool", {"role": "tool", "content": f"输出 {i}"}, f"输出 output_{i}") for i in range(30)]
    items += [chunk("a", "s", "c1", "内存泄漏 fixed"), ArchiveRow("a", "s", "a1", 1, {"number": 1})]
    errors: list[BaseException] = []
    start = threading.Barrier(4)

    def record(recall: PgRecall) -> None:
        try:
            start.wait()
            for _ in range(5):
                recall.write_background(items)
        except BaseException as exc:  # noqa: BLE001 - reported below
            errors.append(exc)

    threads = [threading.Thread(target=record, args=(r,)) for r in replicas for _ in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    with psycopg.connect(pg_url) as conn:
        counts = [conn.execute(f"SELECT count(*) FROM {t}").fetchone()[0] for t in ("turns", "chunks", "archives", "recall_fts")]  # type: ignore[index]
    assert counts == [30, 1, 1, 31]
    assert [h.ref for h in replicas[0].search("a", "s", "内存")] == ["c1"]
    for r in replicas:
        r.close()


@pytest.mark.parametrize("seed", range(4))
def test_random_texts_and_queries_match_alike_on_both_backends(pg_url: str, seed: int) -> None:
    import random

    rng = random.Random(seed)
    words = [
        "内存",
        "泄漏",
        "配置文件",
        "数据库",
        "迁移",
        "parse_args",
        "src/cli/main.py",
        "ValueError",
        "schema_version",
        "pytest",
        "tests/test_store.py",
        "the",
        "fix",
        "ruyi.db",
        "127.0.0.1",
        "修复了",
        "カタカナ",
        "한국어",
        "Über",
        "café",
        "x86_64",
    ]
    lite, pg = Recall(), PgRecall(pg_url)
    for i in range(40):
        text = " ".join(rng.choice(words) for _ in range(rng.randint(1, 12)))
        item = chunk("a", f"s{i % 3}", f"c{i}", text) if i % 2 else Turn("a", f"s{i % 3}", i, f"h{i}", "tool", {"content": text}, text)
        lite.write_background([item])
        pg.write_background([item])
    for _ in range(30):
        query = " ".join(rng.choice(words) for _ in range(rng.randint(1, 4)))
        session = rng.choice([None, "s0", "s1"])
        ours, theirs = pg.search("a", session, query, 200), lite.search("a", session, query, 200)
        assert sorted((h.kind, h.ref, h.matched) for h in ours) == sorted((h.kind, h.ref, h.matched) for h in theirs), query
        assert [h.matched for h in ours] == [h.matched for h in theirs], query
    pg.close()
