"""Memory and disk through the soak's traffic (issue 27's "memory flat after warm-up, disk per request halved"): the
soak's Ruyi half only (no direct half: neither figure needs it), several trees side by side in one run.

Each tree gets its own fake upstream and `ruyi serve` and the same schedule at the same time (``rate`` requests a
second from 20 agents, growing conversations, a new task every ``turns`` requests; ``--turns 1``: every request a new
conversation). Reported per tree: resident memory every ``seconds/20``, its least-squares slope after the first third
(warm-up) and of each third (where a long run's rise ends), disk per request (the data directory's files, the log
included), the log's size at the end, and the database's bytes per table and index (SQLite's ``dbstat``) after a final
checkpoint.

    .venv/bin/python bench/reliability/memory_disk.py --seconds 300 --rate 20 --turns 50 \\
        --tree before=/tmp/memflat-before --tree after=.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sqlite3
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from bench.processes import stop
from bench.reliability.stack import TREE, Stack, body, client, conversation, disk_bytes, rss_mb, slope_per_min, start, timed


def status_mb(pid: int, field: str) -> float:
    """A line of /proc/<pid>/status in MB (VmRSS, RssAnon, RssFile…)."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return round(int(line.split()[1]) / 1024, 1)
    return float("nan")


def threads(pid: int) -> int:
    return len(list(Path(f"/proc/{pid}/task").iterdir()))


def table_bytes(db: Path) -> dict[str, int]:
    """Bytes per table and index of an SQLite file (its pages, ``dbstat``), largest first; empty if unreadable."""
    try:
        with sqlite3.connect(f"file:{db}?mode=ro", uri=True) as conn:
            rows = conn.execute("SELECT name, SUM(pgsize) FROM dbstat GROUP BY name ORDER BY 2 DESC").fetchall()
    except sqlite3.Error:
        return {}
    return {str(name): int(size) for name, size in rows}


async def drive(stacks: dict[str, Stack], seconds: float, rate: float, turns: int, sessions: int = 20) -> dict[str, dict[str, Any]]:
    """The same schedule to every stack at once; figures per stack."""
    every = max(1.0, seconds / 20)
    rss: dict[str, list[tuple[float, float]]] = {name: [] for name in stacks}
    statuses: dict[str, list[int]] = {name: [] for name in stacks}
    disk0 = {name: disk_bytes(s.data_dir) for name, s in stacks.items()}
    tasks: list[tuple[str, asyncio.Task[tuple[int, float]]]] = []

    def payload(n: int) -> dict[str, Any]:
        return body(n % sessions, words=20 + n // sessions) if turns == 1 else conversation(n % sessions, n // sessions, turns)

    async with client() as http:
        started, n, samples = time.perf_counter(), 0, 0
        while (now := time.perf_counter() - started) < seconds:
            while n < int(now * rate):
                for name, s in stacks.items():
                    tasks.append((name, asyncio.ensure_future(timed(http, s.url, payload(n), {"X-Ruyi-Agent": f"soak-{n % sessions}"}))))
                n += 1
            if now >= samples * every:
                for name, s in stacks.items():
                    rss[name].append((now, rss_mb(s.ruyi_pid)))
                samples += 1
            await asyncio.sleep(0.01)
        for name, task in tasks:
            statuses[name].append((await task)[0])
    await asyncio.sleep(3)  # the background writers' last batches
    out: dict[str, dict[str, Any]] = {}
    for name, s in stacks.items():
        rss[name].append((seconds, rss_mb(s.ruyi_pid)))
        db, wal = s.data_dir / "ruyi.db", s.data_dir / "ruyi.db-wal"
        wal_bytes = wal.stat().st_size if wal.exists() else 0
        grown = disk_bytes(s.data_dir) - disk0[name]
        out[name] = {
            "requests": len(statuses[name]),
            "ok": statuses[name].count(200),
            "rss_mb": [[round(t), round(r, 1)] for t, r in rss[name]],
            "rss_mb_per_min_after_warmup": round(slope_per_min([(t, r) for t, r in rss[name] if t >= seconds / 3]), 2),
            "rss_mb_per_min_by_third": [  # where a rise ends: the slope of each third of the run (a long run's last one)
                round(slope_per_min([(t, r) for t, r in rss[name] if k * seconds / 3 <= t <= (k + 1) * seconds / 3]), 3) for k in range(3)
            ],
            "anon_file_mb_at_end": [status_mb(s.ruyi_pid, "RssAnon"), status_mb(s.ruyi_pid, "RssFile")],
            "threads": threads(s.ruyi_pid),
            "disk_kb_per_request": round(grown / max(1, len(statuses[name])) / 1024, 2),
            "wal_mb_at_end": round(wal_bytes / 2**20, 1),
            "db_kb_per_request_without_wal": round((grown - wal_bytes) / max(1, len(statuses[name])) / 1024, 2),
            "tables_kb": {k: round(v / 1024) for k, v in table_bytes(db).items() if v >= 8192},
        }
    return out


async def main_async(
    trees: dict[str, Path], seconds: float, rate: float, turns: int, config: dict[str, Any] | None = None
) -> dict[str, dict[str, Any]]:
    stacks: dict[str, Stack] = {}
    try:
        for name, root in trees.items():
            TREE["root"] = root
            stacks[name] = start(config)
        return await drive(stacks, seconds, rate, turns)
    finally:
        for s in stacks.values():
            stop(s.procs)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--seconds", type=float, default=300)
    parser.add_argument("--rate", type=float, default=20)
    parser.add_argument("--turns", type=int, default=50)
    parser.add_argument("--config", type=json.loads, default=None, help="Ruyi's configuration for every tree, as JSON")
    parser.add_argument("--tree", action="append", default=[], help="NAME=PATH of a source tree (repeatable; default: this one)")
    args = parser.parse_args()
    trees = {t.split("=", 1)[0]: Path(t.split("=", 1)[1]).resolve() for t in args.tree} or {"this": TREE["root"]}
    print(json.dumps(asyncio.run(main_async(trees, args.seconds, args.rate, args.turns, args.config)), indent=1))


if __name__ == "__main__":
    main()
