"""What Ruyi knows of one session, and how a request was matched to it."""

from __future__ import annotations

from dataclasses import dataclass, field, fields
from enum import StrEnum
from typing import Any

from memory.store.base import SessionRecord

SESSION_BYTES = 1500
"""What a session kept in memory holds besides its links (its record, dicts, the registry's entries), roughly."""
LINK_BYTES = 150
"""What one message of a kept session holds: its link's hex string, its entry in the agent's index, its tuple slot
(tracemalloc: 119 bytes for the string and the index entry)."""


@dataclass(frozen=True)
class SessionOptions:
    """The in-memory session registry."""

    max: int = 10_000
    """Most sessions kept in memory, across all agents; the least recently used is dropped first
    (and read back from the store when it is needed again)."""
    max_mb: int = 64
    """Most memory the sessions kept hold, in MiB, counted as ``SESSION_BYTES`` each and ``LINK_BYTES`` per message
    of each (its chain link in the agent's index): past it the least recently used are dropped first too, never the
    session of the request at hand (10,000 sessions of 200 messages would hold about 300 MB)."""
    ttl_days: float = 14.0
    """Sessions (and their refs) unseen for this long are removed, by a daily sweep and ``ruyi store vacuum``."""
    idle_s: float = 300.0
    """What the sessions' requests left in memory and nothing used for this long goes (checked every 30 s), so memory
    follows the conversations in use rather than filling to the bounds over hours: token counts, pruning's
    classifications, chunks prepared for an archive (made again when a conversation comes back: by then the
    upstream's prompt cache has expired too, after 5 minutes at Anthropic and OpenAI), and, with a store, the session
    itself (its next request reads it back; without a store memory is all there is, and it stays until ``max`` or
    ``max_mb`` push it out). 0: all kept until those bounds."""

    def check(self) -> None:
        if self.max < 1 or self.max_mb < 1 or self.ttl_days <= 0 or self.idle_s < 0:
            raise ValueError("max and max_mb must be at least 1, ttl_days positive and idle_s not negative")


@dataclass
class Session(SessionRecord):
    """What Ruyi knows of one session: its row (``SessionRecord``'s fields, declared there once: ``version`` is the
    stored row's version this copy matches) and what is kept beside it. Change it through `SessionRegistry.record`."""

    links: tuple[str, ...] = ()
    """Chain links of the latest request; links[-1] is the tip a continuing request extends."""
    decisions: dict[str, Any] = field(default_factory=dict)
    """Decisions of the pruning layer, keyed by message chain link: per message a list, one per target,
    that accumulates (memory/decisions.py)."""
    reports: list[dict[str, Any]] = field(default_factory=list)
    """The latest DCP reports of this session, oldest first (bounded by the pruning layer)."""
    refs: dict[str, str] = field(default_factory=dict)
    """Originals of replaced text by ref id (secrets redacted), for /ruyi/v1/refs/<id> (with a store: kept there only)."""

    def row(self) -> SessionRecord:
        """The store's row of this session: the facts it inherits, without what is kept beside them."""
        return SessionRecord(**{f.name: getattr(self, f.name) for f in fields(SessionRecord)})


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
