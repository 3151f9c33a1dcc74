"""Throughput of `ruyi serve --workers N` against one worker, on SQLite (one file) and PostgreSQL, in one run.

Many agents at once (``--agents``, each its own session: ``X-Ruyi-Agent``), each sending a conversation that grows
by a turn per request (``--requests`` each, messages of about 1.5 KB), all in flight together against the fake
upstream (its own process). ``1 shared`` is one worker with ``store.shared`` (what sharing costs without a second
process). Per configuration: requests per second over the whole run, and the median and 95th
percentile latency. Each configuration is run ``--rounds`` times, interleaved, and the best round is kept (the
machine is shared: the best is the least disturbed). A new connection per request, so the kernel spreads them
over the workers (SO_REUSEPORT picks a worker per connection).

    .venv/bin/python bench/durable/workers.py                       # 1 worker, and 2 (the cores of this machine), SQLite
    .venv/bin/python bench/durable/workers.py --workers 1 2 4 --pg postgresql://postgres@127.0.0.1:5432/test
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import aiohttp

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from bench.processes import ROOT, fake_upstream, free_port, spawn, stop

FILLER = "the build log says the test failed at step {i} because the fixture was missing; " * 18


def conversation(agent: int, turns: int) -> list[dict[str, str]]:
    messages = [{"role": "system", "content": "You are a careful engineer."}, {"role": "user", "content": f"Task {agent}: fix the tests."}]
    for i in range(turns):
        messages += [{"role": "assistant", "content": f"step {i}: " + FILLER.format(i=i)}, {"role": "user", "content": f"ok, and {i}?"}]
    return messages


async def agent_run(url: str, agent: int, requests: int, latencies: list[float]) -> None:
    for turns in range(requests):
        body = {"model": "gpt-4o", "messages": conversation(agent, turns)}
        started = time.perf_counter()
        async with aiohttp.ClientSession() as http:  # a new connection: the kernel picks a worker for it
            async with http.post(url + "/v1/chat/completions", json=body, headers={"X-Ruyi-Agent": f"agent-{agent}"}) as resp:
                await resp.read()
                assert resp.status == 200, resp.status
        latencies.append(time.perf_counter() - started)


def start(workers: int, upstream: str, store: dict[str, Any]) -> tuple[Any, str, Path]:
    port = free_port()
    data = Path(tempfile.mkdtemp(prefix="ruyi-bench-workers-"))
    config = data / "config.yaml"
    config.write_text(json.dumps({"store": store, "logging": {"level": "warning"}}))
    env = {"RUYI_DATA_DIR": str(data / "data"), "PYTHONPATH": str(ROOT)}
    args = [
        sys.executable,
        "-m",
        "proxy.cli",
        "serve",
        "--port",
        str(port),
        "--upstream",
        upstream,
        "--config",
        str(config),
        "--workers",
        str(workers),
    ]
    return spawn(args, port, env), f"http://127.0.0.1:{port}", data


async def measure(url: str, agents: int, requests: int) -> dict[str, float]:
    latencies: list[float] = []
    started = time.perf_counter()
    await asyncio.gather(*(agent_run(url, a, requests, latencies) for a in range(agents)))
    wall = time.perf_counter() - started
    ordered = sorted(latencies)
    return {"rps": len(latencies) / wall, "p50_ms": 1000 * statistics.median(ordered), "p95_ms": 1000 * ordered[int(0.95 * (len(ordered) - 1))]}


def clean_pg(url: str) -> None:
    import psycopg

    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute("DROP SCHEMA IF EXISTS ruyi_bench_workers CASCADE")
        conn.execute("CREATE SCHEMA ruyi_bench_workers")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--workers", type=int, nargs="+", default=[1, os.cpu_count() or 2])
    parser.add_argument("--agents", type=int, default=32)
    parser.add_argument("--requests", type=int, default=12, help="requests per agent")
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--pg", metavar="URL", help="also on PostgreSQL (a schema ruyi_bench_workers is made and dropped)")
    args = parser.parse_args()
    up_port = free_port()
    upstream = fake_upstream(up_port)
    stores: dict[str, dict[str, Any]] = {"sqlite": {}}
    if args.pg:
        pg_url = args.pg + ("&" if "?" in args.pg else "?") + "options=-csearch_path%3Druyi_bench_workers"
        stores["postgres"] = {"backend": "postgres", "url": pg_url}
    best: dict[tuple[str, int], dict[str, float]] = {}
    try:
        for _ in range(args.rounds):
            for backend, store in stores.items():
                for workers in [*args.workers, 0]:  # 0: one worker with store.shared (what sharing costs, without the processes)
                    if backend == "postgres":
                        clean_pg(args.pg)
                    shared = {**store, "shared": True} if workers == 0 else store
                    proc, url, data = start(max(workers, 1), f"http://127.0.0.1:{up_port}/v1", shared)
                    try:
                        got = asyncio.run(measure(url, args.agents, args.requests))
                    finally:
                        stop([proc])
                        shutil.rmtree(data, ignore_errors=True)
                    key = (backend, workers)
                    if key not in best or got["rps"] > best[key]["rps"]:
                        best[key] = got
    finally:
        stop([upstream])
        if args.pg:
            import psycopg

            with psycopg.connect(args.pg, autocommit=True) as conn:
                conn.execute("DROP SCHEMA IF EXISTS ruyi_bench_workers CASCADE")
    print(f"{args.agents} agents x {args.requests} requests, best of {args.rounds} rounds, {os.cpu_count()} cores")
    print(f"{'store':10} {'workers':>8} {'req/s':>8} {'vs 1':>6} {'p50 ms':>8} {'p95 ms':>8}")
    for (backend, workers), got in best.items():
        one = best.get((backend, 1))
        ratio = f"{got['rps'] / one['rps']:.2f}x" if one else "-"
        name = "1 shared" if workers == 0 else str(workers)
        print(f"{backend:10} {name:>8} {got['rps']:>8.1f} {ratio:>6} {got['p50_ms']:>8.1f} {got['p95_ms']:>8.1f}")


if __name__ == "__main__":
    main()
