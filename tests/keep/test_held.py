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


def test_past_half_its_time_a_read_is_ageing_and_a_refresh_holds_it_anew() -> None:
    now = [0.0]
    held = Held(held_s=2.0, clock=lambda: now[0])
    held.get(("a", "notebook"), lambda: "v1")
    now[0] = 0.9
    assert not held.ageing(("a", "notebook")) and not held.ageing(("b", "notebook"))
    now[0] = 1.0
    assert held.ageing(("a", "notebook")) and held.has(("a", "notebook"))
    assert held.refresh(("a", "notebook"), lambda: "v2") == "v2"
    now[0] = 2.9  # 1.9 s after the refresh: still held, and the newer value
    assert held.has(("a", "notebook")) and held.get(("a", "notebook"), lambda: "v3") == "v2"

    def raced() -> str:
        held.drop("a")
        return "old"

    assert held.refresh(("a", "notebook"), raced) == "old" and not held.has(("a", "notebook"))


async def test_an_agent_that_sends_often_keeps_its_memory_held(tmp_path: Path) -> None:
    """``memory_held`` on the loop answers from what is held and, past half its time, reads it again in a worker:
    the next request finds it held (no worker hop on the request path), never older than ``held_s``."""
    now = [0.0]
    keeper = Keeper(tmp_path / "ruyi.db", NotebookOptions(), None)
    keeper.held._clock = lambda: now[0]
    keeper.current_notebook("a"), keeper.anchor_list("a"), keeper.snapshot_for("a", "s", False, [], None)
    assert keeper.memory_held("a", "s", False) and not keeper._tasks  # young: nothing read again
    now[0] = 1.5
    assert keeper.memory_held("a", "s", False) and keeper._tasks  # ageing: read again ahead
    await keeper.settle()
    now[0] = 3.0  # past the first reads' 2 s, within the refresh's
    assert keeper.memory_held("a", "s", False)
    keeper.anchors.capture("a", "s", definitions("[D001] Use SQLite — why: one file"))
    assert not keeper.memory_held("a", "s", False)  # a write still drops what is held
    assert not keeper.memory_held("b", "s", False) and not keeper.memory_held("a", "s", True)
    await keeper.settle()
    keeper.close()
