"""What a recall search costs as the store grows, and what a vacuum does to requests (issue 27).

1. Per-search time at several index sizes (rows of synthetic sessions: tool output and summaries made of a shared
   vocabulary, boilerplate lines every agent repeats, and each session's own identifiers). The index is built as a
   schema-6 store (Ruyi before migration 7: one FTS5 table, agent and session filtered after the match), copied, and
   the copy migrated: the old search runs on the old file and the new one on the migrated copy, alternately, the same
   queries (a session's search, and an agent-wide one). Both read the hits' rows, as Recall does. Hits are compared.
2. Request throughput through real ``ruyi serve`` processes (this tree and, with ``--before DIR``, another checkout)
   at a fixed rate from one aiohttp client, on a store holding ~1,000 expired sessions (the start-up sweep removes
   them while the load runs) and on the same store with none expired.
3. The write-ahead log's size after a write burst during which a reader held a snapshot: checkpoints passive only (as
   before) and truncating (now).

    .venv/bin/python bench/durable/recall_cost.py --sizes 5000 50000 500000
    .venv/bin/python bench/durable/recall_cost.py --sizes 0 --serve --before /tmp/ruyi-main   # part 2 only
    .venv/bin/python bench/durable/recall_cost.py --sizes 0 --wal 80     # part 3: the log after an 80 MB burst
"""

from __future__ import annotations

import argparse
import asyncio
import json
import random
import shutil
import sqlite3
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from memory.store import sqlite_schema
from memory.store.sqlite_recall import Recall, index_text, match_query, matched, terms
from memory.store.sqlite_store import SQLiteStore

ROWS_PER_SESSION = 40
AGENTS = 20


def _vocabulary(rng: random.Random) -> list[str]:
    syllables = "ka ri to mo ne su la pe di vo zu ha ge fi co bra tri st ex in ter al pro con ser ver log pa th".split()
    words = {"".join(rng.choice(syllables) for _ in range(rng.randint(2, 4))) for _ in range(6000)}
    return sorted(words)


class Texts:
    """Realistic-looking rows: sentences of a Zipf-ish vocabulary, paths, identifiers, boilerplate, numbers."""

    def __init__(self, seed: int = 27) -> None:
        rng = self.rng = random.Random(seed)
        vocab = _vocabulary(rng)
        weights = [1 / (i + 1) for i in range(len(vocab))]
        self.sentences = [" ".join(rng.choices(vocab, weights, k=rng.randint(6, 18))) for _ in range(20_000)]
        self.paths = [f"src/{rng.choice(vocab)}/{rng.choice(vocab)}_{rng.choice(vocab)}.py" for _ in range(3000)]
        self.boilerplate = [
            "Exit code 0",
            "Traceback (most recent call last):",
            "ok: 12 passed, 0 failed in 1.20s",
            "The user wants me to continue with the task.",
            "File written successfully.",
        ]

    def row(self, own: list[str]) -> str:
        rng = self.rng
        parts = rng.sample(self.sentences, rng.randint(2, 7))
        parts.append(rng.choice(self.paths))
        parts.append(rng.choice(own))
        if rng.random() < 0.5:
            parts.append(rng.choice(self.boilerplate))
        if rng.random() < 0.3:
            parts.append(f"line {rng.randint(1, 900)} error E{rng.randint(100, 999)}")
        rng.shuffle(parts)
        return ". ".join(parts)


def build_old(path: Path, rows: int, texts: Texts) -> list[tuple[str, str, list[str]]]:
    """A schema-6 store with ``rows`` index rows (and their turns and chunks), in one transaction. Returns the
    sessions with a few of their texts (queries are made from them)."""
    conn = sqlite3.connect(path, isolation_level=None)
    conn.execute("PRAGMA auto_vacuum = INCREMENTAL")
    conn.execute("PRAGMA journal_mode = WAL")
    for version, migration in enumerate(sqlite_schema.MIGRATIONS[:6], 1):
        for statement in migration.split(";"):
            if statement.strip():
                conn.execute(statement)
        conn.execute(f"PRAGMA user_version = {version}")
    rng = texts.rng
    sessions: list[tuple[str, str, list[str]]] = []
    turns, chunks, index = [], [], []
    for n in range(rows):
        if n % ROWS_PER_SESSION == 0:
            agent = f"agent-{rng.randrange(AGENTS)}"
            own = [f"{agent}_fn{rng.randrange(10**6)}" for _ in range(5)]
            sessions.append((agent, f"sess-{len(sessions)}", []))
            session, own_texts = sessions[-1][1], sessions[-1][2]
        text = texts.row(own)
        if len(own_texts) < 4:
            own_texts.append(text)
        if n % 3:
            turns.append((agent, session, n, f"h{n}", "tool", 1.0, json.dumps({"role": "tool", "content": text})))
            index.append((index_text(text), agent, session, "turn", f"{n}:h{n}"))
        else:
            chunks.append((agent, session, f"c{n}", 1, 2, 1.0, "extractive", "[]", "[]", text[:60], text))
            index.append((index_text(text), agent, session, "chunk", f"c{n}"))
    conn.execute("BEGIN")
    conn.executemany("INSERT INTO turns VALUES (?, ?, ?, ?, ?, ?, ?)", turns)
    conn.executemany("INSERT INTO chunks VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)", chunks)
    conn.executemany("INSERT INTO recall_fts VALUES (?, ?, ?, ?, ?)", index)
    conn.execute("COMMIT")
    conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    conn.close()
    return sessions


