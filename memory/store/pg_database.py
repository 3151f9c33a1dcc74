"""Pools of connections to the PostgreSQL store, the schema migrated when one opens; the keeper's tables on one, in SQLite's SQL."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from functools import lru_cache
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


def open_pool(url: str, max_size: int, name: str, checked: bool = False) -> psycopg_pool.ConnectionPool:
    """Connections in autocommit (a write opens its own transaction), the schema migrated first; ``checked``: each
    connection is checked (one round trip) before it is handed out, and replaced if the server ended it (a restart,
    a failover), for callers that cannot simply try again (the store's own calls do). Raises StoreError naming the
    URL (without its password) when the database cannot be reached or used."""
    location = location_of(url)
    try:
        with psycopg.connect(url, autocommit=True, connect_timeout=CONNECT_TIMEOUT_S) as conn:
            migrate(conn, location)
    except psycopg.Error as exc:
        raise StoreError(f"{location}: cannot use the database ({str(exc).strip()})") from None
    pool = psycopg_pool.ConnectionPool(url, min_size=1, max_size=max_size, name=name, open=False,
                                       check=psycopg_pool.ConnectionPool.check_connection if checked else None,
                                       kwargs={"autocommit": True, "connect_timeout": CONNECT_TIMEOUT_S})
    try:
        pool.open(wait=True, timeout=CONNECT_TIMEOUT_S)
    except psycopg_pool.PoolTimeout:
        pool.close()
        raise StoreError(f"{location}: cannot open a pool of connections") from None
    return pool


@lru_cache(maxsize=512)
def pg_sql(sql: str) -> str:
    """SQLite's placeholders as psycopg's (the keeper's SQL is written once, for both backends)."""
    return sql.replace("%", "%%").replace("?", "%s")


class QmarkConnection:
    """A connection that takes SQLite's ``?`` placeholders (DB-API's qmark style): what the keeper's tables (anchors,
    notebook, forms) call."""

    def __init__(self, conn: psycopg.Connection) -> None:
        self._conn = conn

    def execute(self, sql: str, params: Sequence[Any] = ()) -> psycopg.Cursor[Any]:
        return self._conn.execute(pg_sql(sql), params)  # type: ignore[call-overload]

    def executemany(self, sql: str, rows: Sequence[Sequence[Any]]) -> None:
        with self._conn.cursor() as cur:
            cur.executemany(pg_sql(sql), rows)  # type: ignore[call-overload]


class PgDatabase:
    """The keeper's connection (memory/store/sqlite_database.py's twin): every change one ``transaction``, all of it or
    nothing, serialized among replicas by an advisory lock (as BEGIN IMMEDIATE serializes SQLite's writers)."""

    def __init__(self, url: str, max_size: int = 4) -> None:
        self.location = location_of(url)
        self.pool = open_pool(url, max_size, "ruyi-keeper", checked=True)

    @contextmanager
    def transaction(self) -> Iterator[QmarkConnection]:
        with self.pool.connection() as conn, conn.transaction():
            conn.execute("SELECT pg_advisory_xact_lock(%s, %s)", KEEPER_LOCK)
            yield QmarkConnection(conn)

    @contextmanager
    def reading(self) -> Iterator[QmarkConnection]:
        with self.pool.connection() as conn:
            yield QmarkConnection(conn)

    def close(self) -> None:
        self.pool.close()
