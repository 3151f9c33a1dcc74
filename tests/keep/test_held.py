"""What the keeper holds of an agent's memory: read once, dropped by the keeper's own writes for that agent, never a read that raced a write."""

from __future__ import annotations

from pathlib import Path

from memory.anchors.capture import definitions
from proxy.keep.held import AGENTS_HELD, Held
from proxy.keep.keeper import Keeper
from proxy.keep.options import NotebookOptions


def test_reads_are_held_until_the_keeper_writes_for_that_agent(tmp_path: Path) -> None:
    keeper = Keeper(tmp_path / "ruyi.db", NotebookOptions(), None)
    assert keeper.anchor_list("a") == [] and keeper.anchor_list("b") == []
    assert keeper.held.has(("a", "anchors"))
    keeper.anchors.capture("a", "s", definitions("[D001] Use SQLite — why: one file"))
    assert not keeper.held.has(("a", "anchors")) and keeper.held.has(("b", "anchors"))  # only the agent written for
    assert [x.anchor_id for x in keeper.anchor_list("a")] == ["D001"]
    keeper.notebook.current("a")
    before = keeper.current_notebook("a")
    keeper.notebook.add("a", "user", "prefers short answers")
    assert keeper.current_notebook("a").version != before.version
    keeper.close()


def test_a_read_that_raced_a_write_is_not_held() -> None:
    held = Held()

    def read() -> str:
        held.drop("a")  # a write for the agent lands while the value is read
        return "old"

    assert held.get(("a", "notebook"), read) == "old"
    assert not held.has(("a", "notebook"))
    assert held.get(("a", "notebook"), lambda: "new") == "new"
    held.drop(None)  # a write that names no agent drops everything
    assert not held.has(("a", "notebook"))


def test_off_with_replicas_every_read_goes_to_the_store() -> None:
    held, reads = Held(on=False), []
    for _ in range(2):
        held.get(("a", "anchors"), lambda: reads.append(1))
    assert len(reads) == 2 and not held.has(("a", "anchors"))


def test_a_read_is_held_for_held_s_at_most() -> None:
    """``ruyi memo`` writes the store's file from another process: after ``held_s`` the store is read again."""
    now = [0.0]
    held, reads = Held(held_s=2.0, clock=lambda: now[0]), []
    held.get(("a", "notebook"), lambda: reads.append(1))
    now[0] = 1.9
    assert held.has(("a", "notebook"))
    held.get(("a", "notebook"), lambda: reads.append(1))
    now[0] = 2.0
    assert not held.has(("a", "notebook"))
    held.get(("a", "notebook"), lambda: reads.append(1))
    assert len(reads) == 2


def test_write_counts_are_bounded_and_forgetting_one_drops_reads_in_flight() -> None:
    """Issue 27: a write counter per agent ever written was kept forever; past ``AGENTS_HELD`` the least recently
    written is forgotten, and a read in flight meanwhile is not held (its agent's count could restart where it was)."""
    held = Held()
    for i in range(3 * AGENTS_HELD):
        held.drop(f"agent-{i}")
    assert len(held._generation) == AGENTS_HELD

    held.drop("agent-0")  # agent-0 written once: its count is 1 when the read starts

    def read() -> str:
        held.drop("agent-0")  # written meanwhile (2), then forgotten behind AGENTS_HELD others, then written again (1)
        for i in range(AGENTS_HELD):
            held.drop(f"other-{i}")
        held.drop("agent-0")
        return "old"

    assert held.get(("agent-0", "notebook"), read) == "old"
    assert not held.has(("agent-0", "notebook"))
    assert held.get(("agent-0", "notebook"), lambda: "new") == "new" and held.has(("agent-0", "notebook"))
