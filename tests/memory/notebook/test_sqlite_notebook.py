"""The notebook in a real SQLite file and in PostgreSQL: versions, limits, pending compaction, proposals, rollback, isolation."""

from __future__ import annotations

import pytest

from memory.notebook.sections import NotebookError
from memory.notebook.sqlite_notebook import NotebookStore
from memory.store.base import KeeperDatabase


@pytest.fixture
def notes(keeper_database: KeeperDatabase) -> NotebookStore:
    """On both backends (SQLite, PostgreSQL)."""
    return NotebookStore(keeper_database)


def test_every_change_is_a_new_version(notes: NotebookStore) -> None:
    notes.add("a", "user", "prefers short answers")
    nb, _ = notes.add("a", "环境感知", "fish shell")
    assert nb.version == 2 and nb.body["user"][0]["text"] == "prefers short answers" and nb.body["environment"][0]["by"] == "person"
    assert [v["version"] for v in notes.versions("a")] == [1, 2] and notes.current("b").version == 0


def test_a_tenth_entry_makes_compaction_pending_and_an_eleventh_is_refused(notes: NotebookStore) -> None:
    for i in range(9):
        assert not notes.add("a", "history", f"milestone {i}")[0].pending
    assert notes.add("a", "history", "milestone 9")[0].pending and notes.pending(now=0) == ["a"]
    with pytest.raises(NotebookError) as err:
        notes.add("a", "history", "one more")
    assert err.value.status == 409 and notes.current("a").version == 10


def test_the_dynamic_pool_drops_its_oldest_line_when_full(notes: NotebookStore) -> None:
    for i in range(12):
        notes.add("a", "dynamic", f"batch {i}", by="ruyi")
    texts = [e["text"] for e in notes.current("a").body["dynamic"]]
    assert texts == [f"batch {i}" for i in range(2, 12)]


def test_rollback_makes_a_new_version_equal_to_the_old(notes: NotebookStore) -> None:
    notes.add("a", "user", "one")
    notes.put("a", "user", ["two", "three"])
    back = notes.rollback("a", 1)
    assert back is not None and back.version == 3 and [e["text"] for e in back.body["user"]] == ["one"]
    assert notes.rollback("a", 99) is None and notes.current("a").version == 3


def test_proposals_never_overwrite_and_a_rejected_one_is_not_proposed_again(notes: NotebookStore) -> None:
    notes.add("a", "user", "prefers Chinese")
    nb = notes.propose("a", [("user", "prefers Chinese"), ("environment", "Python 3.11"), ("nowhere", "x")])
    assert nb is not None and [e["by"] for e in nb.body["environment"]] == ["proposed"] and len(nb.body["user"]) == 1
    rejected = notes.judge("a", "environment", 0, accept=False)
    assert rejected is not None and rejected.body["environment"] == []
    assert notes.propose("a", [("environment", "Python 3.11")]) is None
    notes.propose("a", [("history", "archived the setup work")])
    accepted = notes.judge("a", "history", 0, accept=True)
    assert accepted is not None and accepted.body["history"][0]["by"] == "person"
    assert notes.judge("a", "user", 0, accept=True) is None  # a person's entry is not a proposal


def test_a_compaction_of_an_old_version_writes_nothing(notes: NotebookStore) -> None:
    for i in range(10):
        notes.add("a", "self", f"rule {i}")
    assert notes.compacted("a", 9, {"self": []}, "fallback") is None
    done = notes.compacted("a", 10, {"self": [{"text": "rules", "by": "compacted", "at": 0}]}, "fallback")
    assert done is not None and not done.pending and notes.pending(now=0) == []
    assert notes.failed("a", lambda n: 60.0 * n) > 0
