"""Sessions from an agent's own ids: Claude Code's ``X-Claude-Code-Session-Id``, opencode's ``x-opencode-session``.

An agent's id is not a Ruyi session: Claude Code sends the same id on its sub-agents' and side requests (a title,
a quota check), which are sessions of their own. So the chain index decides first, as without the id; the id only
finds the session a request resumes when its history no longer continues it byte for byte (``claude -c`` rewrites
its reminders), provided the request still carries most of that session's messages. The id maps to the busiest
session seen with it (the main conversation, not its side requests)."""

from __future__ import annotations

import threading
from collections.abc import Mapping, Sequence

from memory.chain import MessageChain
from memory.lru import LRU
from memory.session import Session

AGENT_SESSION_HEADERS = ("X-Claude-Code-Session-Id", "x-opencode-session")
"""Headers that carry an agent's own session id, in the order they are read."""
MAX_ID_CHARS = 200
KEPT = 10_000
"""(agent, agent's id) pairs remembered (the oldest go first)."""
RESUME_SHARED = 3
"""Messages a resumed request must still carry of its session (and at least half of them)."""


def agent_session_of(headers: Mapping[str, str]) -> str | None:
    """The agent's own session id, if it sent one (bounded, printable)."""
    for name in AGENT_SESSION_HEADERS:
        value = headers.get(name) or headers.get(name.lower())
        if isinstance(value, str) and value.strip() and len(value) <= MAX_ID_CHARS and value.isprintable():
            return value.strip()
    return None


def resumes(digests: Sequence[bytes], first_non_system: int, session_digests: Sequence[bytes]) -> bool:
    """Whether a request carries enough of a session's messages (their content digests: chain links change with the
    first message) to continue it (a resumed conversation)."""
    known = set(session_digests[first_non_system:])
    hits = sum(1 for d in set(digests[first_non_system:]) if d in known)
    return hits >= RESUME_SHARED and 2 * hits >= len(known)


class AgentIds:
    """(agent, the agent's session id) → the Ruyi session with the most requests seen under it, and the content
    digests of its latest request (in memory: after a restart of Ruyi the chain index alone decides)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._map: LRU[tuple[str, str], tuple[str, int, tuple[bytes, ...]]] = LRU(KEPT)

    def get(self, agent_id: str, agent_session: str) -> tuple[str, tuple[bytes, ...]] | None:
        """The session this id maps to and its latest request's message digests."""
        with self._lock:
            found = self._map.peek((agent_id, agent_session))
        return (found[0], found[2]) if found is not None else None

    def resumed(self, agent_id: str, agent_session: str | None, chain: MessageChain) -> str | None:
        """The session a request resumes (to resolve it by, as if named in X-Ruyi-Session): the one its agent's id maps
        to, when the request does not simply continue it (the chain index finds that) but still carries most of it."""
        found = self.get(agent_id, agent_session) if agent_session is not None else None
        if found is None:
            return None
        session_id, known = found
        if tuple(chain.digests[: len(known)]) == known:
            return None  # a plain continuation (or the same request again): the chain index decides
        return session_id if resumes(chain.digests, chain.first_non_system, known) else None

    def seen(self, agent_id: str, agent_session: str | None, session: Session, chain: MessageChain) -> None:
        """A request with this agent's id was resolved to ``session``: the id maps to it if it is the busiest one."""
        if agent_session is None:
            return
        key, session_id, requests, digests = (agent_id, agent_session), session.session_id, session.requests, chain.digests
        with self._lock:
            found = self._map.get(key)  # a hit is the most recent now, whether or not it is replaced
            if found is None or found[0] == session_id or requests > found[1]:
                self._map[key] = (session_id, requests, tuple(digests))