def old_search(
    conn: sqlite3.Connection, agent_id: str, session_id: str | None, text: str, limit: int = 5, kinds: tuple[str, ...] = ("chunk", "turn")
) -> list[tuple[str, str, int]]:
    """The search before migration 7, as Recall ran it (hits' rows read back too)."""
    words = terms(text)
    sql = (
        "SELECT kind, ref, agent_id, session_id, text FROM recall_fts WHERE recall_fts MATCH ? AND agent_id IN (?)"
        + (" AND session_id = ?" if session_id is not None else "")
        + f" AND kind IN ({', '.join('?' * len(kinds))}) ORDER BY bm25(recall_fts) LIMIT ?"
    )
    args = [match_query(words), agent_id, *([session_id] if session_id is not None else []), *kinds, limit * 4]
    hits = []
    for kind, ref, agent, session, indexed in conn.execute(sql, args).fetchall():
        if kind == "chunk":
            conn.execute("SELECT summary FROM chunks WHERE agent_id = ? AND session_id = ? AND chunk_id = ?", (agent, session, ref)).fetchone()
        else:
            turn, _, digest = ref.partition(":")
            conn.execute(
                "SELECT body FROM turns WHERE agent_id = ? AND session_id = ? AND turn = ? AND hash = ?", (agent, session, int(turn), digest)
            ).fetchone()
        hits.append((kind, ref, matched(words, indexed)))
    hits.sort(key=lambda h: -h[2])
    return hits[:limit]


def per_search(rows: int, searches: int, texts: Texts) -> dict[str, Any]:
    work = Path(tempfile.mkdtemp(prefix="ruyi-recall-cost-"))
    try:
        started = time.perf_counter()
        sessions = build_old(work / "old.db", rows, texts)
        built = time.perf_counter() - started
        shutil.copy(work / "old.db", work / "new.db")
        started = time.perf_counter()
        SQLiteStore(work / "new.db").close()
        migrated = time.perf_counter() - started
        old = sqlite3.connect(work / "old.db", check_same_thread=False)
        new = Recall(work / "new.db")
        rng = random.Random(rows)
        times: dict[str, list[float]] = {"old session": [], "new session": [], "old agent": [], "new agent": []}
        same = total = 0
        for i in range(searches):
            agent, session, own_texts = rng.choice(sessions)
            query = rng.choice(own_texts)[:600]  # a request's text: one of the session's own outputs
            for scope, sid in (("session", session), ("agent", None)):
                order = ("old", "new") if i % 2 else ("new", "old")
                found = {}
                for side in order:
                    t0 = time.perf_counter()
                    if side == "old":
                        found[side] = old_search(old, agent, sid, query)
                    else:
                        found[side] = [(h.kind, h.ref, h.matched) for h in new.search(agent, sid, query)]
                    times[f"{side} {scope}"].append((time.perf_counter() - t0) * 1000)
                total += 1
                same += found["old"] == found["new"]
        old.close()
        new.close()
        median = {k: statistics.median(v) for k, v in times.items()}
        return {
            "rows": rows,
            "sessions": len(sessions),
            "build_s": built,
            "migrate_s": migrated,
            "searches": searches,
            "same_hits": f"{same}/{total}",
            **{f"{k} ms": v for k, v in median.items()},
            "session ratio": median["old session"] / median["new session"],
            "agent ratio": median["old agent"] / median["new agent"],
        }
    finally:
        shutil.rmtree(work, ignore_errors=True)


# ---- part 2: requests through ruyi serve while a vacuum runs ----


