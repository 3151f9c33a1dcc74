"""The registry over a real store (SQLite and PostgreSQL): restarts resolve and rewrite exactly as an uninterrupted run; isolation; expiry."""

from __future__ import annotations

import copy
import json
import random
import sqlite3
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from config.load import load_config
from memory.chain import chain_of
from memory.chain_index import NeedsStore
from memory.session import How, SessionOptions
from memory.sessions import SessionRegistry
from memory.store.base import Report, Store
from memory.store.sqlite_store import SQLiteStore
from proxy.know.tokens import TokenCounter
from proxy.replay.offline import OfflineRuyi
from tests.traces import load, requests_of, trace_files

Messages = list[dict[str, Any]]
CONFIG = load_config(None, {})
WINDOW = 8000


MakeStore = Callable[..., Store]


def durable(make_store: MakeStore, **kw: Any) -> SessionRegistry:
    return SessionRegistry(CONFIG.sessions, store=make_store(), **kw)


def replay(requests: list[Messages], make_store: MakeStore | None, restart_every: int = 0) -> list[str]:
    """Each request's forwarded messages (as JSON); with a store, flushed before 'forwarding', reopened
    (a new process: new registry and fingerprints; token counts are a pure cache, shared for speed)
    every `restart_every` requests."""
    out: list[str] = []
    ruyi = None
    counter = TokenCounter(CONFIG.tokens)
    for i, request in enumerate(requests):
        if ruyi is None or (restart_every and i % restart_every == 0):
            if ruyi is not None and ruyi.sessions.store is not None:
                ruyi.sessions.store.close()  # no flush: what was flushed before forwarding is all there is
            ruyi = OfflineRuyi(CONFIG, "gpt-4o", WINDOW, counter)
            if make_store is not None:
                ruyi.sessions = durable(make_store)
        out.append(json.dumps(ruyi(request)))
        ruyi.sessions.flush()
    return out


@pytest.mark.parametrize("trace", trace_files()[:4], ids=lambda p: p.name[:40])
def test_restarts_rewrite_byte_for_byte_like_an_uninterrupted_run(trace: Path, make_store: MakeStore) -> None:
    requests = requests_of(load(trace)["messages"])
    expected = replay(requests, None)
    assert replay(requests, lambda: make_store("every5"), restart_every=5) == expected
    if len(requests) < 50:
        assert replay(requests, lambda: make_store("every1"), restart_every=1) == expected
    assert any("[ruyi:" in forwarded or "<ruyi-archive" in forwarded for forwarded in expected), "the trace exercises sticky decisions"


def test_a_child_after_a_restart_inherits_decisions_and_refs(make_store: MakeStore) -> None:
    trace = load(trace_files()[0])["messages"]
    registry = durable(make_store)
    parent = [registry.resolve("a", chain_of(r)) for r in requests_of(trace[:30])][-1].session
    links = parent.links
    decision = [{"target": "content", "new_text": "[gone]", "ref_id": "r1", "strategy": "dedup", "tokens_saved": 9}]
    registry.record("a", parent.session_id, decisions={links[3]: decision, links[20]: decision}, refs={"r1": "the original"})
    assert registry.flush()
    registry.store.close()  # type: ignore[union-attr]
    again = durable(make_store)
    rewound = trace[:10] + [{"role": "assistant", "content": "Let me try another way."}, {"role": "user", "content": "go on"}]
    child = again.resolve("a", chain_of(rewound))
    assert (child.how, child.shared, child.session.parent_id) == (How.CHILD, 10, parent.session_id)
    assert child.session.decisions == {links[3]: decision}
    again.flush()
    again.store.close()  # type: ignore[union-attr]
    third = durable(make_store)
    assert third.get("a", child.session.session_id).decisions == {links[3]: decision}  # type: ignore[union-attr]
    assert third.find_ref("a", "r1") == "the original"
    assert third.resolve("a", chain_of(trace[:32])).session.session_id == parent.session_id


