"""The registry of a replica: a copy in memory is trusted only while the store holds its version; the lock names the session."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from config.load import load_config
from memory.chain import chain_of
from memory.session import How
from memory.sessions import SessionRegistry
from memory.shared import Relocate, SharedRegistry
from memory.store.base import Store

CONFIG = load_config(None, {})


def conversation(turns: int) -> list[dict[str, Any]]:
    messages: list[dict[str, Any]] = [{"role": "system", "content": "be brief"}, {"role": "user", "content": "fix the bug"}]
    for i in range(turns):
        messages += [{"role": "assistant", "content": f"step {i}"}, {"role": "user", "content": f"ok {i}"}]
    return messages


MakeStore = Callable[[], Store]


def replica(make_store: MakeStore, shared: bool = True) -> SessionRegistry:
    """A process's registry: its own connection to the one store (SQLite's file, PostgreSQL's database)."""
    kind = SharedRegistry if shared else SessionRegistry
    return kind(CONFIG.sessions, store=make_store())


def step(registry: SessionRegistry, turns: int, decide: dict[str, Any] | None = None, locked: str | None = None) -> Any:
    """One request: resolve (under the lock `locate` names), decide, write before forwarding."""
    chain = chain_of(conversation(turns))
    if isinstance(registry, SharedRegistry):
        locked = locked or registry.locate("agent", chain)
        resolution = registry.resolve("agent", chain, locked=locked)
    else:
        resolution = registry.resolve("agent", chain)
    s = resolution.session
    assert registry.decide("agent", s.session_id, decide or {}, {}) if decide else registry.flush()
    return resolution


def test_a_replica_reads_back_a_session_another_wrote_since(make_store: MakeStore) -> None:
    a, b = replica(make_store), replica(make_store)
    sid = step(a, 1).session.session_id
    step(a, 2, {"link-a": [{"target": "content", "new_text": "[ruyi: a]"}]})
    moved = step(b, 3, {"link-b": [{"target": "content", "new_text": "[ruyi: b]"}]})
    assert moved.session.session_id == sid and moved.how == How.CONTINUED and "link-a" in moved.session.decisions
    again = step(a, 4)
    assert again.session.session_id == sid and again.how == How.CONTINUED
    assert set(again.session.decisions) == {"link-a", "link-b"}  # b's decision, not a's stale copy
    assert again.session.requests == 4 and a.reloads == 1
    assert a.store.session_version("agent", sid) == again.session.version  # type: ignore[union-attr]


def test_without_the_version_check_a_stale_copy_would_be_trusted(make_store: MakeStore) -> None:
    """What the check prevents: a plain registry keeps using its own copy."""
    a, b = replica(make_store, shared=False), replica(make_store)
    step(a, 1)
    step(b, 2, {"link-b": [{"target": "content", "new_text": "[ruyi: b]"}]})
    assert "link-b" not in a.resolve("agent", chain_of(conversation(3))).session.decisions


def test_every_write_moves_the_version_even_from_a_stale_copy(make_store: MakeStore) -> None:
    a, b = replica(make_store), replica(make_store)
    s = step(a, 1).session
    assert s.version == 1 == a.store.session_version("agent", s.session_id)  # type: ignore[union-attr]
    step(b, 2)
    stale = a._agents["agent"].sessions[s.session_id]  # what a's memory still holds
    assert stale.version == 1 and a.store.session_version("agent", s.session_id) == 2  # type: ignore[union-attr]
    a.record("agent", s.session_id, tier="prune")  # written without the lock, from the stale copy
    a.flush()
    assert a.store.session_version("agent", s.session_id) == 3 != stale.version  # type: ignore[union-attr]


def test_resolving_under_another_sessions_lock_changes_nothing(make_store: MakeStore) -> None:
    a = replica(make_store)
    s = step(a, 1).session
    with pytest.raises(Relocate) as raised:
        a.resolve("agent", chain_of(conversation(2)), locked="someone-else")
    assert raised.value.session_id == s.session_id
    assert s.requests == 1 and len(s.links) == len(conversation(1))


def test_a_replica_never_resolves_on_the_event_loop(make_store: MakeStore) -> None:
    from memory.chain_index import NeedsStore

    a = replica(make_store)
    step(a, 1)
    with pytest.raises(NeedsStore):
        a.resolve("agent", chain_of(conversation(2)), stored=False)


def test_a_session_removed_by_another_replica_is_not_brought_back(make_store: MakeStore) -> None:
    a, b = replica(make_store), replica(make_store)
    sid = step(a, 1).session.session_id
    assert step(b, 2).session.session_id == sid  # b holds a copy now
    a.forget("agent", sid)  # DELETE /ruyi/v1/sessions/<id> on replica a
    again = step(b, 3)
    assert again.session.session_id != sid and again.how == How.NEW
    assert b.store.session_version("agent", sid) is None  # type: ignore[union-attr]
