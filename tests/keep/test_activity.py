"""Requests in flight keep an agent busy: compaction waits for it to be idle."""

from __future__ import annotations

from proxy.keep.activity import Activity


def test_an_agent_is_idle_only_with_nothing_of_it_in_flight_for_long_enough() -> None:
    now = [100.0]
    activity = Activity(clock=lambda: now[0])
    assert activity.idle("a", 30)
    with activity.busy("a/sub"):
        assert not activity.idle("a", 0) and activity.idle("b", 0) and activity.idle("ab", 0)
    assert not activity.idle("a", 30) and activity.idle("a", 0)
    now[0] = 130.0
    assert activity.idle("a", 30)


def test_agents_idle_past_forget_s_are_forgotten_and_still_idle() -> None:
    """Issue 27: one entry per agent ever seen was kept forever; only agents that ``idle`` can still tell apart are."""
    now = [0.0]
    activity = Activity(clock=lambda: now[0], forget_s=30)
    for i in range(10_000):
        now[0] = float(i)
        with activity.busy(f"agent-{i}"):
            pass
    assert len(activity) <= 31  # those that ended in the last 30 s, not 10,000
    assert activity.idle("agent-0", 30) and not activity.idle("agent-9999", 30) and not activity.idle("agent-9980", 30)
    with activity.busy("agent-5"):  # one in flight is never forgotten, however long it runs
        now[0] += 1000.0
        activity.idle("other", 30)
        assert not activity.idle("agent-5", 0) and len(activity) == 1
    assert len(activity) == 1 and not activity.idle("agent-5", 1)