def test_sessions_dropped_from_memory_are_read_back(make_store: MakeStore) -> None:
    trace = load(trace_files()[0])["messages"]
    registry = SessionRegistry(SessionOptions(max=2), store=make_store())
    first = registry.resolve("a", chain_of(trace[:5]))
    for i in range(3):
        registry.resolve("a", chain_of([{"role": "user", "content": f"task {i}"}]))
    assert len(registry) == 2
    again = registry.resolve("a", chain_of(trace[:7]))
    assert (again.how, again.session.session_id, again.shared, again.session.requests) == (How.CONTINUED, first.session.session_id, 5, 2)
    assert len(registry.list("a")) == 4


def test_agents_never_see_each_other_in_the_store(make_store: MakeStore) -> None:
    trace = load(trace_files()[0])["messages"]
    registry = durable(make_store)
    a = registry.resolve("alice", chain_of(trace[:10])).session
    registry.record("alice", a.session_id, refs={"ref-a": "alice's original"})
    registry.flush()
    registry.store.close()  # type: ignore[union-attr]
    bob = durable(make_store)
    assert bob.get("bob", a.session_id) is None and bob.list("bob") == [] and bob.find_ref("bob", "ref-a") is None
    assert bob.resolve("bob", chain_of(trace[:12])).how == How.NEW  # alice's chain index is not bob's
    mine = bob.resolve("bob", chain_of(trace[:3]), session_id=a.session_id).session  # the same id, bob's own session
    assert mine.requests == 1 and bob.get("alice", a.session_id).requests == 1  # type: ignore[union-attr]
    assert bob.find_ref("alice", "ref-a") == "alice's original"


def test_sessions_and_refs_expire_after_ttl(make_store: MakeStore) -> None:
    now = [1_000_000.0]
    registry = SessionRegistry(SessionOptions(ttl_days=14), clock=lambda: now[0], store=make_store())
    old = registry.resolve("a", chain_of([{"role": "user", "content": "old task"}])).session
    registry.record("a", old.session_id, refs={"old-ref": "x"})
    now[0] += 10 * 86400
    fresh = registry.resolve("a", chain_of([{"role": "user", "content": "fresh task"}])).session
    registry.record("a", fresh.session_id, refs={"fresh-ref": "y"})
    now[0] += 5 * 86400  # old: 15 days unseen; fresh: 5
    assert registry.expire() == 1
    assert registry.get("a", old.session_id) is None and registry.find_ref("a", "old-ref") is None
    assert registry.get("a", fresh.session_id) is not None and registry.find_ref("a", "fresh-ref") == "y"
    assert registry.resolve("a", chain_of([{"role": "user", "content": "old task"}])).how == How.NEW


def test_a_failed_write_fails_open_and_is_retried(tmp_path: Path) -> None:
    """SQLite: another process holding the write lock (PostgreSQL has no such lock: its writers do not wait for each other)."""
    path = tmp_path / "r.db"
    registry = SessionRegistry(store=SQLiteStore(path, busy_timeout_ms=0))
    s = registry.resolve("a", chain_of([{"role": "user", "content": "task"}])).session
    other = sqlite3.connect(path, isolation_level=None)  # another process holding the write lock
    other.execute("BEGIN IMMEDIATE")
    assert registry.flush() is False and s.requests == 1
    other.execute("ROLLBACK")
    assert registry.flush() is True
    assert SQLiteStore(path).load_session("a", s.session_id) is not None


