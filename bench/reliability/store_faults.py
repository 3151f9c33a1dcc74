"""The reliability suite's store scenarios (issue 27): a database another connection holds, and a full disk; each
returns its figures (a flat dict). Run through ``bench/reliability/suite.py --only stalled_store`` / ``--only full_disk``."""

from __future__ import annotations

import asyncio
import resource
import signal
import sqlite3
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from bench.processes import ROOT, stop
from bench.reliability.stack import TREE, body, client, start, stats, timed


async def stalled_store(requests: int, held_s: float) -> dict[str, Any]:
    """Another connection holds the database (BEGIN EXCLUSIVE) for ``held_s`` while ``requests`` agents send at once:
    every request answered, the sessions API too; what waited lands once it is let go."""
    stack = start({"store": {"deadline_ms": 500}} if TREE["root"] == ROOT else {})  # an older tree has no deadline
    try:
        async with client() as http:
            await timed(http, stack.url, body(0), {"X-Ruyi-Agent": "warm"})
            other = sqlite3.connect(stack.data_dir / "ruyi.db", isolation_level=None)
            other.execute("BEGIN EXCLUSIVE")
            other.execute("INSERT INTO model_calibration VALUES ('held', 1.0, 0)")
            try:
                started = time.perf_counter()
                answers = await asyncio.gather(*(timed(http, stack.url, body(i), {"X-Ruyi-Agent": f"stalled-{i}"}) for i in range(requests)))
                answered_s = time.perf_counter() - started
                async with http.get(stack.url + "/ruyi/v1/sessions", headers={"X-Ruyi-Agent": "stalled-0"}) as r:
                    api = r.status
                during = await stats(stack.url)
                await asyncio.sleep(max(0.0, held_s - (time.perf_counter() - started)))
            finally:
                other.execute("ROLLBACK")
                other.close()
            landed_s = None
            released = time.perf_counter()
            for _ in range(600):
                now = await stats(stack.url)
                if (
                    now["store_writes"]["unsaved"] == 0
                    and (now["store_queue"] or {}).get("pending", 0) == 0
                    and not (now.get("store_deadline") or {}).get("stalled")
                ):
                    landed_s = time.perf_counter() - released
                    break
                await asyncio.sleep(0.05)
        audit = (
            sqlite3.connect(stack.data_dir / "ruyi.db")
            .execute("SELECT count(DISTINCT agent_id) FROM audit WHERE agent_id LIKE 'stalled-%'")
            .fetchone()[0]
        )
        return {
            "requests": requests,
            "ok": sum(s == 200 for s, _ in answers),
            "all_answered_s": round(answered_s, 2),
            "slowest_s": round(max(t for _, t in answers), 2),
            "sessions_api": api,
            "deadline": during.get("store_deadline"),
            "landed_after_release_s": None if landed_s is None else round(landed_s, 2),
            "audited_agents": audit,
        }
    finally:
        stop(stack.procs)


async def full_disk(requests: int, full_s: float = 2.0) -> dict[str, Any]:
    """The store's files cannot be written for a while (no root needed: Ruyi's file-size limit, RLIMIT_FSIZE, set to
    0 from outside with prlimit, so every write to a regular file fails as on a full disk: a short write, then EFBIG;
    SIGXFSZ ignored, as a full disk sends none) while ``requests`` agents send: every request answered (fails
    open), Ruyi healthy; once the limit is lifted, the sessions they started reach the database (the registry
    keeps what it could not write and tries again). What was dropped meanwhile is counted by reason in
    ``/ruyi/v1/stats`` (``store_queue``)."""
    previous = signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # inherited by the Ruyi started now
    try:
        stack = start()
    finally:
        signal.signal(signal.SIGXFSZ, previous)
    limits = resource.prlimit(stack.ruyi_pid, resource.RLIMIT_FSIZE)
    try:
        async with client() as http:
            await timed(http, stack.url, body(0), {"X-Ruyi-Agent": "warm"})
            await settled(stack.url)
            resource.prlimit(stack.ruyi_pid, resource.RLIMIT_FSIZE, (0, limits[1]))  # the disk is full
            try:
                started = time.perf_counter()
                answers = await asyncio.gather(*(timed(http, stack.url, body(i), {"X-Ruyi-Agent": f"full-{i}"}) for i in range(requests)))
                answered_s = time.perf_counter() - started
                async with http.get(stack.url + "/healthz") as r:
                    health = r.status
                await asyncio.sleep(max(0.0, full_s - (time.perf_counter() - started)))  # the writer meets the full disk
                during = await stats(stack.url)
            finally:
                resource.prlimit(stack.ruyi_pid, resource.RLIMIT_FSIZE, limits)  # space returns
            freed = time.perf_counter()
            landed_s, sessions = None, 0
            for _ in range(600):  # bounded: 30 s at most
                sessions = _count(stack.data_dir, "SELECT count(DISTINCT agent_id) FROM sessions WHERE agent_id LIKE 'full-%'")
                if sessions == requests:
                    landed_s = time.perf_counter() - freed
                    break
                await asyncio.sleep(0.05)
            after_status, _ = await timed(http, stack.url, body(requests), {"X-Ruyi-Agent": "after"})
            await settled(stack.url)
            after = await stats(stack.url)
        queue = after.get("store_queue") or {}
        return {
            "requests": requests,
            "ok": sum(s == 200 for s, _ in answers),
            "all_answered_s": round(answered_s, 2),
            "healthz_while_full": health,
            "unsaved_while_full": (during.get("store_writes") or {}).get("unsaved"),
            "sessions_landed": sessions,
            "landed_after_space_s": None if landed_s is None else round(landed_s, 2),
            "audited_agents": _count(stack.data_dir, "SELECT count(DISTINCT agent_id) FROM audit WHERE agent_id LIKE 'full-%'"),
            "dropped_by_reason": queue.get("dropped_by_reason"),
            "request_after": after_status,
            "alive": stack.procs[-1].poll() is None,
        }
    finally:
        stop(stack.procs)


def _count(data_dir: Path, sql: str) -> int:
    with sqlite3.connect(f"file:{data_dir / 'ruyi.db'}?mode=ro", uri=True) as db:
        return int(db.execute(sql).fetchone()[0])


async def settled(url: str) -> None:
    """Until nothing waits to be written (bounded: 30 s)."""
    for _ in range(600):
        now = await stats(url)
        if now["store_writes"]["unsaved"] == 0 and (now["store_queue"] or {}).get("pending", 0) == 0:
            return
        await asyncio.sleep(0.05)
