"""What ``ruyi report`` reads from the store: every agent's audit records since a time, oldest first, bodies as written."""

from __future__ import annotations

import time
from pathlib import Path

from memory.store.base import Audit, AuditRecord
from memory.store.sqlite_store import SQLiteStore


def test_audit_records_since_a_time_every_agent_oldest_first(tmp_path: Path) -> None:
    store = SQLiteStore(tmp_path / "ruyi.db")
    try:
        store.write_background([Audit("a", "s1", "r1", {"est_before": 10}), Audit("b", "s2", "r2", {"est_before": 20})])
        cut = time.time()
        store.write_background([Audit("a", "s1", "r3", {"est_before": 30}), Audit("a", "s1", "r1", {"est_before": 99})])  # r1 again: kept once
        every = list(store.audit_records())
        assert [(r.agent_id, r.session_id, r.request_id, r.body) for r in every] == [
            ("a", "s1", "r1", {"est_before": 10}),
            ("b", "s2", "r2", {"est_before": 20}),
            ("a", "s1", "r3", {"est_before": 30}),
        ]
        assert all(isinstance(r, AuditRecord) for r in every) and every[0].created_at <= cut <= every[-1].created_at
        assert [r.request_id for r in store.audit_records(cut)] == ["r3"]
        assert list(store.audit_records(every[-1].created_at + 1)) == []
    finally:
        store.close()
