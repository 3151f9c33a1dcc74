"""A session's memory in a real SQLite file and in PostgreSQL: sub-agent task calls bounded by age and number, refined forms by their basis."""

from __future__ import annotations

from memory.forms.sqlite_forms import SessionMemory
from memory.store.base import KeeperDatabase


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def test_task_calls_are_kept_oldest_first_within_their_age_and_number(keeper_database: KeeperDatabase) -> None:
    clock = Clock()
    memory = SessionMemory(keeper_database, clock)
    memory.keep_task_calls("a", "p1", ["h1", "h2"], kept=3, ttl_s=100)
    clock.now += 10
    memory.keep_task_calls("b", "p2", ["h3"], kept=3, ttl_s=100)
    assert memory.task_calls(since=0, kept=3) == [("a", "h1", "p1", 1000.0), ("a", "h2", "p1", 1000.0), ("b", "h3", "p2", 1010.0)]
    assert memory.task_calls(since=1005, kept=3) == [("b", "h3", "p2", 1010.0)]
    clock.now += 95  # h1 and h2 are older than 100 s now
    memory.keep_task_calls("a", "p3", ["h4"], kept=3, ttl_s=100)
    assert [h for _, h, _, _ in memory.task_calls(since=0, kept=10)] == ["h3", "h4"]
    clock.now += 1
    memory.keep_task_calls("a", "p3", ["h5", "h6"], kept=3, ttl_s=100)  # beyond three, the oldest goes
    assert [h for _, h, _, _ in memory.task_calls(since=0, kept=10)] == ["h4", "h5", "h6"]


def test_a_refined_form_is_found_only_for_its_basis_and_agent(keeper_database: KeeperDatabase) -> None:
    memory = SessionMemory(keeper_database, redact=lambda s: s.replace("sk-secret", "[REDACTED]"))
    memory.keep_refined("a", "s1", "compact", "basis-1", "refined text with sk-secret")
    assert memory.refined("a", "s1", "compact", "basis-1") == "refined text with [REDACTED]"
    assert memory.refined("a", "s1", "compact", "basis-2") is None and memory.refined("b", "s1", "compact", "basis-1") is None
    memory.keep_refined("a", "s1", "compact", "basis-2", "newer")
    assert memory.refined("a", "s1", "compact", "basis-1") is None and memory.refined("a", "s1", "compact", "basis-2") == "newer"