def test_reports_and_usage_go_to_the_queue(make_store: MakeStore) -> None:
    queued: list[Any] = []
    registry = SessionRegistry(store=make_store(), queue=queued.append)
    s = registry.resolve("a", chain_of([{"role": "user", "content": "task"}])).session
    registry.flush()
    registry.record("a", s.session_id, upstream_prompt_tokens=10, cached_tokens=5, calibration=1.1)
    assert not registry._unsaved  # usage alone waits for the queue, not for a flush
    registry.record("a", s.session_id, report={"request_id": "r1", "batch": "none"})
    registry.record("a", s.session_id, report={"request_id": "r1", "batch": "overflow", "overflow_retry": True})
    assert [type(q).__name__ for q in queued] == ["Usage", "Report", "Report"]
    assert [q.key for q in queued if isinstance(q, Report)] == ["r1", "r1/retry"]


def test_decisions_are_copies_in_memory_and_equal_after_reload(make_store: MakeStore) -> None:
    registry = durable(make_store)
    s = registry.resolve("a", chain_of([{"role": "user", "content": "task \ud800 with a lone surrogate"}])).session
    decision = [{"target": "content", "new_text": "caf\u00e9 \ud83d", "ref_id": "r", "strategy": "s", "tokens_saved": 3}]
    registry.record("a", s.session_id, decisions={s.links[0]: copy.deepcopy(decision)}, refs={"r": "orig \udc80"})
    registry.flush()
    registry.store.close()  # type: ignore[union-attr]
    again = durable(make_store)
    assert again.get("a", s.session_id).decisions == {s.links[0]: decision}  # type: ignore[union-attr]
    assert again.find_ref("a", "r") == "orig \udc80"


@pytest.mark.parametrize("seed", range(6))
def test_random_histories_resolve_alike_with_restarts_and_a_tiny_cache(seed: int, make_store: MakeStore) -> None:
    """Continuations, rewinds, rewritten histories, explicit session ids, two agents: a registry over the
    store that restarts at random and keeps 3 sessions in memory answers exactly as one that never forgets."""
    rng = random.Random(seed)
    threads = [
        [{"role": "system", "content": "sys"}, {"role": "user", "content": f"task {t}"}]
        + [{"role": "assistant" if i % 2 == 0 else "user", "content": f"t{t} m{i}"} for i in range(30)]
        for t in range(3)
    ]
    reference = SessionRegistry(SessionOptions(max=10_000))
    durable_one = SessionRegistry(SessionOptions(max=3), store=make_store())
    same: dict[str, str] = {}  # reference session id → durable session id
    for step in range(120):
        agent = rng.choice(["a", "b"])
        messages = copy.deepcopy(rng.choice(threads)[: rng.randint(2, 32)])
        if rng.random() < 0.2 and len(messages) > 4:  # a rewind or a rewritten history
            messages[rng.randrange(2, len(messages))]["content"] = f"changed at {step}"
        header = rng.choice([None, None, None, "h1", "h2"])
        chain = chain_of(messages)
        want, got = reference.resolve(agent, chain, header), durable_one.resolve(agent, chain, header)
        same.setdefault(want.session.session_id, got.session.session_id)
        assert same[want.session.session_id] == got.session.session_id, step
        assert (want.how, want.shared, want.new_messages, want.session.requests) == (got.how, got.shared, got.new_messages, got.session.requests)
        assert same.get(want.session.parent_id or "", None) == (got.session.parent_id if want.session.parent_id else None)
        assert want.session.decisions == got.session.decisions, step
        if rng.random() < 0.4:
            link = rng.choice(chain.links)
            decision = {link: [{"target": "content", "new_text": f"[ruyi: {step}]", "ref_id": f"r{step}", "strategy": "s", "tokens_saved": 1}]}
            reference.record(agent, want.session.session_id, decisions=decision, refs={f"r{step}": "x"})
            durable_one.record(agent, got.session.session_id, decisions=decision, refs={f"r{step}": "x"})
        durable_one.flush()
        if rng.random() < 0.1:
            durable_one.store.close()  # type: ignore[union-attr]
            durable_one = SessionRegistry(SessionOptions(max=3), store=make_store())


