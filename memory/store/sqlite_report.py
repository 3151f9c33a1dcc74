"""The SQLite store's reading for ``ruyi report``: audit records since a time, every agent's, streamed oldest first."""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Iterator

from memory.store.base import AuditRecord


class SQLiteReport:
    """Mixed into SQLiteStore: the report's queries on its connection (a CLI's, or a worker thread's under the store's lock)."""

    _conn: sqlite3.Connection

    def audit_records(self, since: float | None = None) -> Iterator[AuditRecord]:
        rows = self._conn.execute(
            "SELECT agent_id, session_id, request_id, created_at, body FROM audit WHERE created_at >= ? ORDER BY created_at, rowid",
            (since if since is not None else float("-inf"),))
        for agent_id, session_id, request_id, created_at, body in rows:
            yield AuditRecord(agent_id, session_id, request_id, float(created_at), json.loads(body))
