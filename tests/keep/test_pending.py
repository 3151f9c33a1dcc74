"""What a session's answers have still to teach the keeper: an archive waits for it, bounded; nothing else waits."""

from __future__ import annotations

import asyncio
import threading

from proxy.keep.pending import Pending

KEY = ("agent", "session")


def wait_in_thread(pending: Pending, timeout: float) -> tuple[threading.Thread, list[bool]]:
    said: list[bool] = []
    thread = threading.Thread(target=lambda: said.append(pending.wait(KEY, timeout)), daemon=True)
    thread.start()
    return thread, said


def test_an_archive_waits_until_every_answer_is_remembered() -> None:
    pending = Pending()
    pending.expect(KEY)
    pending.expect(KEY)
    thread, said = wait_in_thread(pending, 60)
    pending.done(KEY)
    thread.join(0.3)
    assert thread.is_alive()  # one answer still to remember (a bound of 60 s is far off)
    pending.done(KEY)
    thread.join(30)
    assert said == [True] and len(pending) == 0


def test_a_keeper_that_never_finishes_holds_an_archive_only_for_its_bound() -> None:
    pending = Pending()
    pending.expect(KEY)  # never done: a stalled store
    thread, said = wait_in_thread(pending, 0.05)
    thread.join(30)
    assert said == [False]
    assert pending.wait(("agent", "other"), 60)  # another session never waits


async def test_on_the_event_loop_it_only_looks() -> None:
    pending = Pending()
    pending.expect(KEY)
    assert pending.wait(KEY, 60) is False  # returns at once: the loop never blocks
    await asyncio.sleep(0)


def test_a_wait_that_runs_out_is_counted_and_one_on_the_loop_is_not() -> None:
    """An archive that stopped waiting for the keeper forwarded what it had so far: counted (GET /ruyi/v1/stats,
    ``memory.archives_unsettled``) so a replay that differs can be told from one that should not."""
    pending = Pending()
    assert pending.wait(KEY, 0.01) and pending.overdue == 0  # nothing pending: settled at once
    pending.expect(KEY)
    assert not pending.wait(KEY, 0.01) and pending.overdue == 1

    async def on_the_loop() -> bool:
        return pending.wait(KEY)  # never waits on the loop, and that is not an archive giving up

    assert asyncio.run(on_the_loop()) is False and pending.overdue == 1
    pending.done(KEY)
    assert pending.wait(KEY, 0.01) and pending.overdue == 1
