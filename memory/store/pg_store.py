"""The PostgreSQL backend of the store: a pool of connections, one transaction per write, every write idempotent (ON CONFLICT)."""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import AbstractContextManager, nullcontext
from dataclasses import fields
from typing import Any, TypeVar

import psycopg
import psycopg_pool
import structlog

from memory.store.base import (
    Audit,
    Background,
    Changes,
    ModelRatio,
    Report,
    SessionRecord,
    Stall,
    StoredSession,
    Usage,
)
from memory.store.pg_database import location_of, open_pool
from memory.store.pg_locks import AdvisoryLock, PgSessionLocks
from memory.store.sqlite_store import _PER_SESSION  # the same tables go with an expired session on both backends
from redaction.redact import redact_value

log = structlog.get_logger(__name__)
T = TypeVar("T")
_COLUMNS = tuple(f.name for f in fields(SessionRecord))
_QUOTED = tuple(f'"{c}"' for c in _COLUMNS)  # "window" is a reserved word
assert _COLUMNS[-1] == "version"  # the upsert below moves it on by its own rule
_OF_SESSION = "WHERE agent_id = s.agent_id AND session_id = s.session_id"
_LOAD_SESSION = (
    f"SELECT {', '.join('s.' + c for c in _QUOTED)}, ARRAY(SELECT link FROM chain {_OF_SESSION} ORDER BY pos), "
    f"ARRAY(SELECT link FROM decisions {_OF_SESSION} ORDER BY link), ARRAY(SELECT body FROM decisions {_OF_SESSION} ORDER BY link), "
    f"EXISTS(SELECT 1 FROM tips {_OF_SESSION} AND link = (SELECT link FROM chain {_OF_SESSION} ORDER BY pos DESC LIMIT 1)) "
    "FROM sessions s WHERE s.agent_id = %s AND s.session_id = %s"
)
_UPSERT_SESSION = (
    f"INSERT INTO sessions ({', '.join(_QUOTED)}) VALUES ({', '.join(['%s'] * len(_COLUMNS))}) "
    f"ON CONFLICT (agent_id, session_id) DO UPDATE SET {', '.join(f'{c} = excluded.{c}' for c in _QUOTED[2:-1])}, "
    "version = GREATEST(excluded.version, sessions.version + 1)"  # a write from a stale copy still moves the version on
)
RETRIES = 3
"""A write that two replicas' transactions deadlocked on is tried again this many times (each row it writes is idempotent)."""
POOL_MAX = 8


def _many(c: psycopg.Connection, sql: str, rows: Sequence[Sequence[Any]]) -> None:
    if rows:
        with c.cursor() as cur:
            cur.executemany(sql, rows)  # our own constant SQL


def _json(value: Any) -> str:
    return json.dumps(value, separators=(",", ":"))  # ASCII: lone surrogates survive the round trip


def _row(record: SessionRecord) -> tuple[Any, ...]:
    return tuple(getattr(record, name) for name in _COLUMNS)


def _text(original: str) -> bytes:
    return original.encode("utf-8", "surrogatepass")


def _sorted(rows: Sequence[T], key: Callable[[T], Any]) -> list[T]:
    """Rows in key order: two replicas' transactions lock the same rows in the same order (no deadlock between them)."""
    return sorted(rows, key=key)


