"""Which session a chain link names: an agent's memory index first, then the store's (unsaved changes laid over it)."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, TypeVar

if TYPE_CHECKING:
    from memory.session import Session

S = TypeVar("S")

RECENT = 4
"""Links looked up first in the store, from a request's end (then all the others at once)."""


class AgentSessions:
    """One agent's sessions in memory and the indexes that find them by chain link."""

    def __init__(self, whole: bool = False) -> None:
        self.sessions: dict[str, Session] = {}
        self.tips: dict[str, str] = {}
        """Last link of a session's latest request → that session."""
        self.links: dict[str, str] = {}
        """Any link a session's requests held → the session that last added it."""
        self.whole = whole
        """The memory index holds all the store has of this agent (it had nothing stored when first seen here,
        and no session of it was evicted or read back since): lookups need not ask the store."""
        self.left_tips: set[str] | None = set() if whole else None
        """The tips of this agent's sessions that left memory, while they are all the store has of it that memory does
        not (it was whole when first seen here): a request whose newest links name none of them continues no session
        that left, and need not ask the store for its tip. None: not known (ask the store)."""


class NeedsStore(Exception):
    """A memory-only call (``stored=False``) needed the store: call again where store I/O may run."""


def needs_store(agent_id: str, links: Sequence[str]) -> dict[str, str]:
    """The ``lookup`` of a memory-only call: the store may not be read here."""
    raise NeedsStore(agent_id, len(links))


def find_session(
    agent_id: str,
    links: Sequence[str],
    low: int,
    memory: dict[str, str],
    unsaved: Mapping[tuple[str, str], str | None],
    lookup: Callable[[str, Sequence[str]], dict[str, str]] | None,
    session_of: Callable[[str], S | None],
) -> tuple[int, S] | None:
    """The highest i >= low whose link names a live session, and that session.

    ``memory`` holds a subset of the store's index (entries of sessions in memory), so its answer is a
    lower bound: only the links past it are looked up in the store (``lookup``; None without a store),
    the newest few first, where a continuing request finds its tip. ``unsaved`` entries (None: removed)
    win over the store's. Entries naming a session that is gone are dropped from ``memory``."""
    best: tuple[int, S] | None = None
    for i in range(len(links) - 1, low - 1, -1):
        sid = memory.get(links[i])
        session = session_of(sid) if sid is not None else None
        if session is not None:
            best = (i, session)
            break
        if sid is not None:
            memory.pop(links[i], None)  # its session expired
    if lookup is None:
        return best
    start = best[0] + 1 if best is not None else low
    end = len(links)
    while end > start:
        first = max(start, end - RECENT) if end == len(links) else start
        stored = lookup(agent_id, links[first:end])
        for j in range(end - 1, first - 1, -1):
            key = (agent_id, links[j])
            sid = unsaved[key] if key in unsaved else stored.get(links[j])
            session = session_of(sid) if sid is not None else None
            if session is not None:
                return j, session
        end = first
    return best
