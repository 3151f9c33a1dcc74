"""Every agent Ruyi knows, with its sessions and when it was last active: where a keyless client's sessions landed."""

from __future__ import annotations

from typing import Any


def agents(registry: Any) -> list[dict[str, Any]]:
    """(agent, sessions, last activity) for every agent with a session, most recently active first: the store's
    (what is unsaved written first) and memory's. ``registry``: a SessionRegistry, or its serialized wrapper
    (then the whole read holds its lock). Store I/O: call it off the event loop."""
    lock = getattr(registry, "lock", None)
    inner = getattr(registry, "registry", registry)
    if lock is None:
        return _agents(inner)
    with lock:
        return _agents(inner)


def _agents(registry: Any) -> list[dict[str, Any]]:
    found: dict[str, tuple[int, float]] = {}
    store = registry.store
    if store is not None:
        registry.flush()
        found = {agent: (n, last) for agent, n, last in store.agents()}
    for agent_id, held in list(registry._agents.items()):
        sessions = list(held.sessions.values())
        if not sessions:
            continue
        n, last = found.get(agent_id, (0, 0.0))
        found[agent_id] = (max(n, len(sessions)), max(last, max(s.last_seen for s in sessions)))
    rows = [{"agent_id": a, "sessions": n, "last_seen": last} for a, (n, last) in found.items()]
    return sorted(rows, key=lambda r: (-r["last_seen"], r["agent_id"]))