class PgStore:
    """The store in a PostgreSQL database (``store.url``), shared by any number of Ruyi processes. Safe from any thread:
    each call takes a connection of its own from the pool."""

    def __init__(self, url: str, pool_max: int = POOL_MAX, lock_timeout_ms: int = 5000, deadline_ms: int | None = None) -> None:
        self.url = url
        self.location = location_of(url)
        self.stall = Stall(min(lock_timeout_ms, deadline_ms) if deadline_ms is not None else lock_timeout_ms, self.location)
        """The deadline of the writes that hold up requests (a row or lock another replica holds): ``store.deadline_ms``."""
        self.pool: psycopg_pool.ConnectionPool = open_pool(url, pool_max, "ruyi-store", lock_timeout_ms=lock_timeout_ms)
        self._locks = PgSessionLocks(url)
        with self.pool.connection() as conn:
            self._owned = _owned_tables(conn)

    def _retrying(self, write: Callable[[psycopg.Connection], None], pipelined: bool = False) -> None:
        """Run ``write`` in one transaction (its statements sent in one pipeline: one round trip, not one each); tried
        again when two replicas' transactions deadlocked, or when the server had ended the connection (every write is
        idempotent: one that committed before its connection broke is harmless to repeat)."""
        for attempt in range(RETRIES + 1):
            used: psycopg.Connection | None = None
            try:
                with self.pool.connection() as c:
                    used = c
                    if pipelined:  # BEGIN, the statements and COMMIT sent together
                        with c.pipeline(), c.transaction():
                            write(c)
                    else:
                        with c.transaction():
                            write(c)
                return
            except (psycopg.errors.DeadlockDetected, psycopg.errors.SerializationFailure, psycopg.errors.UniqueViolation):
                if attempt == RETRIES:
                    raise
                log.info("store_write_retried", attempt=attempt + 1)
            except psycopg.OperationalError:
                if attempt == RETRIES or used is None or not used.broken:
                    raise
                log.info("store_reconnected", location=self.location)

    def _rows(self, sql: str, params: Sequence[Any]) -> list[tuple[Any, ...]]:
        """A read's rows; a pooled connection the server ended meanwhile (a restart, a failover) is replaced, once."""
        for attempt in range(2):
            with self.pool.connection() as c:
                try:
                    return c.execute(sql, params).fetchall()  # our own constant SQL
                except psycopg.OperationalError:
                    if attempt or not c.broken:
                        raise
                    log.info("store_reconnected", location=self.location)
        raise AssertionError("unreachable")

    def _bounded(self, write: Callable[[psycopg.Connection], None]) -> None:
        """A write that requests wait for: its lock waits bounded by the deadline, refused while the store is stalled."""
        with self.stall.call() as wait_ms:

            def bounded(c: psycopg.Connection) -> None:
                c.execute("SELECT set_config('lock_timeout', %s, true)", (f"{max(wait_ms, 1)}ms",))  # 0 would be for ever
                write(c)

            self._retrying(bounded, pipelined=True)

    def write(self, changes: Changes) -> None:
        self._bounded(lambda c: self._write(c, changes))

    def _write(self, c: psycopg.Connection, changes: Changes) -> None:
        _many(c, _UPSERT_SESSION, [_row(r) for r in _sorted(changes.sessions, lambda r: (r.agent_id, r.session_id))])
        for chain in changes.chains:
            key = (chain.agent_id, chain.session_id)
            if chain.replaces:
                c.execute("DELETE FROM chain WHERE agent_id = %s AND session_id = %s AND pos >= %s", (*key, chain.start + len(chain.links)))
            _many(
                c,
                "INSERT INTO chain VALUES (%s, %s, %s, %s) ON CONFLICT (agent_id, session_id, pos) DO UPDATE SET link = excluded.link",
                [(*key, chain.start + i, link) for i, link in enumerate(chain.links)],
            )
        _many(
            c,
            "INSERT INTO links VALUES (%s, %s, %s) ON CONFLICT (agent_id, link) DO UPDATE SET session_id = excluded.session_id",
            _sorted(changes.links, lambda t: t[:2]),
        )
        _many(c, "DELETE FROM tips WHERE agent_id = %s AND link = %s", _sorted([(a, link) for a, link, s in changes.tips if s is None], lambda t: t))
        _many(
            c,
            "INSERT INTO tips VALUES (%s, %s, %s) ON CONFLICT (agent_id, link) DO UPDATE SET session_id = excluded.session_id",
            _sorted([t for t in changes.tips if t[2] is not None], lambda t: t[:2]),
        )
        _many(
            c,
            "INSERT INTO decisions VALUES (%s, %s, %s, %s) ON CONFLICT (agent_id, session_id, link) DO UPDATE SET body = excluded.body",
            _sorted([(a, s, link, _json(body)) for a, s, link, body in changes.decisions], lambda t: t[:3]),
        )
        _many(
            c,
            "INSERT INTO refs VALUES (%s, %s, %s, %s) ON CONFLICT (agent_id, session_id, ref_id) DO UPDATE SET original = excluded.original",
            _sorted([(a, s, r, _text(o)) for a, s, r, o in changes.refs], lambda t: t[:3]),
        )
        _many(
            c,
            "INSERT INTO refs SELECT agent_id, %s, ref_id, original FROM refs WHERE agent_id = %s AND session_id = %s AND ref_id = ANY(%s) "
            "ORDER BY ref_id ON CONFLICT DO NOTHING",
            [(child, a, parent, list(ids)) for a, parent, child, ids in changes.ref_copies],
        )

    def write_background(self, items: Sequence[Background], lock: AbstractContextManager[object] | None = None) -> None:
        now = time.time()
        reports = [i for i in items if isinstance(i, Report)]
        report_rows = [(r.agent_id, r.session_id, r.key, now, _json(redact_value(r.body))) for r in reports]
        kept = sorted({(r.agent_id, r.session_id, r.keep) for r in reports})
        usage_rows = [(u.upstream_prompt_tokens, u.cached_tokens, u.calibration, u.agent_id, u.session_id) for u in items if isinstance(u, Usage)]
        audit_rows = [(a.agent_id, a.session_id, a.request_id, now, _json(redact_value(a.body))) for a in items if isinstance(a, Audit)]
        ratios: dict[str, float] = {m.model: m.ratio for m in items if isinstance(m, ModelRatio)}

        def write(c: psycopg.Connection) -> None:
            _many(
                c, "INSERT INTO reports (agent_id, session_id, key, created_at, body) VALUES (%s, %s, %s, %s, %s) ON CONFLICT DO NOTHING", report_rows
            )
            for agent_id, session_id, keep in kept:
                c.execute(
                    "DELETE FROM reports WHERE id IN (SELECT id FROM reports WHERE agent_id = %s AND session_id = %s ORDER BY id DESC OFFSET %s)",
                    (agent_id, session_id, keep),
                )
            _many(
                c,
                "UPDATE sessions SET upstream_prompt_tokens = coalesce(%s, upstream_prompt_tokens), cached_tokens = coalesce(%s, "
                "cached_tokens), calibration = coalesce(%s, calibration) WHERE agent_id = %s AND session_id = %s",
                usage_rows,
            )
            _many(
                c,
                "INSERT INTO audit (agent_id, session_id, request_id, created_at, body) VALUES (%s, %s, %s, %s, %s) ON CONFLICT DO NOTHING",
                audit_rows,
            )
            _many(
                c,
                "INSERT INTO model_calibration VALUES (%s, %s, %s) ON CONFLICT (model) DO UPDATE SET ratio = excluded.ratio, "
                "updated_at = excluded.updated_at",
                [(m, r, now) for m, r in sorted(ratios.items())],
            )

        with lock if lock is not None else nullcontext():
            self._bounded(write)

    def _find(self, table: str, agent_id: str, links: Sequence[str]) -> dict[str, str]:
        if not links:
            return {}
        return dict(self._rows(f"SELECT link, session_id FROM {table} WHERE agent_id = %s AND link = ANY(%s)", (agent_id, list(links))))

    def find_tips(self, agent_id: str, links: Sequence[str]) -> dict[str, str]:
        return self._find("tips", agent_id, links)

    def find_links(self, agent_id: str, links: Sequence[str]) -> dict[str, str]:
        return self._find("links", agent_id, links)

    def session_version(self, agent_id: str, session_id: str) -> int | None:
        rows = self._rows("SELECT version FROM sessions WHERE agent_id = %s AND session_id = %s", (agent_id, session_id))
        return int(rows[0][0]) if rows else None

    def session_lock(self, agent_id: str, session_id: str) -> AdvisoryLock:
        """An advisory lock every replica on this database honours (memory/store/pg_locks.py)."""
        return self._locks.lock(agent_id, session_id)

    def load_session(self, agent_id: str, session_id: str) -> StoredSession | None:
        rows = self._rows(_LOAD_SESSION, (agent_id, session_id))  # one statement: one round trip, one snapshot (all agree)
        if not rows:
            return None
        *record, links, decided, bodies, tip = rows[0]
        decisions = {link: json.loads(body) for link, body in zip(decided, bodies, strict=True)}
        return StoredSession(SessionRecord(*record), tuple(links), decisions, bool(links) and bool(tip))

    def reports(self, agent_id: str, session_id: str, limit: int) -> list[dict[str, Any]]:
        rows = self._rows("SELECT body FROM reports WHERE agent_id = %s AND session_id = %s ORDER BY id DESC LIMIT %s", (agent_id, session_id, limit))
        return [json.loads(b) for (b,) in rows][::-1]

    def session_ids(self, agent_id: str) -> list[str]:
        rows = self._rows("SELECT session_id FROM sessions WHERE agent_id = %s ORDER BY last_seen DESC, session_id", (agent_id,))
        return [r[0] for r in rows]

    def agents(self) -> list[tuple[str, int, float]]:
        rows = self._rows("SELECT agent_id, COUNT(*), MAX(last_seen) FROM sessions GROUP BY agent_id ORDER BY MAX(last_seen) DESC, agent_id", ())
        return [(r[0], int(r[1]), float(r[2])) for r in rows]

    def find_ref(self, agent_id: str, ref_id: str) -> str | None:
        rows = self._rows("SELECT original FROM refs WHERE agent_id = %s AND ref_id = %s LIMIT 1", (agent_id, ref_id))
        return bytes(rows[0][0]).decode("utf-8", "surrogatepass") if rows else None

    def audit(self, agent_id: str, session_id: str) -> list[dict[str, Any]]:
        rows = self._rows("SELECT body FROM audit WHERE agent_id = %s AND session_id = %s ORDER BY id", (agent_id, session_id))
        return [json.loads(b) for (b,) in rows]

    def audit_records(self, since: float | None = None) -> Iterator[Any]:
        """Every agent's audit records stored at or after ``since`` (all when None), oldest first, streamed (``ruyi report``;
        its ``AuditRecord`` comes with the report's work, memory/store/base.py)."""
        from memory.store.base import AuditRecord

        with self.pool.connection() as c, c.cursor() as cur:
            rows = cur.stream(
                "SELECT agent_id, session_id, request_id, created_at, body FROM audit WHERE created_at >= %s ORDER BY created_at, id",
                (since if since is not None else float("-inf"),),
            )
            for agent_id, session_id, request_id, created_at, body in rows:
                yield AuditRecord(agent_id, session_id, request_id, float(created_at), json.loads(body))

    def ratios(self) -> list[tuple[str, float]]:
        rows = self._rows("SELECT model, ratio FROM model_calibration ORDER BY updated_at, model", ())
        return [(m, float(r)) for m, r in rows]

    def expire(self, before: float, limit: int) -> list[tuple[str, str]]:
        gone = self._rows(
            "SELECT agent_id, session_id FROM sessions WHERE last_seen < %s ORDER BY last_seen, agent_id, session_id LIMIT %s", (before, limit)
        )
        if not gone:
            return []

        def write(c: psycopg.Connection) -> None:
            _many(
                c,
                "DELETE FROM tips WHERE agent_id = %s AND session_id = %s AND link = (SELECT link FROM chain WHERE "
                "agent_id = tips.agent_id AND session_id = tips.session_id ORDER BY pos DESC LIMIT 1)",
                gone,
            )
            _many(c, "DELETE FROM chain WHERE agent_id = %s AND session_id = %s", gone)
            for table in _PER_SESSION:
                _many(c, f"DELETE FROM {table} WHERE agent_id = %s AND session_id = %s", gone)

        self._retrying(write)
        return [(a, s) for a, s in gone]

    def forget(self, agent_id: str, session_id: str | None = None) -> dict[str, int]:
        removed: dict[str, int] = {}

        def write(c: psycopg.Connection) -> None:
            for table, per_session in self._owned:
                if session_id is None:  # the agent and its sub-agents (agent/…)
                    cur = c.execute(f"DELETE FROM {table} WHERE agent_id = %s OR starts_with(agent_id, %s)", (agent_id, agent_id + "/"))
                elif per_session:
                    cur = c.execute(f"DELETE FROM {table} WHERE agent_id = %s AND session_id = %s", (agent_id, session_id))
                else:
                    continue
                removed[table] = cur.rowcount

        self._retrying(write)
        return removed

    def compact(self, pages: int | None = None) -> int:
        """PostgreSQL reuses the space of removed rows itself (autovacuum): nothing is left to give back here."""
        return 0

    def checkpoint(self) -> None:
        """Nothing to do: PostgreSQL checkpoints on its own."""

    def close(self) -> None:
        self._locks.close()
        self.pool.close()


def _owned_tables(conn: psycopg.Connection) -> tuple[tuple[str, bool], ...]:
    """Every table of the store's schema with an agent_id column, and whether it also has session_id: what `forget` clears."""
    rows = conn.execute(
        "SELECT table_name, bool_or(column_name = 'session_id') FROM information_schema.columns WHERE table_schema = current_schema() "
        "AND table_name IN (SELECT table_name FROM information_schema.columns WHERE table_schema = current_schema() "
        "AND column_name = 'agent_id') GROUP BY table_name ORDER BY table_name"
    ).fetchall()
    return tuple((name, bool(per_session)) for name, per_session in rows)
