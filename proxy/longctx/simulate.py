"""What Ruyi would forward for a request, simulated without deciding anything (for ``count_tokens``).

An agent that compacts on that count (Claude Code) then sees the session as Ruyi keeps it, not as the client holds it."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from memory.chain import MessageChain
from proxy.longctx.restart import in_force, restart


def pruned(tokens: Sequence[int], links: Sequence[str], decisions: Mapping[str, Any]) -> list[int]:
    """Each message's raw tokens once the session's pruning decisions on it are applied."""
    out = list(tokens)
    for i, link in enumerate(links):
        for d in decisions.get(link, ()) if link in decisions else ():
            if isinstance(d, Mapping):
                out[i] -= int(d.get("tokens_saved", 0))
    return [max(0, n) for n in out]


def continued(registry: Any, agent_id: str, chain: MessageChain) -> Any:
    """The session whose latest request this one continues (found, never advanced nor created), or None."""
    inner = getattr(registry, "registry", registry)
    lock = getattr(registry, "lock", None)
    if lock is not None:
        with lock:
            return continued(inner, agent_id, chain)
    agent = inner._agents.get(agent_id)
    found = inner._find(agent_id, agent.tips if agent is not None else {}, inner._unsaved.tips, chain.links, 0, tips=True, stored=True)
    return found[1] if found is not None else None


def forwarded_raw(
    registry: Any, agent_id: str, messages: Sequence[Mapping[str, Any]], chain: MessageChain, message_tokens: Sequence[int], raw_total: int
) -> int | None:
    """The raw tokens Ruyi would forward for these messages: the archive in force applied and the pruning in force
    subtracted, for the session they continue; None when they continue no session (Ruyi would forward them as sent,
    until its own thresholds say otherwise). Reads the store: off the event loop."""
    session = continued(registry, agent_id, chain)
    if session is None or len(message_tokens) != len(chain.links):
        return None
    decisions = session.decisions
    links: Sequence[str] = chain.links
    per: Sequence[int] = message_tokens
    current = in_force(decisions, links)
    if current is not None:
        view = restart(messages, links, 0, message_tokens, raw_total, raw_total, current)
        links, per = view.links, view.message_tokens
    return max(0, raw_total - sum(message_tokens) + sum(pruned(per, links, decisions)))