def test_a_session_read_back_does_not_reclaim_a_tip_it_lost(make_store: MakeStore) -> None:
    messages = [{"role": "user", "content": "task"}, {"role": "assistant", "content": "ok"}]
    registry = durable(make_store)
    by_chain = registry.resolve("a", chain_of(messages)).session
    by_header = registry.resolve("a", chain_of(messages), session_id="h1").session  # the same messages: it takes the tip
    registry.flush()
    registry.store.close()  # type: ignore[union-attr]
    again = durable(make_store)
    assert again.get("a", by_chain.session_id) is not None  # read back first (an admin call, say)
    more = again.resolve("a", chain_of([*messages, {"role": "user", "content": "go on"}]))
    assert (more.how, more.session.session_id) == (How.CONTINUED, by_header.session_id)


@pytest.mark.parametrize("with_store", [False, True])
def test_an_expired_session_is_never_resumed_even_before_a_sweep(make_store: MakeStore, with_store: bool) -> None:
    now = [1_000_000.0]
    store = make_store() if with_store else None
    registry = SessionRegistry(SessionOptions(ttl_days=14), clock=lambda: now[0], store=store)
    task = [{"role": "user", "content": "task"}, {"role": "assistant", "content": "ok"}]
    old = registry.resolve("a", chain_of(task)).session
    registry.flush()
    now[0] += 15 * 86400
    again = registry.resolve("a", chain_of([*task, {"role": "user", "content": "and now?"}]))
    assert again.how == How.NEW and again.session.session_id != old.session_id
    assert registry.get("a", old.session_id) is None
    assert [s.session_id for s in registry.list("a")] == [again.session.session_id]


def test_memory_only_resolution_knows_when_the_store_could_know_more(make_store: MakeStore) -> None:
    """An agent first seen with nothing stored has a whole memory index: its sessions resolve without the store
    (``stored=False``, what the loop may do). After a restart, or once a session of it left memory, the store may
    know more: a memory-only resolve says so (NeedsStore) before changing anything, and the store's answer wins."""
    from memory.chain_index import NeedsStore

    task = [{"role": "user", "content": "task"}, {"role": "assistant", "content": "ok"}]
    more = [*task, {"role": "user", "content": "and then?"}]
    registry = SessionRegistry(SessionOptions(max=2), store=make_store())
    with pytest.raises(NeedsStore):
        registry.resolve("a", chain_of(task), stored=False)  # an agent never seen: is anything of it stored?
    first = registry.resolve("a", chain_of(task))
    assert registry.resolve("a", chain_of(more), stored=False).session is first.session  # a new message, no store read
    assert registry.flush()

    restarted = SessionRegistry(SessionOptions(max=2), store=make_store())
    restarted.resolve("a", chain_of([{"role": "user", "content": "another task"}]))  # the agent, seen again
    with pytest.raises(NeedsStore):
        restarted.resolve("a", chain_of([*more, {"role": "assistant", "content": "done"}]), stored=False)
    again = restarted.resolve("a", chain_of([*more, {"role": "assistant", "content": "done"}]))
    assert again.how == How.CONTINUED and again.session.session_id == first.session.session_id

    for i in range(3):  # sessions.max is 2: the first one leaves memory, the index is no longer whole
        registry.resolve("a", chain_of([{"role": "user", "content": f"other {i}"}]))
    with pytest.raises(NeedsStore):
        registry.resolve("a", chain_of([*more, {"role": "assistant", "content": "done"}]), stored=False)


