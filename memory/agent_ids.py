"""Sessions from an agent's own ids: Codex's, a ``prompt_cache_key``, Claude Code's, opencode's, a Responses answer's.

Codex sends ``thread-id`` / ``session-id`` headers and the same id as the Responses body's ``prompt_cache_key``; Claude
Code ``X-Claude-Code-Session-Id``; opencode ``x-opencode-session``.

A conversation's own id (Codex's; ``prompt_cache_key``) names the Ruyi session, within the caller's agent, as
X-Ruyi-Session would: two ids are two sessions even when their requests start alike, and an id seen again (after its
own compaction rewrote the history, after a restart) is the same session. A Responses request chained by
``previous_response_id`` (its history at the provider, its body only the new items) belongs to the session of the
answer it names. Without any of these, the chain index decides.

Claude Code's id is not a Ruyi session: Claude Code sends the same id on its sub-agents' and side requests (a title,
a quota check), which are sessions of their own. So the chain index decides first, as without the id; the id only
finds the session a request resumes when its history no longer continues it byte for byte (``claude -c`` rewrites
its reminders), provided the request still carries most of that session's messages. The id maps to the busiest
session seen with it (the main conversation, not its side requests)."""

from __future__ import annotations

import threading
from collections.abc import Mapping, Sequence
from typing import Any

from memory.chain import MessageChain
from memory.identity import SESSION_HEADER, session_header
from memory.lru import LRU
from memory.session import Session

AGENT_SESSION_HEADERS = ("X-Claude-Code-Session-Id", "x-opencode-session")
"""Headers that carry an agent's own session id, in the order they are read."""
CONVERSATION_HEADERS = ("thread-id", "session-id", "session_id")
"""Headers that carry one conversation's id, in the order they are read: Codex 0.171 sends ``thread-id`` and
``session-id`` (equal on its main thread; the thread's is read first, as the narrower), older Codex ``session_id``."""
CONVERSATION_FIELD = "prompt_cache_key"
"""The body's field that carries it (the Responses API's, and chat completions'): Codex sets it to its thread's id."""
CHAINED_FIELD = "previous_response_id"
"""The body's field naming the answer a request continues (the Responses API's)."""
MAX_ID_CHARS = 200
KEPT = 10_000
"""(agent, agent's id) pairs, and (agent, answer id) pairs, remembered (the oldest go first)."""
RESUME_SHARED = 3
"""Messages a resumed request must still carry of its session (and at least half of them)."""


def _usable(value: object) -> str | None:
    if isinstance(value, str) and value.strip() and len(value) <= MAX_ID_CHARS and value.isprintable():
        return value.strip()
    return None


def agent_session_of(headers: Mapping[str, str]) -> str | None:
    """The agent's own session id, if it sent one (bounded, printable)."""
    for name in AGENT_SESSION_HEADERS:
        found = _usable(headers.get(name) or headers.get(name.lower()))
        if found is not None:
            return found
    return None


def conversation_of(headers: Mapping[str, str], body: Mapping[str, Any]) -> str | None:
    """The conversation's own id (Codex's headers, else the body's ``prompt_cache_key``), as the Ruyi session's name:
    bounded as an X-Ruyi-Session value is (a long or secret-looking one becomes a short hash of it)."""
    for name in CONVERSATION_HEADERS:
        found = _usable(headers.get(name))
        if found is not None:
            return session_header({SESSION_HEADER: found})
    found = _usable(body.get(CONVERSATION_FIELD))
    return session_header({SESSION_HEADER: found}) if found is not None else None


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
        self._answers: LRU[tuple[str, str], str] = LRU(KEPT)
        """(agent, an answer's id) → the session it answered (for requests chained by ``previous_response_id``)."""

    def get(self, agent_id: str, agent_session: str) -> tuple[str, tuple[bytes, ...]] | None:
        """The session this id maps to and its latest request's message digests."""
        with self._lock:
            found = self._map.peek((agent_id, agent_session))
        return (found[0], found[2]) if found is not None else None

    def named(self, agent_id: str, headers: Mapping[str, str], body: Mapping[str, Any], chain: MessageChain) -> str | None:
        """The session an agent's own ids name (to resolve the request by, as if named in X-Ruyi-Session): the
        conversation's id where it sent one, else the one a resumed Claude Code conversation continues; None: the chain
        index decides."""
        return conversation_of(headers, body) or self.chained_from(agent_id, body) or self.resumed(agent_id, agent_session_of(headers), chain)

    def chained_from(self, agent_id: str, body: Mapping[str, Any]) -> str | None:
        """The session of the answer a request chains from (``previous_response_id``), if this Ruyi relayed it."""
        previous = body.get(CHAINED_FIELD)
        if not isinstance(previous, str) or not previous:
            return None
        with self._lock:
            return self._answers.peek((agent_id, previous))

    def answered(self, agent_id: str, answer_id: str | None, session_id: str) -> None:
        """An answer with its own id (a Responses API response's) came back for a request of ``session_id``."""
        if answer_id is None or len(answer_id) > MAX_ID_CHARS:
            return
        key = (agent_id, answer_id)
        with self._lock:
            self._answers[key] = session_id

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
