"""Choosing the PostgreSQL driver, and what a store operation costs on SQLite vs PostgreSQL, side by side in one run.

The store's interface is synchronous and runs in worker threads (proxy/offload.py), so each driver is measured as the
store would call it from such a thread: psycopg 3 with its pool (the real ``PgStore``), and asyncpg reached from that
thread through an event loop of its own (``run_coroutine_threadsafe``), plus asyncpg on its own loop (its best case,
what it would cost if the store were asynchronous). Then the same operations through ``SQLiteStore`` and ``PgStore``
(PostgreSQL as configured, and with ``synchronous_commit = off``: a commit not waiting for its WAL flush, the
durability of SQLite's ``synchronous = NORMAL``, which Ruyi uses: a crash of Ruyi loses nothing either way).

The hot operations, per request of a session: ``find_tips`` (the messages since the last request), the durable
``write`` of what it decided (the session row, two chain positions, two links, the tip moved, one decision, one ref),
and ``load_session`` (a session not in memory). The same SQL on both drivers (load_session: one statement; write: seven
statements in one transaction, which psycopg sends as one pipeline and asyncpg, which has no pipeline across
statements, one by one). Each request goes to every side in turn, the order rotating; medians of all calls.

    .venv/bin/python bench/durable/pg_driver.py [--requests 400] [--rounds 5] [--url postgresql://postgres@127.0.0.1:5432/test]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from memory.store.base import ChainUpdate, Changes, SessionRecord, Store
from memory.store.pg_store import _LOAD_SESSION, PgStore
from memory.store.sqlite_store import SQLiteStore
from tests import pg

OPS = ("find_tips", "write", "load_session")


def changes_of(i: int, session: str) -> Changes:
    a, first, second = "bench", f"{session}-l{2 * i}", f"{session}-l{2 * i + 1}"
    return Changes(
        sessions=[SessionRecord(a, session, created_at=1.0, last_seen=float(i), requests=i, prompt_tokens=1000 + i)],
        chains=[ChainUpdate(a, session, 2 * i, (first, second), replaces=False)],
        links=[(a, first, session), (a, second, session)],
        tips=[(a, f"{session}-l{2 * i - 1}", None), (a, second, session)],
        decisions=[(a, session, first, [{"ref_id": f"r{i}", "new_text": "[ruyi: pruned]"}])],
        refs=[(a, session, f"r{i}", "x" * 400)],
    )


class AsyncpgStore:
    """The same three operations and SQL on asyncpg (``$n`` placeholders), reached from the calling thread through a loop."""

    def __init__(self, url: str, own_loop: bool) -> None:
        import asyncpg

        self.own_loop = own_loop
        if own_loop:
            self.loop = asyncio.new_event_loop()
        else:
            self.loop = asyncio.new_event_loop()
            self.thread = threading.Thread(target=self.loop.run_forever, daemon=True)
            self.thread.start()
        schema = url.split("search_path%3D")[-1]
        base = url.split("?")[0]

        async def no_reset(conn: Any) -> None:
            """psycopg_pool returns a connection as it is: so does asyncpg's here (its default reset is one more round trip)."""

        async def make() -> Any:
            return await asyncpg.create_pool(base, min_size=1, max_size=8, server_settings={"search_path": schema}, reset=no_reset)

        self.pool = self._run(make())

    def _run(self, coro: Any) -> Any:
        if self.own_loop:
            return self.loop.run_until_complete(coro)
        return asyncio.run_coroutine_threadsafe(coro, self.loop).result()

    async def _find(self, agent: str, links: list[str]) -> dict[str, str]:
        rows = await self.pool.fetch("SELECT link, session_id FROM tips WHERE agent_id = $1 AND link = ANY($2)", agent, links)
        return {r[0]: r[1] for r in rows}

    async def _write(self, ch: Changes) -> None:
        async with self.pool.acquire() as c, c.transaction():
            r = ch.sessions[0]
            await c.execute(
                "INSERT INTO sessions (agent_id, session_id, created_at, last_seen, requests, prompt_tokens) VALUES "
                "($1, $2, $3, $4, $5, $6) ON CONFLICT (agent_id, session_id) DO UPDATE SET last_seen = excluded.last_seen, "
                "requests = excluded.requests, prompt_tokens = excluded.prompt_tokens",
                r.agent_id,
                r.session_id,
                r.created_at,
                r.last_seen,
                r.requests,
                r.prompt_tokens,
            )
            chain = ch.chains[0]
            await c.executemany(
                "INSERT INTO chain VALUES ($1, $2, $3, $4) ON CONFLICT (agent_id, session_id, pos) DO UPDATE SET link = excluded.link",
                [(chain.agent_id, chain.session_id, chain.start + i, link) for i, link in enumerate(chain.links)],
            )
            await c.executemany(
                "INSERT INTO links VALUES ($1, $2, $3) ON CONFLICT (agent_id, link) DO UPDATE SET session_id = excluded.session_id", ch.links
            )
            await c.executemany("DELETE FROM tips WHERE agent_id = $1 AND link = $2", [(a, link) for a, link, s in ch.tips if s is None])
            await c.executemany(
                "INSERT INTO tips VALUES ($1, $2, $3) ON CONFLICT (agent_id, link) DO UPDATE SET session_id = excluded.session_id",
                [t for t in ch.tips if t[2] is not None],
            )
            await c.executemany(
                "INSERT INTO decisions VALUES ($1, $2, $3, $4) ON CONFLICT (agent_id, session_id, link) DO UPDATE SET body = excluded.body",
                [(a, s, link, json.dumps(body)) for a, s, link, body in ch.decisions],
            )
            await c.executemany(
                "INSERT INTO refs VALUES ($1, $2, $3, $4) ON CONFLICT (agent_id, session_id, ref_id) DO UPDATE SET original = excluded.original",
                [(a, s, r, o.encode()) for a, s, r, o in ch.refs],
            )

    async def _load(self, agent: str, session: str) -> Any:
        row = await self.pool.fetchrow(_LOAD_SESSION.replace("%s", "$1", 1).replace("%s", "$2", 1), agent, session)
        return row, {link: json.loads(body) for link, body in zip(row[-3], row[-2], strict=True)}

    def find_tips(self, agent: str, links: list[str]) -> dict[str, str]:
        return self._run(self._find(agent, links))  # type: ignore[no-any-return]

    def write(self, changes: Changes) -> None:
        self._run(self._write(changes))

    def load_session(self, agent: str, session: str) -> Any:
        return self._run(self._load(agent, session))

    def close(self) -> None:
        self._run(self.pool.close())
        if not self.own_loop:
            self.loop.call_soon_threadsafe(self.loop.stop)
            self.thread.join()


