"""Which session a request belongs to (header, else its message chain), and what each session knows."""

from __future__ import annotations

import copy
import secrets
import time
from collections import OrderedDict
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from hashlib import blake2b
from typing import Any

import structlog

from memory.chain import MessageChain

log = structlog.get_logger(__name__)

AGENT_HEADER = "x-ruyi-agent"
SESSION_HEADER = "x-ruyi-session"
_KEY_HEADERS = ("authorization", "x-api-key", "api-key")
_MAX_ID_CHARS = 128


@dataclass(frozen=True)
class SessionOptions:
    """The in-memory session registry."""

    max: int = 10_000
    """Most sessions kept, across all agents; the least recently used is forgotten first."""


@dataclass
class Session:
    """What Ruyi knows of one session. Change it through `SessionRegistry.record`."""

    agent_id: str
    session_id: str
    parent_id: str | None = None
    """The session this one branched from (a rewind or a rewritten history), if any."""
    created_at: float = 0.0
    last_seen: float = 0.0
    requests: int = 0
    links: tuple[str, ...] = ()
    """Chain links of the latest request; links[-1] is the tip a continuing request extends."""
    prompt_tokens: int | None = None
    """Our (calibrated) estimate of the latest request's prompt."""
    upstream_prompt_tokens: int | None = None
    """The prompt size the upstream reported for the latest request that reported one."""
    cached_tokens: int | None = None
    """Prompt tokens the upstream served from its cache on that request."""
    tier: str | None = None
    window: int | None = None
    num_ctx: int | None = None
    """Ollama num_ctx in force; only ever raised (a change reloads the model)."""
    calibration: float | None = None
    """The calibration ratio applied to the latest request."""
    decisions: dict[str, Any] = field(default_factory=dict)
    """Free-form decisions of the pruning layer, keyed by message chain link."""
    batch_retry_at: int | None = None
    """After a pruning batch that could not free enough: the prompt size at which to try again."""
    reports: list[dict[str, Any]] = field(default_factory=list)
    """The latest DCP reports of this session, oldest first (bounded by the pruning layer)."""
    refs: dict[str, str] = field(default_factory=dict)
    """Originals of replaced text by ref id (secrets redacted), for /ruyi/v1/refs/<id>."""


class How(StrEnum):
    """How a request was matched to its session."""

    HEADER = "header"
    CONTINUED = "continued"
    CHILD = "child"
    NEW = "new"


@dataclass(frozen=True, slots=True)
class Resolution:
    """The outcome of resolving one request."""

    session: Session
    how: How
    shared: int
    """Leading messages already known to the session (or, for a child, to its parent)."""
    new_messages: int
    """Messages beyond the shared part."""


def _header(headers: Mapping[str, str], name: str) -> str | None:
    value = headers.get(name)
    if value is None:  # plain dicts are case-sensitive; aiohttp's CIMultiDict is not
        value = next((v for k, v in headers.items() if k.lower() == name), None)
    value = value.strip() if isinstance(value, str) else None
    return value or None


def _short_hash(text: str) -> str:
    return blake2b(text.encode("utf-8", "surrogatepass"), digest_size=6).hexdigest()


def _bounded(value: str) -> str:
    return value if len(value) <= _MAX_ID_CHARS and value.isprintable() else "h-" + _short_hash(value)


def agent_id_for(headers: Mapping[str, str]) -> str:
    """X-Ruyi-Agent, else a short hash of the client's key (never the key), else `default`."""
    agent = _header(headers, AGENT_HEADER)
    if agent:
        return _bounded(agent)
    for name in _KEY_HEADERS:
        key = _header(headers, name)
        if key:
            return "k-" + _short_hash(key.removeprefix("Bearer ").strip())
    return "default"


def session_header(headers: Mapping[str, str]) -> str | None:
    """The explicit X-Ruyi-Session, if the client sent one."""
    value = _header(headers, SESSION_HEADER)
    return _bounded(value) if value else None


class _AgentSessions:
    """One agent's sessions and the indexes that find them by chain link."""

    def __init__(self) -> None:
        self.sessions: dict[str, Session] = {}
        self.tips: dict[str, str] = {}
        """Last link of a session's latest request → that session."""
        self.links: dict[str, str] = {}
        """Any link a session's requests held → the session that last added it."""


