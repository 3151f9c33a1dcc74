"""``store.max_bytes`` on a real SQLite file: the oldest sessions' raw turns and chunks go first, decisions in force last,
in small steps; a running Ruyi keeps its store under the limit in the background and counts it in /ruyi/v1/stats."""

from __future__ import annotations

import asyncio
import random
import time
from pathlib import Path

import aiohttp

from memory.serialized import SerializedRegistry
from memory.sessions import SessionRegistry
from memory.store.base import ChainUpdate, Changes, ChunkRow, SessionRecord, Turn
from memory.store.sqlite_recall import Recall
from memory.store.sqlite_store import SQLiteStore
from memory.sweep import shrink
from tests.conftest import MakeProxy, base_url

SESSIONS = 12
_RNG = random.Random(27)
TEXT = " ".join(f"w{_RNG.randrange(10**6)}" for _ in range(400))  # ~3 KB a turn, ~1.3 KB packed (a repeated line packs to 60 B)


def fill(path: Path) -> None:
    """Twelve sessions, each seen later than the one before, with decisions, 60 raw turns and 10 chunks."""
    store = SQLiteStore(path)
    recall = Recall(path)
    try:
        for i in range(SESSIONS):
            key = ("a", f"s{i:02}")
            seen = time.time() - 3600 + i  # within sessions.ttl_days: the daily sweep keeps them all
            store.write(
                Changes(
                    sessions=[SessionRecord(*key, created_at=seen, last_seen=seen)],
                    chains=[ChainUpdate(*key, 0, ("l0", "l1"), False)],
                    decisions=[(*key, "l1", [{"target": "x"}])],
                )
            )
            recall.write_background(
                [Turn(*key, t, f"h{t}", "tool", {"role": "tool", "content": TEXT}, TEXT) for t in range(60)]
                + [ChunkRow(*key, f"c{c}", c, c, "tool", (), (), "line", TEXT) for c in range(10)]
            )
    finally:
        recall.close()
        store.close()


def counts(path: Path, table: str) -> dict[str, int]:
    store = SQLiteStore(path)
    try:
        rows = store._conn.execute(f"SELECT session_id, count(*) FROM {table} GROUP BY session_id").fetchall()
        return {s: n for s, n in rows}
    finally:
        store.close()


def test_the_oldest_sessions_raw_turns_go_first_and_decisions_last(tmp_path: Path) -> None:
    path = tmp_path / "ruyi.db"
    fill(path)
    store = SQLiteStore(path)
    full_used, full_disk = store.size()
    store.max_bytes = full_used * 2 // 3  # a third must go: turns and chunks of the oldest sessions are enough
    registry = SerializedRegistry(SessionRegistry(store=store))
    steps = shrink(registry)
    used, disk = store.size()
    assert steps >= 2 and used <= store.max_bytes and disk <= full_disk
    turns = counts(path, "turns")
    assert "s00" not in turns and turns.get(f"s{SESSIONS - 1:02}") == 60, "the oldest lose their raw turns, the newest keep them"
    assert "s00" not in counts(path, "chunks")
    assert len(counts(path, "decisions")) == SESSIONS, "no session (no decision in force) went while raw turns could go"
    assert len(counts(path, "sessions")) == SESSIONS
    assert store.shrunk["turns"] > 0 and store.shrunk["chunks"] > 0 and "sessions" not in store.shrunk
    store.max_bytes = 1  # far below anything: whole sessions go, oldest first, but never the newest
    shrink(registry)
    assert list(counts(path, "sessions")) == [f"s{SESSIONS - 1:02}"] and list(counts(path, "decisions")) == [f"s{SESSIONS - 1:02}"]
    assert store.shrunk["sessions"] == SESSIONS - 1
    store.close()


async def test_a_running_ruyi_keeps_its_store_under_max_bytes(make_proxy: MakeProxy, data_dir: Path) -> None:
    fill(data_dir / "ruyi.db")
    used = SQLiteStore(data_dir / "ruyi.db").size()[0]
    proxy = await make_proxy(store={"max_bytes": used // 2})  # checked at start-up, then every 30 s
    async with aiohttp.ClientSession() as http:
        for _ in range(400):  # bounded poll: the background steps run one by one, with a rest between two
            async with http.get(base_url(proxy) + "/ruyi/v1/stats") as r:
                size = (await r.json())["store_size"]
            removed = size["removed"]  # a step counts itself once its transaction is in: wait for both
            if removed.get("turns", 0) and removed.get("steps", 0) and size["bytes"] and not counts(data_dir / "ruyi.db", "turns").get("s00"):
                break
            await asyncio.sleep(0.05)
    assert size["max_bytes"] == used // 2 and size["removed"]["turns"] > 0 and size["removed"]["steps"] >= 1
    assert len(counts(data_dir / "ruyi.db", "decisions")) == SESSIONS
