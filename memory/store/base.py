"""The store interface: sessions, their chain index, decisions, refs and background records, in plain types."""

from __future__ import annotations

import threading
from collections.abc import Iterator, Mapping, Sequence
from contextlib import AbstractContextManager, contextmanager
from dataclasses import dataclass, field
from typing import Any, Protocol

import structlog

log = structlog.get_logger(__name__)


class SessionLock(Protocol):
    """A held or holdable per-session lock: ``acquire`` waits until it is held (at most ``timeout`` seconds: False when
    it was not), ``release`` may be called from any thread of the process that acquired it."""

    def acquire(self, timeout: float | None = None) -> bool: ...

    def release(self) -> None: ...


class StoreError(Exception):
    """A store Ruyi cannot use (a schema newer than the code, an unreadable file): stops start-up."""


_thread = threading.local()


@contextmanager
def in_background() -> Iterator[None]:
    """Mark the calling thread as a background writer's: its calls probe a stalled store instead of being refused."""
    _thread.background = True
    try:
        yield
    finally:
        _thread.background = False


def is_background() -> bool:
    return bool(getattr(_thread, "background", False))


def is_busy(exc: BaseException) -> bool:
    """Whether a store call failed because the database was held or slow past its deadline (retried later) rather
    than for its content: SQLite's ``database is locked``/``busy``, PostgreSQL's lock or statement timeout."""
    text = str(exc).lower()
    if type(exc).__name__ in ("LockNotAvailable", "QueryCanceled"):
        return True
    return type(exc).__name__ == "OperationalError" and ("locked" in text or "busy" in text)


STALLED_WAIT_MS = 50


class Stall:
    """The deadline of a store's request-path writes (``store.deadline_ms``). A write that found the database held past
    its deadline marks the store stalled: until a write succeeds again, request-path writes only try, without waiting
    (a held database refuses them at once: the request fails open, its write stays queued), while the background
    writer (``in_background``) goes on waiting the deadline for each of its tries."""

    def __init__(self, deadline_ms: int, location: str) -> None:
        self.deadline_ms = deadline_ms
        self.location = location
        self.missed = 0
        """Writes that waited their deadline and gave up."""
        self.refused = 0
        """Request-path writes refused at once (they did not wait) while the store was stalled."""
        self.stalls = 0
        self.stalled = False

    def wait_ms(self) -> int:
        """How long the next write may wait for the database (while stalled, a request's write only tries: the time a
        short transaction of Ruyi's own other connections takes, not a lock held for long)."""
        if is_background():  # at least a short transaction of Ruyi's own other connections (a deadline of 0 included)
            return max(self.deadline_ms, STALLED_WAIT_MS)
        return STALLED_WAIT_MS if self.stalled else self.deadline_ms

    @contextmanager
    def call(self) -> Iterator[int]:
        """Around one write that requests wait for; yields how long it may wait (milliseconds)."""
        wait = self.wait_ms()
        try:
            yield wait
        except BaseException as exc:
            if is_busy(exc):
                self._failed(exc, wait)
            raise
        if self.stalled:
            self.stalled = False
            log.info("store_stall_over", location=self.location, missed=self.missed, refused=self.refused)

    def _failed(self, exc: BaseException, waited: int) -> None:
        if waited < self.deadline_ms and self.stalled:
            self.refused += 1
            return
        self.missed += 1
        if not self.stalled:
            self.stalled = True
            self.stalls += 1
            log.warning("store_stalled", location=self.location, deadline_ms=self.deadline_ms, reason=str(exc))

    def stats(self) -> dict[str, Any]:
        return {"deadline_ms": self.deadline_ms, "stalled": self.stalled, "stalls": self.stalls, "missed": self.missed, "refused": self.refused}


@dataclass
class SessionRecord:
    """A session's own facts (one row, its columns in this order); its links, decisions and refs are kept beside it.
    Declared once: the registry's ``Session`` (memory/session.py) is this row and what is kept beside it."""

    agent_id: str
    session_id: str
    parent_id: str | None = None
    """The session this one branched from (a rewind or a rewritten history), if any."""
    created_at: float = 0.0
    last_seen: float = 0.0
    requests: int = 0
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
    batch_retry_at: int | None = None
    """After a pruning batch that could not free enough: the prompt size at which to try again."""
    version: int = 0
    """Bumped by every write of the row: a process trusts its in-memory copy only while this is the one it holds."""


