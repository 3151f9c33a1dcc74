"""Which session a request belongs to (header, else its message chain), and what each session knows."""

from __future__ import annotations

import copy
import functools
import secrets
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import Any

import structlog

from memory.chain import MessageChain
from memory.chain_index import AgentSessions, NeedsStore, find_session, needs_store
from memory.decisions import merge
from memory.identity import AGENT_HEADER, SESSION_HEADER, agent_id_for, session_header  # noqa: F401 - re-exported
from memory.lru import LRU
from memory.session import LINK_BYTES, SESSION_BYTES, How, Resolution, Session, SessionOptions
from memory.store.base import Background, Report, Store, StoredSession, Usage
from memory.unsaved import Unsaved, ref_ids
from memory.write_through import WriteThrough

log = structlog.get_logger(__name__)
INHERITED_WHOLE = ("archives", "layout")
"""Decisions kept per session, not per message, that a child inherits whole (an archive says which prefix it covers,
so one the child's messages do not carry never applies; the layout's stable part keeps the prefix shared)."""


class SessionRegistry(WriteThrough):
    """Sessions keyed by agent, then session; an agent sees only its own.

    Without a store, everything lives in memory, LRU-bounded. With one, memory is a cache: every change
    is also kept as unsaved until ``flush`` writes it in one transaction (before the request is forwarded),
    a session missing from memory is read back from the store, and the store's chain index is the one of
    record, so a restarted Ruyi resolves each request exactly as before. Reports and usage are handed to
    ``queue`` (a background writer)."""

    def __init__(
        self,
        options: SessionOptions | None = None,
        clock: Callable[[], float] = time.time,
        store: Store | None = None,
        queue: Callable[[Background], None] | None = None,
        reports_max: int = 100,
        unsaved_max: int = 100_000,
        soon: Callable[[], None] | None = None,
    ) -> None:
        self.options = options or SessionOptions()
        self.store = store
        self._clock = clock
        self._queue = queue
        self._soon = soon
        """Asks the background writer to `flush` soon (see `settle`); None: `settle` writes at once."""
        self._agents: dict[str, AgentSessions] = {}
        self._lru: LRU[tuple[str, str], int] = LRU(  # a session's key → its links held
            self.options.max, evicted=lambda key, _: self._evict(*key), max_bytes=self.options.max_mb << 20, size=_held_bytes
        )
        self._unsaved = Unsaved()
        self.reports_max = reports_max  # reports kept per session (in memory, and read back from the store by `reports`)
        self.unsaved_max = unsaved_max  # entries kept unsaved while the store keeps failing (past it the oldest are dropped)
        self.write_failures = 0  # flushes that failed since start-up

    def __len__(self) -> int:
        return len(self._lru)

    def resolve(self, agent_id: str, chain: MessageChain, session_id: str | None = None, *, stored: bool = True) -> Resolution:
        """Find or start the session of a request and move its tip to this request's chain.

        `session_id` (X-Ruyi-Session) wins. Otherwise the request continues the session whose latest
        request is the longest prefix of it; else, if it shares with some session a part that goes past
        its first non-system message, it starts a child inheriting that part's decisions; else a new one.
        ``stored=False``: from memory only, or `NeedsStore` (raised before anything changed).
        """
        agent = self._agents.get(agent_id) or self._first_seen(agent_id, stored)
        links = chain.links
        if session_id is not None:
            session = self._live(agent_id, session_id, stored)
            if session is None:
                session = self._create(agent_id, session_id, None)
            shared = chain.shared_prefix(session.links)
            return self._advance(session, chain, How.HEADER, shared)
        found = self._find(agent_id, agent.tips, self._unsaved.tips, links, 0, tips=True, stored=stored)
        if found is not None:
            return self._advance(found[1], chain, How.CONTINUED, found[0] + 1)
        found = self._find(agent_id, agent.links, self._unsaved.links, links, chain.first_non_system + 1, tips=False, stored=stored)
        if found is not None:
            i, parent = found
            child = self._create(agent_id, secrets.token_hex(8), parent)
            child.decisions = {k: copy.deepcopy(parent.decisions[k]) for k in links[: i + 1] if k in parent.decisions}
            child.decisions.update({k: copy.deepcopy(parent.decisions[k]) for k in INHERITED_WHOLE if k in parent.decisions})
            if self.store is not None and child.decisions:
                self._unsaved.decisions.update((agent_id, child.session_id, k) for k in child.decisions)
                self._unsaved.ref_copies.append((agent_id, parent.session_id, child.session_id, ref_ids(child.decisions.values())))
            log.info("session_branched", agent_id=agent_id, session_id=child.session_id, parent_id=parent.session_id, shared=i + 1)
            return self._advance(child, chain, How.CHILD, i + 1)
        session = self._create(agent_id, secrets.token_hex(8), None)
        return self._advance(session, chain, How.NEW, 0)

    def _first_seen(self, agent_id: str, stored: bool) -> AgentSessions:
        """An agent new to memory; its index is whole when the store holds nothing of it (asked once)."""
        if self.store is not None and not stored:
            raise NeedsStore(agent_id)
        elsewhere = self.store is not None and (any(k[0] == agent_id for k in self._unsaved.sessions) or self.store.session_ids(agent_id))
        agent = self._agents[agent_id] = AgentSessions(whole=not elsewhere)
        return agent

    def record(
        self,
        agent_id: str,
        session_id: str,
        *,
        prompt_tokens: int | None = None,
        upstream_prompt_tokens: int | None = None,
        cached_tokens: int | None = None,
        tier: str | None = None,
        window: int | None = None,
        num_ctx: int | None = None,
        calibration: float | None = None,
        decisions: Mapping[str, Any] | None = None,
        batch_retry_at: int | None = None,
        clear_batch_retry: bool = False,
        report: Mapping[str, Any] | None = None,
        reports_max: int = 100,
        refs: Mapping[str, str] | None = None,
    ) -> Session | None:
        """Store facts learned about a session's latest request (None leaves a fact unchanged);
        `decisions` are merged in. Returns the session, or None if it is not (or no longer) known.

        With a store, what the upstream reported (usage) and the report go to the background queue;
        everything else is written by the next ``flush``."""
        session = self.get(agent_id, session_id)
        if session is None:
            return None
        updates = {
            "prompt_tokens": prompt_tokens,
            "upstream_prompt_tokens": upstream_prompt_tokens,
            "cached_tokens": cached_tokens,
            "tier": tier,
            "window": window,
            "calibration": calibration,
        }
        for name, value in updates.items():
            if value is not None:
                setattr(session, name, value)
        if num_ctx is not None:
            session.num_ctx = max(num_ctx, session.num_ctx or 0)
        if decisions:
            merge(session.decisions, decisions)
        if batch_retry_at is not None or clear_batch_retry:
            session.batch_retry_at = batch_retry_at
        if report is not None and self.store is None:  # with a store, reports live there only (`reports` reads them)
            session.reports.append(dict(report))
            del session.reports[:-reports_max]
        if refs and self.store is None:  # with a store, originals live there only (find_ref reads them)
            session.refs.update(refs)
        reported = upstream_prompt_tokens is not None or cached_tokens is not None
        if self.store is not None:  # a record carrying only what the upstream reported goes to the queue
            facts = (prompt_tokens, tier, window, num_ctx, batch_retry_at, decisions, refs)
            row = clear_batch_retry or any(f is not None for f in facts) or (calibration is not None and not reported)
            self._unsaved.recorded(session, decisions, refs, row)
        if self._queue is not None:
            key = (agent_id, session_id)
            if reported:
                self._queue(Usage(*key, upstream_prompt_tokens, cached_tokens, calibration))
            if report is not None:
                request = report.get("request_id") or f"request-{session.requests}"
                self._queue(Report(*key, f"{request}/retry" if report.get("overflow_retry") else str(request), dict(report), reports_max))
        return session

    def find_ref(self, agent_id: str, ref_id: str) -> str | None:
        """The original kept under a ref id, searched only among this agent's sessions."""
        agent = self._agents.get(agent_id)
        for session in agent.sessions.values() if agent else ():
            if ref_id in session.refs:
                return session.refs[ref_id]
        return self.store.find_ref(agent_id, ref_id) if self.store is not None else None

    def get(self, agent_id: str, session_id: str, *, stored: bool = True) -> Session | None:
        """One of an agent's live sessions (read back from the store when not in memory; ``stored=False``:
        `NeedsStore` instead). A session unseen for `ttl_days` is gone, whether or not a sweep has removed it yet."""
        agent = self._agents.get(agent_id)
        session = agent.sessions.get(session_id) if agent else None
        if session is None and self.store is not None and not (agent and agent.whole):
            if not stored:
                raise NeedsStore(agent_id, session_id)
            session = self._load(agent_id, session_id)
        if session is not None and session.last_seen < self._expired_before():
            self._evict(agent_id, session_id)
            return None
        return session

    def _expired_before(self) -> float:
        return self._clock() - self.options.ttl_days * 86400

    def reports(self, agent_id: str, session_id: str) -> list[dict[str, Any]] | None:
        """A session's latest DCP reports, oldest first (from the store, which keeps them across restarts:
        drain the background queue first to include the newest); None if the agent has no such session."""
        session = self.get(agent_id, session_id)
        if session is None:
            return None
        return session.reports if self.store is None else self.store.reports(agent_id, session_id, self.reports_max)

    def list(self, agent_id: str) -> list[Session]:
        """An agent's sessions, most recently seen first."""
        agent = self._agents.get(agent_id)
        found = dict(agent.sessions) if agent else {}
        if self.store is not None:
            self.flush()
            for sid in self.store.session_ids(agent_id):
                if sid not in found:
                    stored = self.store.load_session(agent_id, sid)
                    if stored is not None and stored.record.last_seen >= self._expired_before():
                        found[sid] = _restored(stored)
        return sorted(found.values(), key=lambda s: -s.last_seen)

    def forget(self, agent_id: str, session_id: str | None = None) -> dict[str, int]:
        """Remove everything kept for one session of an agent (every session of it and of its sub-agents,
        `agent/…`, when session_id is None): in memory, unsaved, and in the store (where what is removed is
        overwritten). Returns rows removed by kind; all zero when there was nothing."""
        self.flush()  # what is unsaved is written first, so the store's count is the whole count
        keys = [
            k
            for k in self._lru
            if (k[1] == session_id and k[0] == agent_id) or (session_id is None and (k[0] == agent_id or k[0].startswith(agent_id + "/")))
        ]
        removed = {"sessions": 0, "decisions": 0, "refs": 0, "reports": 0}
        for key in keys:
            session = self._agents[key[0]].sessions[key[1]]
            removed["sessions"] += 1
            removed["decisions"] += sum(len(d) if isinstance(d, list) else 1 for d in session.decisions.values())
            removed["refs"] += len(session.refs)
            removed["reports"] += len(session.reports)
            self._evict(*key)
        for agent in {k[0] for k in keys} | {agent_id}:
            self._unsaved.forget(agent, session_id)
        if self.store is not None:
            removed = self.store.forget(agent_id, session_id)
        if any(removed.values()):
            log.info("sessions_forgotten", agent_id=agent_id, session_id=session_id, removed=removed)
        return removed

    def agents(self) -> Iterator[str]:
        return iter(list(self._agents))  # agents with at least one session in memory

    def expire(self, limit: int = 500) -> int:
        """Forget up to `limit` sessions (and their refs) unseen for `ttl_days`, in memory and in the store.
        Returns how many the store removed (call again while it is `limit`)."""
        before = self._expired_before()
        for key in [k for k in self._lru if self._agents[k[0]].sessions[k[1]].last_seen < before]:
            self._evict(*key)
        if self.store is None:
            return 0
        self.flush()
        removed = self.store.expire(before, limit)
        for agent_id, session_id in removed:
            if (agent_id, session_id) in self._lru:
                self._evict(agent_id, session_id)
        if removed:
            log.info("sessions_expired", count=len(removed))
        return len(removed)

    def release_idle(self, limit: int) -> int:
        """With a store, let up to ``limit`` sessions unseen for ``idle_s`` leave memory, least recently used first
        (the store keeps them; their next request reads them back); returns how many left (call again while it is
        ``limit``). What is unsaved stays unsaved (`_load` reads it back from there)."""
        if self.store is None or self.options.idle_s <= 0:
            return 0
        before = self._clock() - self.options.idle_s
        idle: list[tuple[str, str]] = []
        for key in self._lru:  # least recently used first: resolving or recording a session moves it last
            if len(idle) == limit or self._agents[key[0]].sessions[key[1]].last_seen >= before:
                break
            idle.append(key)
        for key in idle:
            self._evict(*key)
        return len(idle)

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
        agent = self._agents.get(agent_id)  # gone when its last session expired meanwhile
        store = None if agent is not None and agent.whole else self.store  # a whole index: the store knows nothing more
        lookup = None if store is None else (store.find_tips if tips else store.find_links) if stored else needs_store
        left = agent.left_tips if tips and agent is not None else None
        if lookup is not None and left is not None:  # only sessions that left memory have tips memory does not know
            lookup = functools.partial(_asked_if_left, lookup, left)
        return find_session(agent_id, links, low, index, unsaved, lookup, lambda sid: self._live(agent_id, sid, stored))

    def _live(self, agent_id: str, session_id: str, stored: bool) -> Session | None:
        """A session a request may continue (memory/shared.py checks first that the copy in memory is current)."""
        return self.get(agent_id, session_id, stored=stored)

    def _load(self, agent_id: str, session_id: str) -> Session | None:
        """Read a session back into memory (with its tip, if it still holds it): from the unsaved
        changes (dropped from memory before its write) or from the store."""
        assert self.store is not None
        session = self._unsaved.sessions.get((agent_id, session_id))
        stored = self.store.load_session(agent_id, session_id) if session is None else None
        session = _restored(stored) if stored is not None else session
        if session is None:
            return None
        agent = self._agents.setdefault(agent_id, AgentSessions())
        agent.sessions[session_id] = session
        agent.whole = False  # its links are not in the memory index
        if session.links:
            tip = session.links[-1]
            if (agent_id, tip) in self._unsaved.tips:
                is_tip = self._unsaved.tips[(agent_id, tip)] == session_id
            else:
                is_tip = stored.is_tip if stored is not None else self.store.find_tips(agent_id, [tip]).get(tip) == session_id
            if is_tip:
                agent.tips[tip] = session_id
                if agent.left_tips is not None:
                    agent.left_tips.discard(tip)  # back in memory: its tip is known there again
        self._remember(agent_id, session_id)
        return session

    def _create(self, agent_id: str, session_id: str, parent: Session | None) -> Session:
        now = self._clock()
        session = Session(agent_id, session_id, created_at=now, last_seen=now)
        if parent is not None:
            session.parent_id = parent.session_id
            session.tier, session.window, session.num_ctx = parent.tier, parent.window, parent.num_ctx
            session.calibration = parent.calibration
        self._agents.setdefault(agent_id, AgentSessions()).sessions[session_id] = session
        self._remember(agent_id, session_id)
        return session

    def _remember(self, agent_id: str, session_id: str) -> None:
        links = len(self._agents[agent_id].sessions[session_id].links)
        self._lru[(agent_id, session_id)] = links  # past sessions.max or max_mb the least recently used is evicted

    def _advance(self, session: Session, chain: MessageChain, how: How, shared: int) -> Resolution:
        agent_id, sid = session.agent_id, session.session_id
        agent = self._agents.setdefault(agent_id, AgentSessions())
        agent.sessions.setdefault(sid, session)
        keep = self.store is not None
        if session.links and agent.tips.get(session.links[-1]) == sid:
            del agent.tips[session.links[-1]]
            if keep:
                self._unsaved.tips[(agent_id, session.links[-1])] = None
        known, before = chain.shared_prefix(session.links), len(session.links)
        for link in chain.links[known:]:
            agent.links[link] = sid
            if keep:
                self._unsaved.links[(agent_id, link)] = sid
        session.links = chain.links
        if chain.links:
            agent.tips[chain.links[-1]] = sid
            if keep:
                self._unsaved.tips[(agent_id, chain.links[-1])] = sid
        session.requests += 1
        session.last_seen = self._clock()
        if keep:
            self._unsaved.chain(session, known, before)
        self._lru[(agent_id, sid)] = len(chain.links)
        return Resolution(session, how, shared, len(chain.links) - shared)

    def _evict(self, agent_id: str, session_id: str) -> None:
        agent = self._agents[agent_id]
        agent.whole = False  # what the store keeps of it is no longer in the memory index
        session = agent.sessions.pop(session_id)
        if agent.left_tips is not None and session.links:
            agent.left_tips.add(session.links[-1])  # the store may hold it as a tip
        self._lru.pop((agent_id, session_id), None)
        for link in session.links:
            if agent.links.get(link) == session_id:
                del agent.links[link]
        if session.links and agent.tips.get(session.links[-1]) == session_id:
            del agent.tips[session.links[-1]]
        if not agent.sessions:
            del self._agents[agent_id]
        log.debug("session_evicted", agent_id=agent_id, session_id=session_id)


def _asked_if_left(lookup: Callable[[str, Sequence[str]], dict[str, str]], left: set[str], agent_id: str, links: Sequence[str]) -> dict[str, str]:
    """``lookup``'s answer where a link may be the tip of a session that left memory; else nothing, without asking."""
    return lookup(agent_id, links) if not left.isdisjoint(links) else {}


def _held_bytes(_key: tuple[str, str], links: int) -> int:
    return SESSION_BYTES + LINK_BYTES * links


def _restored(stored: StoredSession) -> Session:
    """A session rebuilt from the store."""
    return Session(**vars(stored.record), links=stored.links, decisions=stored.decisions)
