"""A connection of its own to the store's database (or to one in memory without a store), migrated, used under one lock."""

from __future__ import annotations

import json
import os
import sqlite3
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from memory.store.base import Stall, StoreError
from memory.store.locks import WatchedLock
from memory.store.sqlite_recall import WAL_PAGES
from memory.store.sqlite_schema import migrate


@contextmanager
def immediate(conn: sqlite3.Connection) -> Iterator[sqlite3.Connection]:
    """One write transaction on ``conn`` (the write lock taken at once): committed whole, or rolled back whole."""
    conn.execute("BEGIN IMMEDIATE")
    try:
        yield conn
    except BaseException:
        conn.execute("ROLLBACK")
        raise
    conn.execute("COMMIT")


def private_file(path: Path) -> None:
    """The database file (and SQLite's -wal and -shm beside it, which take its mode) readable by its owner only,
    whatever the umask or a data directory made by someone else (the Docker image's ``/data``): it holds what
    agents saw."""
    path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    try:  # never open (and close) a descriptor of an existing database: closing one drops this process's SQLite locks on it
        os.close(os.open(path, os.O_RDWR | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o600))
    except FileExistsError:
        pass
    for name in (path, path.with_name(path.name + "-wal"), path.with_name(path.name + "-shm")):
        try:
            if name.stat().st_mode & 0o077:
                name.chmod(0o600)
        except FileNotFoundError:
            continue


class Database:
    """What the agent keeps (anchors, notebook, snapshots) lives in the store's file beside the sessions, on its own
    connection (WAL lets it read while the registry writes). Every call runs under ``lock``, in a worker thread; a
    change is one ``transaction``: all of it or nothing, even when the process is killed in the middle."""

    def __init__(self, path: Path | None = None, busy_timeout_ms: int = 5000, deadline_ms: int | None = None) -> None:
        self.location = str(path) if path is not None else ":memory:"
        self.lock = WatchedLock()
        self._busy_ms = busy_timeout_ms
        self.stall = Stall(min(busy_timeout_ms, deadline_ms) if deadline_ms is not None else busy_timeout_ms, self.location)
        """A write waits at most ``store.deadline_ms`` for the database (its reads, on the request path, wait for this
        lock meanwhile); while the store stays held, only a short try (memory/store/base.py: Stall)."""
        try:
            if path is not None:
                private_file(path)
            self._conn = sqlite3.connect(self.location, timeout=busy_timeout_ms / 1000, isolation_level=None, check_same_thread=False)
            if path is not None:
                self._conn.execute("PRAGMA journal_mode = WAL")
                self._conn.execute(f"PRAGMA wal_autocheckpoint = {WAL_PAGES}")  # the log stays about 1 MiB
                self._conn.execute("PRAGMA synchronous = NORMAL")
            migrate(self._conn, path or Path(":memory:"))
        except (OSError, sqlite3.Error) as exc:
            raise StoreError(f"{self.location}: cannot use the database ({exc})") from None

    @contextmanager
    def transaction(self) -> Iterator[sqlite3.Connection]:
        """One write: committed whole, or rolled back whole."""
        with self.lock, self.stall.call() as wait_ms:
            self._conn.execute(f"PRAGMA busy_timeout = {wait_ms}")
            try:
                with immediate(self._conn) as conn:
                    yield conn
            finally:
                self._conn.execute(f"PRAGMA busy_timeout = {self._busy_ms}")

    @contextmanager
    def reading(self) -> Iterator[sqlite3.Connection]:
        with self.lock:
            yield self._conn

    def close(self) -> None:
        with self.lock:
            self._conn.close()


def dumps(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"))
