"""What the keeper holds of an agent's memory: read once, dropped by the keeper's own writes for that agent, never a read that raced a write."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable
from pathlib import Path

import aiohttp

from memory.anchors.capture import definitions
from proxy import appkeys
from proxy.cli import main
from proxy.keep.held import AGENTS_HELD, REFRESHING_MAX, Held
from proxy.keep.keeper import Keeper
from proxy.keep.options import NotebookOptions
from tests.conftest import MakeProxy, base_url
from tests.fake_upstream import FakeUpstream
from tests.layout.test_step import chat, conversation


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


def stale_held(now: list[float]) -> tuple[Held, list[Callable[[], None]]]:
    """A held store whose background reads wait in a list until the test runs them."""
    queued: list[Callable[[], None]] = []
    return Held(held_s=2.0, stale_s=30.0, clock=lambda: now[0], refresh=queued.append), queued


def test_past_held_s_a_read_is_used_once_more_and_read_again_in_the_background() -> None:
    """Issue 27: an agent sending every second found its held memory expired on every other request and waited for a
    worker thread; now the first use past ``held_s`` is answered from memory and reads again in the background, and
    what another process wrote meanwhile (``ruyi memo``) is what the use after that sees."""
    now, store, reads = [0.0], ["v1"], []

    def read() -> str:
        reads.append(store[0])
        return store[0]

    held, queued = stale_held(now)
    assert held.get(("a", "notebook"), read) == "v1" and reads == ["v1"]
    store[0] = "v2"  # another process writes the store's file
    now[0] = 2.5
    assert held.has(("a", "notebook"))  # the loop may plan the request: nothing will be read there
    assert held.get(("a", "notebook"), read) == "v1" and reads == ["v1"]  # the held read, once more
    assert len(queued) == 1  # one read again, however often it is used meanwhile
    queued.pop()()
    assert reads == ["v1", "v2"] and held.refreshed == 1
    assert held.get(("a", "notebook"), read) == "v2" and reads == ["v1", "v2"]
    assert not queued  # fresh again: held for another held_s


def test_past_stale_s_the_request_reads_again_itself() -> None:
    now, reads = [0.0], []
    held, queued = stale_held(now)
    held.get(("a", "anchors"), lambda: reads.append(1))
    now[0] = 29.5
    assert not held.has(("a", "anchors"))  # too close to stale_s for the loop: the request goes to a worker
    now[0] = 30.0
    held.get(("a", "anchors"), lambda: reads.append(1))
    assert len(reads) == 2 and not queued


def test_a_background_read_that_raced_a_write_is_not_kept() -> None:
    now, calls = [0.0], []
    held, queued = stale_held(now)

    def read() -> str:
        calls.append(1)
        if len(calls) == 2:  # the background read: a write for the agent lands while it reads
            held.drop("a")
        return f"read {len(calls)}"

    held.get(("a", "notebook"), read)
    now[0] = 3.0
    assert held.get(("a", "notebook"), read) == "read 1"
    queued.pop()()
    assert not held.has(("a", "notebook")) and held.refreshed == 0  # dropped by the write, not refilled by the race
    assert held.get(("a", "notebook"), read) == "read 3"


def test_background_reads_are_bounded_and_a_failed_one_is_retried_later() -> None:
    """A stalled store must not take every worker thread: at most REFRESHING_MAX reads again in flight; one that fails
    leaves the held read in place and the next use past ``held_s`` tries again."""
    now = [0.0]
    held, queued = stale_held(now)
    for i in range(REFRESHING_MAX + 3):
        held.get((f"agent-{i}", "notebook"), lambda: "v")
    now[0] = 5.0
    assert all(held.has((f"agent-{i}", "notebook")) for i in range(REFRESHING_MAX + 3))
    assert len(queued) == REFRESHING_MAX

    def failing() -> str:
        raise OSError("disk I/O error")

    held2, queued2 = stale_held(now := [0.0])
    held2.get(("a", "notebook"), lambda: "v1")
    held2._values[("a", "notebook")] = (0.0, "v1", failing)  # its store fails from now on
    now[0] = 3.0
    assert held2.get(("a", "notebook"), lambda: "unused") == "v1"
    queued2.pop()()
    assert held2.get(("a", "notebook"), lambda: "unused") == "v1" and len(queued2) == 1  # tried again


def test_a_pool_that_refuses_work_leaves_the_request_to_read() -> None:
    def refused(fn: Callable[[], None]) -> None:
        raise RuntimeError("cannot schedule new futures after shutdown")

    now, reads = [0.0], []
    held = Held(held_s=2.0, clock=lambda: now[0], refresh=refused)
    held.get(("a", "notebook"), lambda: reads.append(1))
    now[0] = 3.0
    assert held.has(("a", "notebook"))  # used once more; the refused read again is forgotten, tried at the next use
    held.get(("a", "notebook"), lambda: reads.append(1))
    assert reads == [1]


async def test_a_paced_agent_is_never_kept_waiting_and_still_sees_ruyi_memo(make_proxy: MakeProxy, fake: FakeUpstream, data_dir: Path) -> None:
    """Through a real proxy: with every held read past ``held_s`` (0 here; 2 s by default, an agent sending every second
    met it on every other request), requests of a known session stay on the loop, the reads are made again in the
    background, and what ``ruyi memo`` wrote to the store's file meanwhile reaches the model on a following request."""
    proxy = await make_proxy(store={"data_dir": str(data_dir)})
    keeper: Keeper = proxy.app[appkeys.KEEPER]
    keeper.held.held_s = 0.0
    assert main(["memo", "add", "user", "prefers small diffs", "--agent", "a"]) == 0
    await chat(proxy, conversation(0))
    assert "prefers small diffs" in fake.last().json["messages"][0]["content"]
    assert main(["memo", "add", "env", "runs Python 3.12", "--agent", "a"]) == 0  # the store's file, not the proxy
    seen = []
    for turns in range(1, 8):
        await chat(proxy, conversation(turns))
        seen.append("runs Python 3.12" in json.dumps(fake.last().json["messages"]))
        for _ in range(200):  # the read again, in a worker thread
            if not keeper.held._refreshing:
                break
            await asyncio.sleep(0.01)
    assert all(seen[1:]), seen  # at most the first request after the write still had the held read
    async with aiohttp.ClientSession() as http, http.get(base_url(proxy) + "/ruyi/v1/stats") as resp:
        stats = await resp.json()
    assert stats["memory"]["read_again"] >= 3
    assert stats["rewrites_in_thread"].get("store_reads", 0) == 0, stats["rewrites_in_thread"]
    assert stats["rewrites"]["on_loop"] >= 5


def test_reads_no_use_can_take_are_forgotten() -> None:
    """Issue 27 (memory flat after warm-up): a session's snapshot was held until ``AGENTS_HELD`` newer reads pushed it
    out, though nothing could use it after ``held_s`` (put by the keeper: no read to make again) or ``stale_s``."""
    now = [0.0]
    held = Held(held_s=2.0, stale_s=30.0, clock=lambda: now[0], refresh=lambda job: None)
    held.put(("a", "snapshot", "s1"), "snapshot one")
    held.get(("a", "notebook"), lambda: "notebook")
    now[0] = 1.0
    held.get(("b", "anchors"), lambda: "anchors")
    assert held.forget_idle(0.0, 0.0, 100) == 0  # all within held_s
    now[0] = 2.5
    assert held.forget_idle(0.0, 0.0, 100) == 1  # the snapshot: past held_s, nothing to read it again with
    assert held.has(("a", "notebook")) and held.has(("b", "anchors"))  # stale, still used while read again
    now[0] = 31.5
    assert held.forget_idle(0.0, 0.0, 1) == 1 and held.forget_idle(0.0, 0.0, 100) == 1
    assert not held._values
