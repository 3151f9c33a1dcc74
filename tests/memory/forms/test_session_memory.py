"""A session's facts, snapshots and children's results on both backends: facts folded, a snapshot never changes, a child's
latest result replaces its earlier one, two writers of the same snapshot keep one."""

from __future__ import annotations

from memory.forms.sqlite_forms import SessionMemory
from memory.store.base import KeeperDatabase


def test_facts_fold_each_request_in_and_stay_per_session(keeper_database: KeeperDatabase) -> None:
    memory = SessionMemory(keeper_database)
    memory.learn("a", "s", [{"role": "user", "content": "修复 parser.py 的内存泄漏"}], "done")
    facts = memory.learn("a", "s", [{"role": "user", "content": "now the tests"}], None)
    assert facts["requests"] == 2 and facts["task"] == "修复 parser.py 的内存泄漏"
    assert memory.facts("a", "s") == facts and memory.facts("a", "other") == {} and memory.facts("b", "s") == {}


def test_a_snapshot_is_kept_once_and_children_are_listed_in_order(keeper_database: KeeperDatabase) -> None:
    memory = SessionMemory(keeper_database)
    assert memory.keep_snapshot("a", "child-1", "parent", "first") == "first"
    assert memory.keep_snapshot("a", "child-1", "parent", "second") == "first"  # another replica's copy: the first wins
    memory.keep_snapshot("a", "child-2", "parent", "x")
    assert memory.snapshot("a", "child-1") == ("parent", "first") and memory.snapshot("b", "child-1") is None
    assert set(memory.children("a", "parent")) == {"child-1", "child-2"}


def test_a_child_s_latest_result_replaces_the_earlier_one(keeper_database: KeeperDatabase) -> None:
    clock = iter(range(100))
    memory = SessionMemory(keeper_database, clock=lambda: float(next(clock)))
    memory.keep_result("a", "parent", "child-1", "LOW", "first try")
    memory.keep_result("a", "parent", "child-2", "HIGH", "other")
    memory.keep_result("a", "parent", "child-1", "HIGH", "final answer")
    results = memory.results("a", "parent")
    assert [(r["child_id"], r["importance"], r["text"]) for r in results] == [("child-2", "HIGH", "other"), ("child-1", "HIGH", "final answer")]
    assert memory.results("b", "parent") == []