@dataclass(frozen=True)
class StoredSession:
    """Everything needed to rebuild a session after a restart."""

    record: SessionRecord
    links: tuple[str, ...]
    """Chain links of the session's latest request."""
    decisions: dict[str, Any]
    """Decisions by chain link."""
    is_tip: bool
    """Whether links[-1] still names this session in the tip index."""


@dataclass(frozen=True)
class ChainUpdate:
    """A session's links from position ``start`` on are now ``links`` (the ones before are unchanged)."""

    agent_id: str
    session_id: str
    start: int
    links: tuple[str, ...]
    replaces: bool = True
    """Whether the store may hold positions from ``start`` on (they go first); False when the chain only grew."""


@dataclass
class Changes:
    """What must be durable before a request is forwarded: written in one transaction."""

    sessions: list[SessionRecord] = field(default_factory=list)
    chains: list[ChainUpdate] = field(default_factory=list)
    links: list[tuple[str, str, str]] = field(default_factory=list)
    """(agent, link, session): the session that last added a link (finds a branch's parent)."""
    tips: list[tuple[str, str, str | None]] = field(default_factory=list)
    """(agent, link, session or None to remove): the session whose latest request ends at a link."""
    decisions: list[tuple[str, str, str, Any]] = field(default_factory=list)
    """(agent, session, link, decisions of that message)."""
    refs: list[tuple[str, str, str, str]] = field(default_factory=list)
    """(agent, session, ref id, original text, secrets already redacted)."""
    ref_copies: list[tuple[str, str, str, tuple[str, ...]]] = field(default_factory=list)
    """(agent, from session, to session, ref ids): a child keeps the refs of the decisions it inherits."""

    def __bool__(self) -> bool:
        return any((self.sessions, self.chains, self.links, self.tips, self.decisions, self.refs, self.ref_copies))


@dataclass(frozen=True)
class Report:
    """One DCP report (idempotent by ``key``: the request id, and whether it was the overflow retry)."""

    agent_id: str
    session_id: str
    key: str
    body: Mapping[str, Any]
    keep: int = 100
    """Reports kept per session; older ones go."""


@dataclass(frozen=True)
class Usage:
    """What the upstream reported for a session's latest request."""

    agent_id: str
    session_id: str
    upstream_prompt_tokens: int | None
    cached_tokens: int | None
    calibration: float | None


@dataclass(frozen=True)
class Audit:
    """The audit record of one request (idempotent by request id)."""

    agent_id: str
    session_id: str
    request_id: str
    body: Mapping[str, Any]


@dataclass(frozen=True)
class ModelRatio:
    """A model's calibration ratio (a property of the model, not of an agent: the one unkeyed record)."""

    model: str
    ratio: float


Background = Report | Usage | Audit | ModelRatio


@dataclass(frozen=True)
class AuditRecord:
    """One stored audit record, as ``ruyi report`` reads it back: its columns and its body (already redacted)."""

    agent_id: str
    session_id: str
    request_id: str
    created_at: float
    """Seconds since the epoch, when the background writer stored it (about when the request was answered)."""
    body: dict[str, Any]


