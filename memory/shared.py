"""The session registry of one of several processes sharing a store (replicas): memory is a cache checked against the store."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import structlog

from memory.chain import MessageChain
from memory.chain_index import AgentSessions, NeedsStore, find_session
from memory.session import How, Resolution, Session
from memory.sessions import SessionRegistry

log = structlog.get_logger(__name__)


class Relocate(Exception):
    """The request continues another session than the one whose lock was taken (another process moved a tip
    meanwhile): take that one's lock and resolve again. Raised before anything changed."""

    def __init__(self, session_id: str) -> None:
        super().__init__(session_id)
        self.session_id = session_id


class SharedRegistry(SessionRegistry):
    """A `SessionRegistry` for ``store.shared``: other processes write the same sessions, so nothing in memory is
    trusted without the store's word.

    - A session a request continues is used from memory only while the store's version of its row
      (`SessionRecord.version`, bumped by every write) is the one the copy holds; otherwise it is read back
      (what this process had not written of it is dropped: the newer row wins).
    - The chain index is the store's: the memory index is never asked first, and never taken as whole.
    - A request resolves under its session's lock (`Store.session_lock`, taken by the caller: `locate` says which);
      finding that another session is continued raises `Relocate`, before anything changed.
    - Every change is written before the request is forwarded (no coalescing ``soon``): the lock is released
      only after the write, so the next holder, in any process, reads it."""

    def __init__(self, *args: object, **kwargs: object) -> None:
        kwargs["soon"] = None
        super().__init__(*args, **kwargs)  # type: ignore[arg-type]
        self.locked: str | None = None
        """The session whose lock the caller holds for the `resolve` under way (None: none)."""
        self.reloads = 0
        """Sessions read back since start-up because another process had written a newer version."""

    def locate(self, agent_id: str, chain: MessageChain, session_id: str | None = None) -> str | None:
        """The existing session a request would continue (its lock is to be taken before `resolve`): the one it
        names, else the one whose latest request is the longest prefix of it; None for a new session or a child."""
        if session_id is not None:
            return session_id
        found = self._find(agent_id, {}, self._unsaved.tips, chain.links, 0, tips=True, stored=True)
        return found[1].session_id if found is not None else None

    def resolve(
        self, agent_id: str, chain: MessageChain, session_id: str | None = None, *, stored: bool = True, locked: str | None = None
    ) -> Resolution:
        """`SessionRegistry.resolve`, in the store's terms; ``locked``: the session whose lock the caller holds."""
        if not stored:
            raise NeedsStore(agent_id)  # every request asks the store: never resolved on the event loop
        self.locked = locked
        try:
            return super().resolve(agent_id, chain, session_id)
        finally:
            self.locked = None

    def _first_seen(self, agent_id: str, stored: bool) -> AgentSessions:
        agent = self._agents[agent_id] = AgentSessions(whole=False)  # other processes add sessions any time
        return agent

    def _find(
        self,
        agent_id: str,
        index: dict[str, str],
        unsaved: Mapping[tuple[str, str], str | None],
        links: Sequence[str],
        low: int,
        *,
        tips: bool,
        stored: bool,
    ) -> tuple[int, Session] | None:
        assert self.store is not None
        lookup = self.store.find_tips if tips else self.store.find_links
        return find_session(agent_id, links, low, {}, unsaved, lookup, lambda sid: self._live(agent_id, sid, stored))

    def _live(self, agent_id: str, session_id: str, stored: bool) -> Session | None:
        """The session, read back when the store holds another version than memory (None: removed by another process,
        unless this one never wrote it)."""
        assert self.store is not None
        agent = self._agents.get(agent_id)
        held = agent.sessions.get(session_id) if agent is not None else None
        if held is not None:
            version = self.store.session_version(agent_id, session_id)
            if version != held.version and (version is not None or held.version > 0):  # newer, or removed elsewhere
                log.info("session_reloaded", agent_id=agent_id, session_id=session_id, held=held.version, stored=version)
                self.reloads += 1
                self._unsaved.forget(agent_id, session_id)
                self._evict(agent_id, session_id)
        return self.get(agent_id, session_id, stored=stored)

    def refresh(self, agent_id: str, session_id: str) -> Session | None:
        """The session as the store has it now (a person's action on it, under its lock)."""
        return self._live(agent_id, session_id, True)

    def _advance(self, session: Session, chain: MessageChain, how: How, shared: int) -> Resolution:
        if how in (How.HEADER, How.CONTINUED) and session.session_id != self.locked:
            raise Relocate(session.session_id)
        return super()._advance(session, chain, how, shared)
