"""The store's options (config ``store``): a leaf the config composes."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal


@dataclass(frozen=True)
class StoreOptions:
    """Where Ruyi keeps its durable state."""

    backend: Literal["sqlite", "memory", "postgres"] = "sqlite"
    """``sqlite``: durable, under ``data_dir``; ``memory``: nothing survives a restart; ``postgres``: durable, in the
    database at ``url``, shared by several Ruyi processes."""
    url: str = ""
    """The PostgreSQL database of ``backend: postgres`` (``postgresql://user@host:5432/db``; a schema other than public:
    ``?options=-csearch_path%3Dname``); also ``RUYI_STORE__URL``."""
    pool_max: int = 8
    """``postgres``: connections each Ruyi process keeps open at most for the store (anchors and recall have a few more)."""
    data_dir: str = "./.ruyi"
    """Directory of the database (``ruyi.db``), created on first start."""
    sweep_interval_hours: float = 24.0
    """How often expired sessions and refs are removed (also ``ruyi store vacuum``)."""
    busy_timeout_ms: int = 5000
    """How long a write waits for another process holding the database (``ruyi store vacuum``; PostgreSQL: a lock another
    replica holds), then fails (the request goes through)."""
    deadline_ms: int = 1000
    """The longest a request waits for one store write it needs (its decisions, the session index), when another
    connection holds the database or the disk stalls: past it the request goes on without it (forwarded unmodified, or
    as far as the rewrite goes without it), the write stays queued for the background writer, and it is counted
    (``store_deadline`` in GET /ruyi/v1/stats) and logged (``store_stalled``). While the store stays stalled, requests
    do not wait at all (one tries again every 2 s). At most ``busy_timeout_ms``. A disk the kernel holds (frozen, hung:
    a read or write that never returns) is seen as a store lock held over 3× this (at least 2 s): requests then go
    through unmodified without waiting, the admin API answers 503 ``store_stalled`` (``store_stuck`` in the stats)."""
    max_bytes: int = 0
    """The store's size on disk (SQLite: the file and its write-ahead log) kept under this, in the background in small
    steps: the oldest sessions' raw turns and chunks go first, then their reports and audit records, then whole
    sessions, oldest first (the decisions in force last; the newest session always stays). 0: no limit (sessions still
    expire after ``sessions.ttl_days``). Counted under ``store_size`` in GET /ruyi/v1/stats. SQLite only: refused with ``backend: postgres``."""
    queue_max: int = 10_000
    """Background writes (reports, usage, audit) waiting at most; beyond it new ones are dropped and counted."""
    unsaved_max: int = 100_000
    """While the store keeps failing, entries of the unsaved changes (index entries, sessions, decisions)
    kept for the next write at most; beyond it the oldest are dropped and counted (GET /ruyi/v1/stats)."""
    shared: bool = False
    """Several Ruyi processes use this store at once (replicas, ``server.workers`` > 1): a session in memory is
    trusted only while the stored version is the one it holds, and a request decides for its session under a lock
    that every process honours. On by itself with ``server.workers`` > 1 and with ``backend: postgres`` (choosing
    PostgreSQL is choosing to share: two replicas that did not say so would otherwise silently diverge)."""

    def __post_init__(self) -> None:
        if self.backend == "postgres" and not self.shared:
            object.__setattr__(self, "shared", True)

    def check(self) -> None:
        if self.sweep_interval_hours <= 0:
            raise ValueError("sweep_interval_hours must be positive")
        if self.backend == "postgres" and not self.url.startswith(("postgresql://", "postgres://")):
            raise ValueError("backend postgres needs url: postgresql://user@host:5432/database (or RUYI_STORE__URL)")
        if self.pool_max < 1:
            raise ValueError("pool_max must be >= 1")
        if self.deadline_ms < 1 or self.max_bytes < 0:
            raise ValueError("deadline_ms must be >= 1, max_bytes >= 0")
        if self.backend == "postgres" and self.max_bytes:  # a limit silently not kept is worse than none
            raise ValueError("max_bytes is kept for SQLite only: a PostgreSQL database's size is its server's to manage (0 to go on)")
        if self.busy_timeout_ms < 0 or self.queue_max < 1 or self.unsaved_max < 1:
            raise ValueError("busy_timeout_ms must be >= 0, queue_max and unsaved_max >= 1")
