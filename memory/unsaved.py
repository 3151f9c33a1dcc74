"""What the session registry changed since its last write to the store, kept as final states."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from typing import TYPE_CHECKING, Any

from memory.store.base import ChainUpdate, Changes, SessionRecord

if TYPE_CHECKING:
    from memory.session import Session


def record_of(session: Session) -> SessionRecord:
    """A session's own facts, as the store keeps them, at its next version (the one this write makes)."""
    record = session.row()
    record.version += 1
    return record


def ref_ids(decisions: Iterable[Any]) -> tuple[str, ...]:
    """The ref ids named by decisions (each a list of {…, "ref_id": …} as the pruning layer makes them)."""
    ids = []
    for value in decisions:
        for d in value if isinstance(value, list) else (value,):
            if isinstance(d, Mapping) and isinstance(d.get("ref_id"), str):
                ids.append(d["ref_id"])
    return tuple(dict.fromkeys(ids))


class Unsaved:
    """Changes not yet in the store. Each entry holds the final state of its key, so a change made twice
    before a write is written once, and a failed write is retried whole by the next one."""

    def __init__(self) -> None:
        self.sessions: dict[tuple[str, str], Session] = {}
        self.chain_from: dict[tuple[str, str], int] = {}
        """Per session, the first position of its links that may differ from the stored ones."""
        self.chain_stored: dict[tuple[str, str], int] = {}
        """Per session, how many links the store held when the first unsaved change began."""
        self.links: dict[tuple[str, str], str] = {}
        self.tips: dict[tuple[str, str], str | None] = {}
        self.decisions: set[tuple[str, str, str]] = set()
        self.refs: dict[tuple[str, str, str], str] = {}
        self.ref_copies: list[tuple[str, str, str, tuple[str, ...]]] = []
        self.dropped = 0
        """Entries dropped by `bound` since start-up (never written)."""

    def __bool__(self) -> bool:
        return bool(self.sessions or self.links or self.tips or self.refs or self.ref_copies)

    def durable_pending(self) -> bool:
        """Whether what waits holds decisions or originals (refs): what a request must not forward before it is written."""
        return bool(self.decisions or self.refs or self.ref_copies)

    def session(self, session: Session) -> None:
        self.sessions[(session.agent_id, session.session_id)] = session

    def recorded(self, session: Session, decisions: Mapping[str, Any] | None, refs: Mapping[str, str] | None, row: bool) -> None:
        """Note what `SessionRegistry.record` changed (``row``: the session's own facts)."""
        key = (session.agent_id, session.session_id)
        if row or decisions or refs:
            self.sessions[key] = session
        self.decisions.update((*key, link) for link in decisions or ())
        self.refs.update({(*key, ref_id): original for ref_id, original in (refs or {}).items()})

    def take_back(self, key: tuple[str, str], links: Iterable[str], refs: Iterable[str]) -> None:
        """Take back decisions (by link) and refs of a session noted by `recorded` (they were not kept)."""
        for link in links:
            self.decisions.discard((*key, link))
        for ref_id in refs:
            self.refs.pop((*key, ref_id), None)

    def size(self) -> int:
        """Entries waiting for a write."""
        tables = (self.sessions, self.links, self.tips, self.decisions, self.refs, self.ref_copies)
        return sum(len(t) for t in tables)

    def bound(self, limit: int, live: Callable[[tuple[str, str]], bool]) -> int:
        """While the store keeps failing, keep at most about ``limit`` entries; returns how many were dropped.

        What goes first costs least: the oldest entries of the link index (it finds a rewound history's
        parent session after a restart) and of the tip index (a live session writes its newest tip again
        with its next request); then sessions no longer in memory, with their chains, decisions and refs
        (after a restart they are as the store last had them, or unknown). Sessions in memory stay
        whole: they are bounded by ``sessions.max``."""
        excess, dropped = self.size() - limit, 0
        for table in (self.links, self.tips):
            while excess > dropped and table:
                del table[next(iter(table))]
                dropped += 1
        for key in [k for k in self.sessions if not live(k)]:
            if excess <= dropped:
                break
            dropped += self._drop_session(key)
        self.dropped += dropped
        return dropped

    def _drop_session(self, key: tuple[str, str]) -> int:
        del self.sessions[key]
        self.chain_from.pop(key, None)
        self.chain_stored.pop(key, None)
        decisions = {d for d in self.decisions if d[:2] == key}
        self.decisions -= decisions
        refs = [r for r in self.refs if r[:2] == key]
        for r in refs:
            del self.refs[r]
        copies = [c for c in self.ref_copies if (c[0], c[2]) == key]
        self.ref_copies = [c for c in self.ref_copies if (c[0], c[2]) != key]
        return 1 + len(decisions) + len(refs) + len(copies)

    def chain(self, session: Session, start: int, before: int) -> None:
        """The session's links changed from position `start` on; it had `before` links until then."""
        key = (session.agent_id, session.session_id)
        self.chain_stored.setdefault(key, before)
        self.chain_from[key] = min(self.chain_from.get(key, start), start)
        self.sessions[key] = session

    def changes(self) -> Changes:
        out = Changes(sessions=[record_of(s) for s in self.sessions.values()])
        for key, start in self.chain_from.items():
            out.chains.append(ChainUpdate(*key, start, self.sessions[key].links[start:], start < self.chain_stored[key]))
        out.links = [(a, link, s) for (a, link), s in self.links.items()]
        out.tips = [(a, link, s) for (a, link), s in self.tips.items()]
        for a, s, link in self.decisions:
            session = self.sessions.get((a, s))
            decisions = session.decisions if session is not None else {}
            if link in decisions:
                out.decisions.append((a, s, link, decisions[link]))
        out.refs = [(a, s, ref_id, original) for (a, s, ref_id), original in self.refs.items()]
        out.ref_copies = list(self.ref_copies)
        return out

    def forget(self, agent_id: str, session_id: str | None) -> None:
        """Drop every change of one session of an agent (all of them when session_id is None)."""

        def gone(agent: str, session: str | None) -> bool:
            return agent == agent_id and (session_id is None or session == session_id)

        for table in (self.sessions, self.chain_from, self.chain_stored):
            for key in [k for k in table if gone(*k)]:
                del table[key]
        for key in [k for k, s in self.links.items() if gone(k[0], s)]:
            del self.links[key]
        for key in [k for k, s in self.tips.items() if gone(k[0], s)]:
            del self.tips[key]
        self.decisions = {d for d in self.decisions if not gone(d[0], d[1])}
        for key in [k for k in self.refs if gone(k[0], k[1])]:
            del self.refs[key]
        self.ref_copies = [c for c in self.ref_copies if not gone(c[0], c[2])]

    def written(self) -> None:
        """The changes are in the store: each session written holds the version its row now has."""
        for session in self.sessions.values():
            session.version += 1
        self.clear()

    def clear(self) -> None:
        for table in (self.sessions, self.chain_from, self.chain_stored, self.links, self.tips, self.refs):
            table.clear()
        self.decisions.clear()
        self.ref_copies.clear()