class SessionRegistry:
    """Sessions in memory, LRU-bounded; all state keyed by agent, then session. An agent sees only
    its own sessions. A later store keeps the same four calls: resolve, record, get, list."""

    def __init__(self, options: SessionOptions | None = None, clock: Callable[[], float] = time.time) -> None:
        self.options = options or SessionOptions()
        self._clock = clock
        self._agents: dict[str, _AgentSessions] = {}
        self._lru: OrderedDict[tuple[str, str], None] = OrderedDict()

    def __len__(self) -> int:
        return len(self._lru)

    def resolve(self, agent_id: str, chain: MessageChain, session_id: str | None = None) -> Resolution:
        """Find or start the session of a request and move its tip to this request's chain.

        `session_id` (X-Ruyi-Session) wins. Otherwise the request continues the session whose latest
        request is the longest prefix of it; else, if it shares with some session a part that goes past
        its first non-system message, it starts a child inheriting that part's decisions; else a new one.
        """
        agent = self._agents.setdefault(agent_id, _AgentSessions())
        links = chain.links
        if session_id is not None:
            session = agent.sessions.get(session_id)
            if session is None:
                session = self._create(agent, agent_id, session_id, None)
            shared = chain.shared_prefix(session.links)
            return self._advance(agent, session, chain, How.HEADER, shared)
        for i in range(len(links) - 1, -1, -1):
            sid = agent.tips.get(links[i])
            if sid is not None:
                return self._advance(agent, agent.sessions[sid], chain, How.CONTINUED, i + 1)
        for i in range(len(links) - 1, chain.first_non_system, -1):
            sid = agent.links.get(links[i])
            parent = agent.sessions.get(sid) if sid is not None else None
            if parent is not None:
                child = self._create(agent, agent_id, secrets.token_hex(8), parent)
                child.decisions = {
                    k: copy.deepcopy(parent.decisions[k]) for k in links[: i + 1] if k in parent.decisions
                }
                log.info("session_branched", agent_id=agent_id, session_id=child.session_id, parent_id=sid, shared=i + 1)
                return self._advance(agent, child, chain, How.CHILD, i + 1)
        session = self._create(agent, agent_id, secrets.token_hex(8), None)
        return self._advance(agent, session, chain, How.NEW, 0)

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
        `decisions` are merged in. Returns the session, or None if it is not (or no longer) known."""
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
            session.decisions.update(decisions)
        if batch_retry_at is not None or clear_batch_retry:
            session.batch_retry_at = batch_retry_at
        if report is not None:
            session.reports.append(dict(report))
            del session.reports[:-reports_max]
        if refs:
            session.refs.update(refs)
        return session

    def find_ref(self, agent_id: str, ref_id: str) -> str | None:
        """The original kept under a ref id, searched only among this agent's sessions."""
        agent = self._agents.get(agent_id)
        for session in agent.sessions.values() if agent else ():
            if ref_id in session.refs:
                return session.refs[ref_id]
        return None

    def get(self, agent_id: str, session_id: str) -> Session | None:
        """One of an agent's sessions."""
        agent = self._agents.get(agent_id)
        return agent.sessions.get(session_id) if agent else None

    def list(self, agent_id: str) -> list[Session]:
        """An agent's sessions, most recently seen first."""
        agent = self._agents.get(agent_id)
        return sorted(agent.sessions.values(), key=lambda s: -s.last_seen) if agent else []

    def agents(self) -> Iterator[str]:
        """Agents with at least one session."""
        return iter(list(self._agents))

    def _create(self, agent: _AgentSessions, agent_id: str, session_id: str, parent: Session | None) -> Session:
        now = self._clock()
        session = Session(agent_id, session_id, created_at=now, last_seen=now)
        if parent is not None:
            session.parent_id = parent.session_id
            session.tier, session.window, session.num_ctx = parent.tier, parent.window, parent.num_ctx
            session.calibration = parent.calibration
        agent.sessions[session_id] = session
        self._lru[(agent_id, session_id)] = None
        while len(self._lru) > self.options.max:
            self._evict(*self._lru.popitem(last=False)[0])
        return session

    def _advance(self, agent: _AgentSessions, session: Session, chain: MessageChain, how: How, shared: int) -> Resolution:
        sid = session.session_id
        if session.links and agent.tips.get(session.links[-1]) == sid:
            del agent.tips[session.links[-1]]
        known = chain.shared_prefix(session.links)
        for link in chain.links[known:]:
            agent.links[link] = sid
        session.links = chain.links
        if chain.links:
            agent.tips[chain.links[-1]] = sid
        session.requests += 1
        session.last_seen = self._clock()
        self._lru.move_to_end((session.agent_id, sid))
        return Resolution(session, how, shared, len(chain.links) - shared)

    def _evict(self, agent_id: str, session_id: str) -> None:
        agent = self._agents[agent_id]
        session = agent.sessions.pop(session_id)
        for link in session.links:
            if agent.links.get(link) == session_id:
                del agent.links[link]
        if session.links and agent.tips.get(session.links[-1]) == session_id:
            del agent.tips[session.links[-1]]
        if not agent.sessions:
            del self._agents[agent_id]
        log.debug("session_evicted", agent_id=agent_id, session_id=session_id)
