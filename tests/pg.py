"""PostgreSQL for tests: a fast probe (tests skip with the reason when none answers), a schema per test run dropped after."""

from __future__ import annotations

import functools
import getpass
import os
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from urllib.parse import quote

CANDIDATES = ("postgresql://postgres@127.0.0.1:5432/test", f"postgresql://{getpass.getuser()}@127.0.0.1:5432/test")
"""Tried in order unless RUYI_TEST_PG_URL names the server (trust auth, database ``test``)."""


@functools.cache
def probe() -> tuple[str | None, str]:
    """The first server URL that answers within a second, or None and why not."""
    try:
        import psycopg
    except ImportError:
        return None, "psycopg is not installed (pip install -e '.[test]')"
    wanted = os.environ.get("RUYI_TEST_PG_URL")
    reasons = []
    for url in (wanted,) if wanted else CANDIDATES:
        try:
            with psycopg.connect(url, connect_timeout=1, autocommit=True) as conn:
                conn.execute("SELECT 1")
            return url, ""
        except psycopg.Error as exc:
            reasons.append(f"{url}: {str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__}")
    return None, "no PostgreSQL reachable (" + "; ".join(reasons) + ")"


def in_schema(base: str, schema: str) -> str:
    """The server URL with the schema as its search path (libpq's ``options``)."""
    return base + ("&" if "?" in base else "?") + "options=" + quote(f"-csearch_path={schema}")


def create_schema(base: str, prefix: str = "ruyi_test") -> tuple[str, str]:
    import psycopg

    schema = f"{prefix}_{os.getpid()}_{uuid.uuid4().hex[:8]}"
    with psycopg.connect(base, autocommit=True) as conn:
        conn.execute(f'CREATE SCHEMA "{schema}"')
    return schema, in_schema(base, schema)


def drop_schema(base: str, schema: str) -> None:
    import psycopg

    with psycopg.connect(base, autocommit=True) as conn:
        conn.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')


@contextmanager
def fresh_schema(base: str) -> Iterator[str]:
    """A schema of its own for one test (dropped after): its URL."""
    schema, url = create_schema(base, "ruyi_fresh")
    try:
        yield url
    finally:
        drop_schema(base, schema)


def empty_tables(base: str, schema: str) -> None:
    """Every table of the schema emptied (its schema_version kept): each test starts from a migrated, empty store. DELETE,
    not TRUNCATE: a test leaves a few rows, and TRUNCATE makes new files for every table (five times slower here)."""
    import psycopg

    with psycopg.connect(base, autocommit=True) as conn:
        names = [
            r[0]
            for r in conn.execute("SELECT tablename FROM pg_tables WHERE schemaname = %s AND tablename <> 'schema_version'", (schema,)).fetchall()
        ]
        with conn.transaction():
            for name in names:
                conn.execute(f'DELETE FROM "{schema}"."{name}"')
