"""The options of observing (config ``audit``, ``metrics``): a leaf the config composes."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class AuditOptions:
    """A JSON-lines copy of the audit records the store keeps, for log shippers and people with ``jq``."""

    path: str | None = None
    """File the records are appended to, one JSON object a line: agent_id, session_id, request_id, created_at and body,
    as in the store's audit table, secrets redacted the same way. null: no file."""
    max_bytes: int = 100 * 1024 * 1024
    """Once the file would grow past this, it becomes ``<path>.1`` (older ones ``.2`` …) and a new one starts."""
    backups: int = 5
    """Rotated files kept (``<path>.1`` … ``<path>.N``); the oldest goes."""

    def check(self) -> None:
        if self.path is not None and not self.path.strip():
            raise ValueError("path must name a file, or be null")
        if self.max_bytes < 1024 or self.backups < 1:
            raise ValueError("max_bytes must be at least 1024 and backups at least 1")


@dataclass(frozen=True)
class MetricsOptions:
    """``GET /metrics`` in Prometheus text format, protected like the admin API (``/ruyi/v1``)."""

    enabled: bool = True
    """false: no ``/metrics`` endpoint (404) and nothing recorded per request."""
