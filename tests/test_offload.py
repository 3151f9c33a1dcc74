"""A session's turns: rewrites one after the other, and the next rewrite after what the previous answer taught."""

from __future__ import annotations

import threading

from proxy.offload import SessionTurns

KEY = ("agent", "session")


def enter_in_thread(turns: SessionTurns) -> tuple[threading.Thread, threading.Event]:
    """A request's rewrite entering its turn in a worker thread; the event is set once it is in."""
    inside = threading.Event()

    def rewrite() -> None:
        with turns.enter(KEY):
            inside.set()

    thread = threading.Thread(target=rewrite, daemon=True)
    thread.start()
    return thread, inside


def test_the_next_rewrite_waits_for_what_the_answer_taught() -> None:
    turns = SessionTurns()
    with turns.enter(KEY):
        pass
    remembering = turns.after_answer(KEY, wait_s=60)
    nxt = turns.enter(KEY)
    assert not nxt.ready()  # on the loop: the rewrite goes to a worker thread, which waits
    remembering.end()
    assert nxt.ready()
    nxt.end()
    assert len(turns) == 0  # nothing kept once the session is idle


def test_a_rewrite_waits_in_its_thread_until_the_keeper_is_done() -> None:
    turns = SessionTurns()
    remembering = turns.after_answer(KEY, wait_s=60)
    thread, inside = enter_in_thread(turns)
    assert not inside.wait(0.3)  # still held (a bound of 60 s is far off)
    remembering.end()
    thread.join(30)
    assert inside.is_set()


def test_a_keeper_that_never_ends_holds_the_session_only_for_its_bound() -> None:
    turns = SessionTurns()
    turns.after_answer(KEY, wait_s=0.05)  # never ended: a stalled store
    thread, inside = enter_in_thread(turns)
    thread.join(30)
    assert inside.is_set()


def test_past_its_bound_the_next_rewrite_still_follows_the_rewrite_before() -> None:
    """An answer's turn taken while another request of the session is being rewritten (parallel requests): past the
    answer's bound, the next rewrite still waits for that rewrite, so decisions stay sticky."""
    turns = SessionTurns()
    rewriting = turns.enter(KEY)
    turns.after_answer(KEY, wait_s=0.05)  # never ended
    thread, inside = enter_in_thread(turns)
    assert not inside.wait(0.5)
    rewriting.end()
    thread.join(30)
    assert inside.is_set()
