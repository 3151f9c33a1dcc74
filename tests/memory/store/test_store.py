"""The store on both backends (SQLite, PostgreSQL): chain index, idempotent background records, expiry, redaction; SQLite's
schema versions and WAL; SQL stays in the backends."""

from __future__ import annotations

import re
import sqlite3
from collections.abc import Callable
from pathlib import Path

import pytest

from memory.store.backend import open_store
from memory.store.base import Audit, ChainUpdate, Changes, ModelRatio, Report, SessionRecord, Store, StoreError, Usage
from memory.store.options import StoreOptions
from memory.store.sqlite_schema import LATEST
from memory.store.sqlite_store import SQLiteStore

ROOT = Path(__file__).resolve().parents[3]
MakeStore = Callable[[], Store]


def a_session(store: Store, agent: str = "a", sid: str = "s1", last_seen: float = 100.0) -> None:
    links = ("l0", "l1", "l2")
    store.write(
        Changes(
            sessions=[SessionRecord(agent, sid, created_at=1.0, last_seen=last_seen, requests=1)],
            chains=[ChainUpdate(agent, sid, 0, links)],
            links=[(agent, link, sid) for link in links],
            tips=[(agent, "l2", sid)],
            decisions=[(agent, sid, "l1", [{"ref_id": "r1", "new_text": "[ruyi: gone]"}])],
            refs=[(agent, sid, "r1", "original text")],
        )
    )


def test_created_in_wal_mode_at_the_latest_version_and_reopened_as_is(tmp_path: Path) -> None:
    path = tmp_path / "deep" / "dir" / "ruyi.db"
    store = SQLiteStore(path)
    a_session(store)
    store.close()
    conn = sqlite3.connect(path)
    assert conn.execute("PRAGMA user_version").fetchone() == (LATEST,)
    assert conn.execute("PRAGMA journal_mode").fetchone() == ("wal",)
    conn.close()
    again = SQLiteStore(path)
    assert again.load_session("a", "s1") is not None


def test_a_newer_database_is_refused_naming_the_file_and_both_versions(tmp_path: Path) -> None:
    path = tmp_path / "ruyi.db"
    conn = sqlite3.connect(path)
    conn.execute(f"PRAGMA user_version = {LATEST + 1}")
    conn.close()
    with pytest.raises(StoreError) as err:
        SQLiteStore(path)
    assert str(path) in str(err.value) and f"version {LATEST + 1}" in str(err.value) and f"({LATEST})" in str(err.value)


def test_a_file_that_is_not_a_database_is_a_store_error(tmp_path: Path) -> None:
    path = tmp_path / "ruyi.db"
    path.write_bytes(b"not a database at all" * 100)
    with pytest.raises(StoreError, match="cannot"):
        SQLiteStore(path)


def test_the_memory_backend_keeps_nothing(tmp_path: Path) -> None:
    assert open_store(StoreOptions(backend="memory", data_dir=str(tmp_path))) is None
    assert not any(tmp_path.iterdir())


def test_chain_index_and_chain_updates(make_store: MakeStore) -> None:
    store = make_store()
    a_session(store)
    assert store.find_tips("a", ["l0", "l1", "l2", "zz"]) == {"l2": "s1"}
    assert store.find_links("a", ["l0", "zz"]) == {"l0": "s1"}
    assert store.find_tips("b", ["l2"]) == {} and store.find_links("b", ["l0"]) == {}
    store.write(Changes(chains=[ChainUpdate("a", "s1", 1, ("m1",))], tips=[("a", "l2", None), ("a", "m1", "s1")]))
    stored = store.load_session("a", "s1")
    assert stored is not None and stored.links == ("l0", "m1") and stored.is_tip
    assert store.find_tips("a", ["l2", "m1"]) == {"m1": "s1"}
    store.write(Changes(tips=[("a", "m1", None)]))
    stored = store.load_session("a", "s1")
    assert stored is not None and not stored.is_tip and stored.decisions == {"l1": [{"ref_id": "r1", "new_text": "[ruyi: gone]"}]}
    assert store.load_session("a", "nope") is None and store.load_session("b", "s1") is None