def expired_store(path: Path, sessions: int, rows_per_session: int, texts: Texts, expired: bool) -> None:
    """A schema-6 store with ``sessions`` sessions (their rows, chains, links, decisions, recall rows), all last seen
    long ago (``expired``) or now."""
    rows = sessions * rows_per_session
    build_old(path, rows, texts)
    conn = sqlite3.connect(path, isolation_level=None)
    seen = 0.0 if expired else time.time()
    keys = conn.execute("SELECT DISTINCT agent_id, session_id FROM recall_fts").fetchall()
    conn.execute("BEGIN")
    conn.executemany(
        "INSERT INTO sessions (agent_id, session_id, parent_id, created_at, last_seen, requests) VALUES (?, ?, NULL, ?, ?, 1)",
        [(a, s, seen, seen) for a, s in keys],
    )
    conn.executemany("INSERT INTO chain VALUES (?, ?, ?, ?)", [(a, s, i, f"{s}-l{i}") for a, s in keys for i in range(20)])
    conn.executemany("INSERT INTO links VALUES (?, ?, ?)", [(a, f"{s}-l{i}", s) for a, s in keys for i in range(20)])
    conn.executemany("INSERT INTO decisions VALUES (?, ?, ?, ?)", [(a, s, f"{s}-l{i}", "{}") for a, s in keys for i in range(10)])
    conn.execute("UPDATE turns SET created_at = ?", (seen,))  # raw turns as old as their session
    conn.execute("COMMIT")
    conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    conn.close()


