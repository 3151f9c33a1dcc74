"""Per-session locks every replica on one PostgreSQL database honours: a session-level advisory lock on a connection of its own."""

from __future__ import annotations

import hashlib
import threading

import psycopg
import psycopg_pool

from memory.store.pg_database import CONNECT_TIMEOUT_S

POOL_MAX = 32
"""Sessions one process may hold or wait for at once (each holds a connection while it does)."""


def key_of(agent_id: str, session_id: str) -> int:
    """The advisory lock's key (one signed 64-bit number; Ruyi's own locks use the two-number form, never this one)."""
    digest = hashlib.blake2b(f"{agent_id}\0{session_id}".encode("utf-8", "surrogatepass"), digest_size=8).digest()
    return int.from_bytes(digest, "big", signed=True)


class PgSessionLocks:
    """The locks of one store: a pool of connections opened on first use. A lock belongs to its connection: the server
    releases it when the connection ends, so a replica killed (SIGKILL included) holds nothing."""

    def __init__(self, url: str, pool_max: int = POOL_MAX) -> None:
        self.url = url
        self._pool_max = pool_max
        self._pool: psycopg_pool.ConnectionPool | None = None
        self._guard = threading.Lock()

    def lock(self, agent_id: str, session_id: str) -> PgSessionLock:
        return PgSessionLock(self, key_of(agent_id, session_id))

    def pool(self) -> psycopg_pool.ConnectionPool:
        with self._guard:
            if self._pool is None:
                self._pool = psycopg_pool.ConnectionPool(self.url, min_size=0, max_size=self._pool_max, name="ruyi-session-locks", open=True,
                                                         kwargs={"autocommit": True, "connect_timeout": CONNECT_TIMEOUT_S})
            return self._pool

    def close(self) -> None:
        with self._guard:
            if self._pool is not None:
                self._pool.close()  # every lock still held goes with its connection
                self._pool = None


class PgSessionLock:
    """One session's lock (`memory.store.base.SessionLock`): ``acquire`` blocks until held; ``release`` from any thread."""

    def __init__(self, locks: PgSessionLocks, key: int) -> None:
        self._locks, self.key = locks, key
        self._conn: psycopg.Connection | None = None

    def acquire(self) -> None:
        pool = self._locks.pool()
        conn = pool.getconn()
        try:
            conn.execute("SELECT pg_advisory_lock(%s)", (self.key,))
        except BaseException:
            pool.putconn(conn)
            raise
        self._conn = conn

    def release(self) -> None:
        conn, self._conn = self._conn, None
        if conn is None:
            return
        pool = self._locks.pool()
        try:
            conn.execute("SELECT pg_advisory_unlock(%s)", (self.key,))
        except psycopg.Error:
            conn.close()  # its session ends: the server lets the lock go
        finally:
            pool.putconn(conn)

    def __enter__(self) -> PgSessionLock:
        self.acquire()
        return self

    def __exit__(self, *exc: object) -> None:
        self.release()
