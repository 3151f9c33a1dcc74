"""Opening the configured store backend: SQLite under data_dir, PostgreSQL at url, or none (``memory``); recall and the keeper's database beside it."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from memory.store.base import Store
from memory.store.options import StoreOptions
from memory.store.sqlite_database import Database
from memory.store.sqlite_recall import Recall
from memory.store.sqlite_store import SQLiteStore

if TYPE_CHECKING:
    from memory.store.pg_database import PgDatabase
    from memory.store.pg_recall import PgRecall


def open_store(options: StoreOptions) -> Store | None:
    """The configured store, created and migrated (None for ``memory``). Raises StoreError."""
    if options.backend == "memory":
        return None
    if options.backend == "postgres":
        from memory.store.pg_store import PgStore  # psycopg is loaded only by those who use it

        return PgStore(options.url, options.pool_max, options.busy_timeout_ms, options.deadline_ms)
    return SQLiteStore(Path(options.data_dir) / "ruyi.db", options.busy_timeout_ms, options.deadline_ms, options.max_bytes)


def open_recall(options: StoreOptions, store: Store | None) -> Recall | PgRecall:
    """Where turns, chunks and archives are kept and searched: the store's database, or one in memory without a store."""
    if store is None:
        return Recall()
    if options.backend == "postgres":
        from memory.store.pg_recall import PgRecall

        return PgRecall(options.url, lock_timeout_ms=options.busy_timeout_ms)
    # its writes are the background writer's, which keeps what a held database refused and tries again: never holding
    # its lock (which a request's recall search takes) longer than a request would wait for the store
    return Recall(Path(store.location), min(options.busy_timeout_ms, options.deadline_ms))


def open_database(options: StoreOptions) -> Database | PgDatabase:
    """The keeper's database (anchors, notebook, forms): the store's, or one in memory for ``memory``. Raises StoreError."""
    if options.backend == "postgres":
        from memory.store.pg_database import PgDatabase

        return PgDatabase(options.url, lock_timeout_ms=options.busy_timeout_ms)
    if options.backend == "memory":
        return Database(None, options.busy_timeout_ms)
    return Database(Path(options.data_dir) / "ruyi.db", options.busy_timeout_ms, options.deadline_ms)