def one_request(store: Any, session: str, i: int) -> dict[str, float]:
    """Microseconds each operation of one request of a session took."""
    t0 = time.perf_counter()
    store.find_tips("bench", [f"{session}-l{2 * i - 1}", f"{session}-l{2 * i - 2}"])
    t1 = time.perf_counter()
    store.write(changes_of(i, session))
    t2 = time.perf_counter()
    store.load_session("bench", session)
    t3 = time.perf_counter()
    return {"find_tips": (t1 - t0) * 1e6, "write": (t2 - t1) * 1e6, "load_session": (t3 - t2) * 1e6}


def compare(sides: dict[str, Callable[[], Any]], requests: int, rounds: int) -> dict[str, dict[str, float]]:
    """Each request goes to every side in turn (the order rotating), so that all sides meet the same moment of a
    shared machine; a session per side and round (its chain grows to 2 x requests links). Medians per operation."""
    opened = {name: make() for name, make in sides.items()}
    timings: dict[str, dict[str, list[float]]] = {name: {op: [] for op in OPS} for name in sides}
    names = list(sides)
    for n in range(rounds):
        for i in range(requests):
            k = (n * requests + i) % len(names)
            for name in names[k:] + names[:k]:
                for op, us in one_request(opened[name], f"{name}-r{n}", i).items():
                    timings[name][op].append(us)
    for store in opened.values():
        store.close()
    return {name: {op: statistics.median(values) for op, values in ops.items()} for name, ops in timings.items()}


def table(title: str, medians: dict[str, dict[str, float]], base: str) -> None:
    print(f"\n{title}  (µs per call, median of all calls; ratio to {base})")
    print(f"{'side':<34}" + "".join(f"{op:>22}" for op in OPS))
    for name, row in medians.items():
        cells = "".join(f"{row[op]:>12.0f} ({row[op] / medians[base][op]:>5.2f}x)" for op in OPS)
        print(f"{name:<34}{cells}")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--requests", type=int, default=400)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--url", default=None, help="the PostgreSQL server (a schema of its own is made and dropped)")
    args = parser.parse_args()
    server = args.url or pg.probe()[0]
    if server is None:
        print(f"no PostgreSQL: {pg.probe()[1]}")
        return 1
    schema, url = pg.create_schema(server, "ruyi_bench")
    try:
        PgStore(url).close()  # migrated
        drivers: dict[str, Callable[[], Any]] = {"psycopg 3 (pool, sync: PgStore)": lambda: PgStore(url)}
        try:
            import asyncpg  # noqa: F401

            drivers["asyncpg via a loop thread"] = lambda: AsyncpgStore(url, own_loop=False)
            drivers["asyncpg on its own loop (best case)"] = lambda: AsyncpgStore(url, own_loop=True)
        except ImportError:
            print("asyncpg is not installed (pip install asyncpg): psycopg 3 alone")
        table(
            "Drivers, called as the store is (from a worker thread)", compare(drivers, args.requests, args.rounds), "psycopg 3 (pool, sync: PgStore)"
        )
        with tempfile.TemporaryDirectory() as tmp:
            lazy = url + "%20-csynchronous_commit%3Doff"  # the server's own setting, per connection here
            backends: dict[str, Callable[[], Store]] = {
                "SQLite (WAL, one file)": lambda: SQLiteStore(Path(tmp) / "ruyi.db"),
                "PostgreSQL (psycopg 3, 127.0.0.1)": lambda: PgStore(url),
                "PostgreSQL, synchronous_commit=off": lambda: PgStore(lazy),
            }
            table("Store operations, SQLite vs PostgreSQL", compare(backends, args.requests, args.rounds), "SQLite (WAL, one file)")
    finally:
        pg.drop_schema(server, schema)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