class Store(Protocol):
    """Durable state. Every call names the agent (and session) it concerns and sees nothing of other agents."""

    location: str
    """Where the data lives, for messages (a file path, a URL without its password)."""

    def write(self, changes: Changes) -> None:
        """Write the changes in one transaction."""

    def write_background(self, items: Sequence[Background], lock: AbstractContextManager[object] | None = None) -> None:
        """Write queued records in one transaction; a record written before is not written again. ``lock``, when
        given, is held around the transaction only (the records are made ready before it is taken)."""

    def find_tips(self, agent_id: str, links: Sequence[str]) -> dict[str, str]:
        """Of these links, those that end some session's latest request: link → session."""

    def find_links(self, agent_id: str, links: Sequence[str]) -> dict[str, str]:
        """Of these links, those some session's requests held: link → the session that last added it."""

    def load_session(self, agent_id: str, session_id: str) -> StoredSession | None:
        """One session of this agent, or None."""

    def reports(self, agent_id: str, session_id: str, limit: int) -> list[dict[str, Any]]:
        """A session's latest reports, oldest first."""

    def session_ids(self, agent_id: str) -> list[str]:
        """This agent's sessions, most recently seen first."""

    def agents(self) -> list[tuple[str, int, float]]:
        """Every agent with sessions: (agent, sessions, last seen), most recently seen first."""

    def find_ref(self, agent_id: str, ref_id: str) -> str | None:
        """The original kept under a ref id, among this agent's sessions only."""

    def audit(self, agent_id: str, session_id: str) -> list[dict[str, Any]]:
        """A session's audit records, oldest first."""

    def audit_records(self, since: float | None = None) -> Iterator[AuditRecord]:
        """Every agent's audit records stored at or after ``since`` (all when None), oldest first (by created_at, then
        insertion), streamed: the one source of ``ruyi report``, which folds them without holding them all. One plain
        query over the audit table: its five columns, filtered and ordered on created_at, the body parsed from JSON."""

    def ratios(self) -> list[tuple[str, float]]:
        """Calibration ratios by model, least recently updated first."""

    def expire(self, before: float, limit: int) -> list[tuple[str, str]]:
        """Remove up to ``limit`` sessions last seen before ``before`` (with their refs, decisions, index
        entries and records); returns the (agent, session) pairs removed."""

    def forget(self, agent_id: str, session_id: str | None = None) -> dict[str, int]:
        """Remove every row of one session of an agent (of the whole agent and its sub-agents, `agent/…`, when
        session_id is None), in
        every table that names them, so that nothing of it stays in the files (deleted content is
        overwritten, the write-ahead log truncated). Returns rows removed by table."""

    def compact(self, pages: int | None = None) -> int:
        """Give up to ``pages`` pages of removed rows back (all by default); returns how many are left."""

    def checkpoint(self) -> None:
        """Housekeeping of the write path (SQLite: fold a grown write-ahead log into the database). Cheap when
        there is nothing to do; made to run in a worker thread, beside the event loop's calls."""

    def close(self) -> None:
        """Close; later calls fail."""

    # Replicas (store.shared): several processes on one store.

    def session_version(self, agent_id: str, session_id: str) -> int | None:
        """The session's stored version (`SessionRecord.version`), None when the store has no such session."""

    def session_lock(self, agent_id: str, session_id: str) -> SessionLock:
        """A lock on one session that every thread and process using this store honours (held while a request
        decides for the session); the holder's death (even SIGKILL) releases it."""


# Recall (proxy/longctx): raw turns (S0), S2 chunks and archives, written off the request path, searched by FTS5.


@dataclass(frozen=True)
class Turn:
    """One message of a session (S0), keyed by its position in the conversation and its content hash."""

    agent_id: str
    session_id: str
    turn: int
    hash: str
    role: str
    body: dict[str, Any]
    """The message as JSON, secrets already redacted."""
    text: str
    """What is searched: its text and tool calls, redacted."""


@dataclass(frozen=True)
class ChunkRow:
    """An S2 chunk: a summary of messages first..last."""

    agent_id: str
    session_id: str
    chunk_id: str
    first: int
    last: int
    source: str
    tags: tuple[str, ...]
    anchors: tuple[str, ...]
    line: str
    summary: str


@dataclass(frozen=True)
class ArchiveRow:
    """One archive: its record (range, reason, tokens), S1 and the seed's forms (compact, normal)."""

    agent_id: str
    session_id: str
    archive_id: str
    number: int
    body: dict[str, Any]


Item = Turn | ChunkRow | ArchiveRow


@dataclass(frozen=True)
class Hit:
    kind: str
    ref: str
    matched: int
    """How many of the query's terms it holds."""
    row: dict[str, Any]


class KeeperDatabase(Protocol):
    """The keeper's database: SQLite's (memory/store/sqlite_database.py) or PostgreSQL's (memory/store/pg_database.py). Its
    connections take SQLite's SQL, written once for both (PostgreSQL's translates ``?`` and ``INSERT OR …``)."""

    location: str

    def transaction(self) -> AbstractContextManager[Any]:
        """One write, all of it or nothing; writers are serialized (SQLite: BEGIN IMMEDIATE; PostgreSQL: an advisory lock)."""

    def reading(self) -> AbstractContextManager[Any]: ...

    def close(self) -> None: ...