def test_background_records_are_written_once(make_store: MakeStore) -> None:
    store = make_store()
    a_session(store)
    report = Report("a", "s1", "req-1", {"batch": "none"}, keep=3)
    audit = Audit("a", "s1", "req-1", {"est_before": 10})
    store.write_background([report, audit, report, audit])
    store.write_background([report, audit])  # a replayed request
    store.write_background([Report("a", "s1", f"req-{i}", {"n": i}, keep=3) for i in range(2, 6)])
    store.write_background([Usage("a", "s1", 990, 512, 1.05), Usage("a", "s1", None, None, None), ModelRatio("gpt-4o", 1.25)])
    assert store.audit("a", "s1") == [{"est_before": 10}]
    assert [r["n"] for r in store.reports("a", "s1", 10)] == [3, 4, 5]  # the newest `keep`
    stored = store.load_session("a", "s1")
    assert stored is not None
    assert (stored.record.upstream_prompt_tokens, stored.record.cached_tokens, stored.record.calibration) == (990, 512, 1.05)
    assert store.ratios() == [("gpt-4o", 1.25)]


def test_expire_removes_a_session_with_everything_it_owns(make_store: MakeStore) -> None:
    store = make_store()
    a_session(store, sid="old", last_seen=100.0)
    a_session(store, sid="new", last_seen=900.0)
    store.write_background([Report("a", "old", "k", {}), Audit("a", "old", "k", {})])
    assert store.expire(500.0, 10) == [("a", "old")]
    assert store.load_session("a", "old") is None and store.audit("a", "old") == []
    assert store.session_ids("a") == ["new"] and store.find_ref("a", "r1") == "original text"  # new's own copy
    assert store.find_tips("a", ["l2"]) == {"l2": "new"}
    assert store.compact() == 0


def test_no_sql_and_no_sqlite_outside_the_backend() -> None:
    """SQL lives in the store's ``sqlite_*`` and ``pg_*`` modules only (the memory rooms' own tables included)."""
    sql = re.compile(r"\b(SELECT|INSERT|UPDATE|DELETE|CREATE TABLE|PRAGMA)\b [a-z*(]|import sqlite3|sqlite3\.")
    offenders = [
        str(path.relative_to(ROOT))
        for folder in ("memory", "proxy", "config", "strategies")
        for path in sorted((ROOT / folder).rglob("*.py"))
        if not (path.parent.parent.name == "memory" and path.name.startswith(("sqlite_", "pg_"))) and sql.search(path.read_text())
    ]
    assert offenders == []


def test_reports_and_audit_records_are_redacted_when_written(make_store: MakeStore) -> None:
    store = make_store()
    a_session(store)
    secret = "ghp_R4nd0mT0k3nV4lu3F0rT3st1ngPurp0s3s12"
    store.write_background([Report("a", "s1", "q1", {"note": f"token {secret}"}), Audit("a", "s1", "q1", {"model": secret})])
    assert secret not in str(store.reports("a", "s1", 10)) and secret not in str(store.audit("a", "s1"))
    assert "[REDACTED:" in str(store.audit("a", "s1"))
    store.close()


def test_the_database_files_are_the_owners_only_in_an_existing_open_directory(tmp_path: Path) -> None:
    import os
    import stat

    from memory.store.sqlite_database import Database
    from memory.store.sqlite_store import SQLiteStore

    data = tmp_path / "data"
    data.mkdir(mode=0o755)  # as the Docker image makes /data
    old = os.umask(0o022)
    try:
        (data / "old.db").write_bytes(b"")  # an existing file left world-readable by an older version
        (data / "old.db").chmod(0o644)
        stores = [SQLiteStore(data / "ruyi.db"), SQLiteStore(data / "old.db")]
        keeper = Database(data / "ruyi.db")
    finally:
        os.umask(old)
    try:
        for path in data.iterdir():
            assert stat.S_IMODE(path.stat().st_mode) & 0o077 == 0, path.name
    finally:
        keeper.close()
        for store in stores:
            store.close()
