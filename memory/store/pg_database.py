"""Pools of connections to the PostgreSQL store, the schema migrated when one opens; the keeper's tables on one, in SQLite's SQL."""

from __future__ import annotations

import re
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import psycopg
import psycopg_pool

from memory.store.base import StoreError
from memory.store.pg_schema import KEEPER_LOCK, migrate

CONNECT_TIMEOUT_S = 5


def location_of(url: str) -> str:
    """The URL without its password (for messages and logs)."""
    parts = urlsplit(url)
    if parts.password is None:
        return url
    host = parts.hostname or ""
    netloc = f"{parts.username}:***@{host}" + (f":{parts.port}" if parts.port else "")
    return urlunsplit(parts._replace(netloc=netloc))


def open_pool(url: str, max_size: int, name: str, checked: bool = False, lock_timeout_ms: int = 5000) -> psycopg_pool.ConnectionPool:
    """Connections in autocommit (a write opens its own transaction), the schema migrated first; ``checked``: each
    connection is checked (one round trip) before it is handed out, and replaced if the server ended it (a restart,
    a failover), for callers that cannot simply try again (the store's own calls do). A statement waits at most
    ``lock_timeout_ms`` for a lock another process holds (``store.busy_timeout_ms``, as SQLite's writers wait), then
    fails: a worker thread is never held for ever. Raises StoreError naming the URL (without its password) when the
    database cannot be reached or used."""
    location = location_of(url)
    try:
        with psycopg.connect(url, autocommit=True, connect_timeout=CONNECT_TIMEOUT_S) as conn:
            migrate(conn, location)
    except psycopg.Error as exc:
        raise StoreError(f"{location}: cannot use the database ({str(exc).strip()})") from None
    pool = psycopg_pool.ConnectionPool(
        url,
        min_size=1,
        max_size=max_size,
        name=name,
        open=False,
        check=psycopg_pool.ConnectionPool.check_connection if checked else None,
        configure=lambda conn: _lock_timeout(conn, lock_timeout_ms),
        kwargs={"autocommit": True, "connect_timeout": CONNECT_TIMEOUT_S},
    )
    try:
        pool.open(wait=True, timeout=CONNECT_TIMEOUT_S)
    except psycopg_pool.PoolTimeout:
        pool.close()
        raise StoreError(f"{location}: cannot open a pool of connections") from None
    return pool


def _lock_timeout(conn: psycopg.Connection, ms: int) -> None:
    conn.execute("SELECT set_config('lock_timeout', %s, false)", (f"{max(ms, 1)}ms",))  # 0 would mean for ever


_INSERT_OR = re.compile(r"^\s*INSERT\s+OR\s+(IGNORE|REPLACE)\s+INTO\s+(\w+)\s*(?:\(([^)]*)\))?", re.IGNORECASE)


class Tables:
    """The columns and primary key of each table of the store's schema, read once: what SQLite's ``INSERT OR …``
    becomes in PostgreSQL's words."""

    def __init__(self, conn: psycopg.Connection) -> None:
        self.columns: dict[str, list[str]] = {}
        for table, column in conn.execute(
            "SELECT table_name, column_name FROM information_schema.columns WHERE table_schema = "
            "current_schema() ORDER BY table_name, ordinal_position"
        ).fetchall():
            self.columns.setdefault(table, []).append(column)
        self.keys: dict[str, list[str]] = {}
        for table, column in conn.execute(
            "SELECT tc.table_name, kcu.column_name FROM information_schema.table_constraints tc JOIN information_schema.key_column_usage "
            "kcu ON kcu.constraint_name = tc.constraint_name AND kcu.table_schema = tc.table_schema WHERE tc.table_schema = current_schema() "
            "AND tc.constraint_type = 'PRIMARY KEY' ORDER BY tc.table_name, kcu.ordinal_position"
        ).fetchall():
            self.keys.setdefault(table, []).append(column)
        self._sql: dict[str, str] = {}

    def sql(self, sqlite_sql: str) -> str:
        """SQLite's SQL as PostgreSQL's: ``?`` placeholders as ``%s``; ``INSERT OR IGNORE`` as ``ON CONFLICT DO NOTHING``;
        ``INSERT OR REPLACE`` as an upsert on the table's primary key (every other column it names replaced)."""
        done = self._sql.get(sqlite_sql)
        if done is None:
            done = self._sql[sqlite_sql] = self._translate(sqlite_sql)
        return done

    def _translate(self, sql: str) -> str:
        text = sql.replace("%", "%%").replace("?", "%s").rstrip().rstrip(";")
        found = _INSERT_OR.match(text)
        if found is None:
            return text
        how, table, named = found.group(1).upper(), found.group(2), found.group(3)
        text = "INSERT INTO " + text[found.end(1) :].lstrip()[len("INTO") :].lstrip()
        key = self.keys.get(table, [])
        columns = [c.strip() for c in named.split(",")] if named else self.columns.get(table, [])
        rest = [c for c in columns if c not in key]
        if how == "IGNORE" or not key or not rest:
            return text + " ON CONFLICT DO NOTHING"
        return text + f" ON CONFLICT ({', '.join(key)}) DO UPDATE SET " + ", ".join(f"{c} = excluded.{c}" for c in rest)


class QmarkConnection:
    """A connection that takes SQLite's SQL (``?`` placeholders, ``INSERT OR …``): what the keeper's tables (anchors,
    notebook, forms) call, written once for both backends."""

    def __init__(self, conn: psycopg.Connection, tables: Tables) -> None:
        self._conn = conn
        self._tables = tables

    def execute(self, sql: str, params: Sequence[Any] = ()) -> psycopg.Cursor[Any]:
        return self._conn.execute(self._tables.sql(sql), params)

    def executemany(self, sql: str, rows: Sequence[Sequence[Any]]) -> None:
        with self._conn.cursor() as cur:
            cur.executemany(self._tables.sql(sql), rows)


class PgDatabase:
    """The keeper's connection (memory/store/sqlite_database.py's twin): every change one ``transaction``, all of it or
    nothing, serialized among replicas by an advisory lock (as BEGIN IMMEDIATE serializes SQLite's writers)."""

    def __init__(self, url: str, max_size: int = 4, lock_timeout_ms: int = 5000) -> None:
        self.location = location_of(url)
        self.pool = open_pool(url, max_size, "ruyi-keeper", checked=True, lock_timeout_ms=lock_timeout_ms)
        with self.pool.connection() as conn:
            self.tables = Tables(conn)

    @contextmanager
    def transaction(self) -> Iterator[QmarkConnection]:
        with self.pool.connection() as conn, conn.transaction():
            conn.execute("SELECT pg_advisory_xact_lock(%s, %s)", KEEPER_LOCK)
            yield QmarkConnection(conn, self.tables)

    @contextmanager
    def reading(self) -> Iterator[QmarkConnection]:
        with self.pool.connection() as conn:
            yield QmarkConnection(conn, self.tables)

    def close(self) -> None:
        self.pool.close()
