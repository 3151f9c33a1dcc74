"""Per-session locks every replica on one PostgreSQL database honours: session-level advisory locks, each on a connection held while it is."""

from __future__ import annotations

import threading

import psycopg
import psycopg_pool

from memory.store.locks import slot_of

LOCK_CLASS = 0x52555953
"""pg_advisory_lock(class, key)'s class for sessions ('RUYS'; the schema's own locks use another, memory/store/pg_schema.py)."""
POOL_MAX = 64
"""Sessions this process may hold or wait for at once (each lock holds a connection; more wait for one)."""


def key_of(agent_id: str, session_id: str) -> int:
    """The session's advisory-lock key: a 31-bit hash of (agent, session), as the SQLite lock file's byte."""
    return slot_of(agent_id, session_id)


class PgSessionLocks:
    """Locks on sessions shared by every process on the database. A lock is ``pg_advisory_lock(class, key)`` on a
    connection of its own (a session-level advisory lock belongs to the connection that took it), given back to the
    pool once unlocked; PostgreSQL releases it when that connection ends, a replica killed with SIGKILL included.
    The pool is opened on first use: a single process never opens it."""

    def __init__(self, url: str) -> None:
        self.url = url
        self._pool: psycopg_pool.ConnectionPool | None = None
        self._guard = threading.Lock()

    def lock(self, agent_id: str, session_id: str) -> AdvisoryLock:
        return AdvisoryLock(self, key_of(agent_id, session_id))

    def pool(self) -> psycopg_pool.ConnectionPool:
        with self._guard:
            if self._pool is None:
                self._pool = psycopg_pool.ConnectionPool(
                    self.url, min_size=0, max_size=POOL_MAX, name="ruyi-session-locks", open=True, kwargs={"autocommit": True}
                )
            return self._pool

    def close(self) -> None:
        with self._guard:
            if self._pool is not None:
                self._pool.close()
                self._pool = None


class AdvisoryLock:
    """One session's lock (`memory.store.base.SessionLock`): blocks until held; released from any thread."""

    def __init__(self, locks: PgSessionLocks, key: int) -> None:
        self._locks, self.key = locks, key
        self._conn: psycopg.Connection | None = None

    def acquire(self, timeout: float | None = None) -> bool:
        """Wait until held (at most ``timeout`` seconds, PostgreSQL's ``lock_timeout``: False when it was not)."""
        pool = self._locks.pool()
        conn = pool.getconn(timeout)
        try:
            wait = f"{int(1000 * timeout)}ms" if timeout is not None else "0"  # 0: no limit
            conn.execute("SELECT set_config('lock_timeout', %s, false), pg_advisory_lock(%s, %s)", (wait, LOCK_CLASS, self.key))
        except psycopg.errors.LockNotAvailable:
            pool.putconn(conn)
            return False
        except BaseException:
            pool.putconn(conn)
            raise
        self._conn = conn
        return True

    def release(self) -> None:
        conn, self._conn = self._conn, None
        if conn is None:
            return
        pool = self._locks.pool()
        try:
            conn.execute("SELECT pg_advisory_unlock(%s, %s)", (LOCK_CLASS, self.key))
        except psycopg.Error:  # the connection broke: its end released the lock; the pool drops it
            pass
        pool.putconn(conn)

    def __enter__(self) -> AdvisoryLock:
        self.acquire()
        return self

    def __exit__(self, *exc: object) -> None:
        self.release()