async def load(url: str, rate: float, seconds: float) -> dict[str, Any]:
    import aiohttp

    latencies: list[float] = []
    failed: dict[str, int] = {}

    async def one(i: int, http: aiohttp.ClientSession) -> None:
        body = {"model": "gpt-4o", "messages": [{"role": "user", "content": f"bench request {i}: summarise src/app/main.py"}]}
        t0 = time.perf_counter()
        try:
            async with http.post(url + "/v1/chat/completions", json=body, headers={"X-Ruyi-Agent": f"load-{i % 8}"}) as resp:
                await resp.read()
                if resp.status != 200:
                    failed[str(resp.status)] = failed.get(str(resp.status), 0) + 1
                    return
        except (TimeoutError, aiohttp.ClientError) as exc:
            failed[type(exc).__name__] = failed.get(type(exc).__name__, 0) + 1
            return
        latencies.append((time.perf_counter() - t0) * 1000)

    async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=60)) as http:
        started = time.perf_counter()
        tasks = []
        for i in range(int(rate * seconds)):
            delay = started + i / rate - time.perf_counter()
            if delay > 0:
                await asyncio.sleep(delay)
            tasks.append(asyncio.ensure_future(one(i, http)))
        await asyncio.gather(*tasks)
        elapsed = time.perf_counter() - started
    latencies.sort()
    return {
        "sent": len(tasks),
        "ok": len(latencies),
        "failed": failed,
        "req/s": len(latencies) / elapsed,
        "p50 ms": latencies[len(latencies) // 2] if latencies else 0.0,
        "p99 ms": latencies[int(len(latencies) * 0.99)] if latencies else 0.0,
        "max ms": latencies[-1] if latencies else 0.0,
    }


def serve_run(root: Path, store_file: Path, rate: float, seconds: float) -> dict[str, Any]:
    from bench.processes import fake_upstream, free_port, spawn, stop

    data = store_file.parent
    up_port, port = free_port(), free_port()
    procs = [fake_upstream(up_port)]
    try:
        config = data.parent / "config.yaml"
        config.write_text(json.dumps({"sessions": {"ttl_days": 1}}))
        env = {"RUYI_DATA_DIR": str(data), "RUYI_LOG_LEVEL": "warning", "PYTHONPATH": str(root)}
        args = [sys.executable, "-m", "proxy.cli", "serve", "--port", str(port), "--upstream", f"http://127.0.0.1:{up_port}", "--config", str(config)]
        started = time.perf_counter()
        procs.append(spawn(args, port, env, cwd=root))
        ready_s = time.perf_counter() - started
        result: dict[str, Any] = {"ready s": ready_s, **asyncio.run(load(f"http://127.0.0.1:{port}", rate, seconds))}
    finally:
        stop(procs)
    conn = sqlite3.connect(store_file)
    result["sessions left"] = conn.execute("SELECT count(*) FROM sessions WHERE agent_id LIKE 'agent-%'").fetchone()[0]
    conn.close()
    return result


def throughput(roots: dict[str, Path], sessions: int, rate: float, seconds: float, texts: Texts) -> list[dict[str, Any]]:
    work = Path(tempfile.mkdtemp(prefix="ruyi-vacuum-"))
    try:
        for expired in (True, False):
            expired_store(work / f"{expired}.db", sessions, ROWS_PER_SESSION, texts, expired)
        results = []
        for name, root in roots.items():
            for expired in (False, True):
                run = work / f"{name}-{expired}" / "data"
                run.mkdir(parents=True)
                shutil.copy(work / f"{expired}.db", run / "ruyi.db")
                result = serve_run(root, run / "ruyi.db", rate, seconds)
                results.append({"code": name, "vacuum": f"{sessions} expired" if expired else "none", **result})
        return results
    finally:
        shutil.rmtree(work, ignore_errors=True)


# ---- part 3: the write-ahead log after a write burst ----


def wal_burst(megabytes: int, texts: Texts, truncating: bool) -> dict[str, Any]:
    """Write ``megabytes`` of recall rows in batches while a reader holds a snapshot (the log cannot restart), calling
    the store's checkpoint after each batch as the background writer does; then the reader ends and one more checkpoint
    runs. ``truncating`` False: the checkpoint as it was (passive only)."""
    from memory.store import sqlite_store
    from memory.store.base import ChunkRow

    saved = sqlite_store.TRUNCATE_EVERY_S, sqlite_store.TRUNCATE_BYTES
    if not truncating:
        sqlite_store.TRUNCATE_EVERY_S = sqlite_store.TRUNCATE_BYTES = float("inf")  # type: ignore[assignment]
    work = Path(tempfile.mkdtemp(prefix="ruyi-wal-"))
    try:
        store = SQLiteStore(work / "ruyi.db")
        recall = Recall(work / "ruyi.db")
        reader = sqlite3.connect(work / "ruyi.db", isolation_level=None)
        reader.execute("BEGIN")
        reader.execute("SELECT count(*) FROM turns").fetchone()  # a snapshot held: the log grows
        wal = work / "ruyi.db-wal"
        written, batch, peak = 0, 0, 0
        while written < megabytes << 20:
            rows = [ChunkRow("a", f"s{batch}", f"c{i}", 1, 2, "x", (), (), "l", texts.row(["own"])) for i in range(200)]
            recall.write_background(rows)
            written += sum(len(r.summary) for r in rows) * 3  # text, index and row: roughly
            batch += 1
            store.checkpoint()
            peak = max(peak, wal.stat().st_size)
        reader.execute("COMMIT")
        reader.close()
        for _ in range(7):  # the background writer's housekeeping, once a second, for a few seconds after the reader ends
            store.checkpoint()
            time.sleep(1)
        after = wal.stat().st_size
        recall.close()
        store.close()
        return {
            "checkpoint": "truncating" if truncating else "passive only",
            "batches": batch,
            "peak WAL MB": peak / 2**20,
            "WAL MB after the burst": after / 2**20,
        }
    finally:
        sqlite_store.TRUNCATE_EVERY_S, sqlite_store.TRUNCATE_BYTES = saved
        shutil.rmtree(work, ignore_errors=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sizes", type=int, nargs="+", default=[5000, 50000, 500000], help="index rows (0: skip part 1)")
    parser.add_argument("--searches", type=int, default=60)
    parser.add_argument("--serve", action="store_true", help="part 2: throughput through ruyi serve during a vacuum")
    parser.add_argument("--before", type=Path, help="another checkout (the code before) for part 2")
    parser.add_argument("--sessions", type=int, default=1000)
    parser.add_argument("--rate", type=float, default=20.0, help="requests per second (below what the server holds)")
    parser.add_argument("--seconds", type=float, default=4.0)
    parser.add_argument("--wal", type=int, default=0, metavar="MB", help="part 3: the log after a burst of this many MB")
    args = parser.parse_args()
    texts = Texts()
    for rows in (s for s in args.sizes if s):
        print(json.dumps(per_search(rows, args.searches, texts), default=lambda v: round(v, 3)), flush=True)
    for truncating in (False, True) if args.wal else ():
        print(json.dumps(wal_burst(args.wal, texts, truncating), default=lambda v: round(v, 1)), flush=True)
    if args.serve:
        roots = {**({"before": args.before} if args.before else {}), "after": Path(__file__).resolve().parents[2]}
        for result in throughput(roots, args.sessions, args.rate, args.seconds, texts):
            print(json.dumps({k: round(v, 1) if isinstance(v, float) else v for k, v in result.items()}), flush=True)


if __name__ == "__main__":
    main()