def test_sessions_kept_in_memory_are_bounded_in_bytes_and_read_back(make_store: MakeStore) -> None:
    """sessions.max_mb: long sessions are dropped from memory by what their links hold, not only by their number,
    never the one being resolved; a dropped session continues from the store as before."""
    from memory.session import LINK_BYTES, SESSION_BYTES

    registry = SessionRegistry(SessionOptions(max=10_000, max_mb=1), store=make_store())
    long = [[{"role": "user", "content": f"task {t} step {i}"} for i in range(3_000)] for t in range(5)]
    first = registry.resolve("a", chain_of(long[0])).session
    for messages in long[1:]:
        registry.resolve("a", chain_of(messages))
    each = SESSION_BYTES + LINK_BYTES * 3_000
    assert len(registry) == (1 << 20) // each == 2  # 5 sessions of 3,000 messages: two fit in 1 MiB
    alone = SessionRegistry(SessionOptions(max_mb=1), store=make_store())
    huge = alone.resolve("a", chain_of([{"role": "user", "content": f"m{i}"} for i in range(10_000)]))
    assert len(alone) == 1 and huge.session.links  # larger than the bound alone: kept, as the request's own
    again = registry.resolve("a", chain_of([*long[0], {"role": "assistant", "content": "done"}]))
    assert (again.how, again.session.session_id, again.shared) == (How.CONTINUED, first.session_id, 3_000)


@pytest.mark.parametrize("stored", [True, False], ids=["store", "memory-only"])
def test_idle_sessions_leave_memory_and_their_next_request_reads_them_back(make_store: MakeStore, stored: bool) -> None:
    """Issue 27: with a store, a session unseen for ``sessions.idle_s`` leaves memory (the registry held every session
    until ``max_mb``, hours of traffic) and continues where it was; without one memory is all there is: it stays."""
    trace = load(trace_files()[0])["messages"]
    now = [0.0]
    registry = SessionRegistry(SessionOptions(idle_s=300), clock=lambda: now[0], store=make_store() if stored else None)
    first = registry.resolve("a", chain_of(trace[:5]))
    registry.flush()
    now[0] = 200.0
    registry.resolve("a", chain_of([{"role": "user", "content": "another task"}]))
    registry.flush()
    now[0] = 301.0
    assert registry.release_idle(10) == (1 if stored else 0)
    assert len(registry) == (1 if stored else 2)
    now[0] = 501.0
    assert registry.release_idle(10) == (1 if stored else 0)
    again = registry.resolve("a", chain_of(trace[:7]))
    assert (again.how, again.session.session_id, again.shared, again.session.requests) == (How.CONTINUED, first.session.session_id, 5, 2)
    assert len(registry.list("a")) == 2


def test_after_sessions_leave_memory_the_agents_other_requests_still_resolve_without_the_store(make_store: MakeStore) -> None:
    """Issue 27: once a session left memory the agent's index was no longer whole, and every later request of that
    agent asked the store (in a worker thread: 4,582 of a 10-minute soak's 11,999). The tips of the sessions that left
    are known: a request naming none of them resolves from memory; one continuing a session that left asks the store
    and continues it."""
    trace = load(trace_files()[0])["messages"]
    now = [0.0]
    registry = SessionRegistry(SessionOptions(idle_s=300), clock=lambda: now[0], store=make_store())
    left = registry.resolve("a", chain_of(trace[:5]))
    registry.flush()
    now[0] = 200.0
    task = [{"role": "user", "content": "another task"}]
    live = registry.resolve("a", chain_of(task))
    registry.flush()
    now[0] = 301.0
    assert registry.release_idle(10) == 1
    more = [*task, {"role": "assistant", "content": "on it"}, {"role": "user", "content": "go on"}]
    again = registry.resolve("a", chain_of(more), stored=False)  # no NeedsStore: resolved in memory
    assert (again.how, again.session.session_id) == (How.CONTINUED, live.session.session_id)
    with pytest.raises(NeedsStore):
        registry.resolve("a", chain_of(trace[:7]), stored=False)  # its tip is a session's that left
    back = registry.resolve("a", chain_of(trace[:7]))
    assert (back.how, back.session.session_id, back.shared) == (How.CONTINUED, left.session.session_id, 5)
    registry.flush()
    assert registry.resolve("a", chain_of(trace[:9]), stored=False).session.session_id == left.session.session_id  # in memory again
