"""What Ruyi knows of one session, and how a request was matched to it."""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any


@dataclass(frozen=True)
class SessionOptions:
    """The in-memory session registry."""

    max: int = 10_000
    """Most sessions kept in memory, across all agents; the least recently used is dropped first
    (and read back from the store when it is needed again)."""
    ttl_days: float = 14.0
    """Sessions (and their refs) unseen for this long are removed, by a daily sweep and ``ruyi store vacuum``."""

    def check(self) -> None:
        if self.max < 1 or self.ttl_days <= 0:
            raise ValueError("max must be at least 1 and ttl_days positive")


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
    """Decisions of the pruning layer, keyed by message chain link: per message a list, one per target,
    that accumulates (memory/decisions.py)."""
    batch_retry_at: int | None = None
    """After a pruning batch that could not free enough: the prompt size at which to try again."""
    reports: list[dict[str, Any]] = field(default_factory=list)
    """The latest DCP reports of this session, oldest first (bounded by the pruning layer)."""
    refs: dict[str, str] = field(default_factory=dict)
    """Originals of replaced text by ref id (secrets redacted), for /ruyi/v1/refs/<id> (with a store: kept there only)."""
    version: int = 0
    """The version of the stored row this copy matches (bumped by each write of it; `SessionRecord.version`)."""


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
