"""The two-replica session replay: one public trace's requests, alternating between two `ruyi serve` processes on one
store, beside one process; are the forwarded bodies identical, and what does a request cost?

The trace is replayed as its agent made it (every prefix before an assistant message) at an 8k window, where it is
pruned and archived early (sticky decisions and a restarted prefix carried from replica to replica), through:
``one`` (one process, SQLite, the default), ``two-sqlite`` (two processes, one SQLite file, ``store.shared``) and,
with ``--pg``, ``two-postgres``. The fake upstream runs in this process and keeps what it received. Per
configuration: whether every forwarded body equals ``one``'s byte for byte, and the client's time per request
(mean and median, the best of ``--rounds`` interleaved rounds).

    .venv/bin/python bench/durable/replicas.py
    .venv/bin/python bench/durable/replicas.py --pg postgresql://postgres@127.0.0.1:5432/test --rounds 3
"""

from __future__ import annotations

import argparse
import asyncio
import json
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import aiohttp
from aiohttp import web

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from bench.processes import ROOT, free_port, spawn, stop
from bench.traces import load_traces, requests_of
from tests.fake_upstream import FakeUpstream, make_fake_app

CONFIG = {"window": {"models": {"gpt-4o*": 8000}}, "retrieval": {"enabled": False}, "logging": {"level": "warning"}}


async def start(upstream: str, data: Path, store: dict[str, Any], name: str) -> tuple[Any, str]:
    config = data.parent / f"{name}.yaml"
    config.write_text(json.dumps({**CONFIG, "store": store}))
    port = free_port()
    args = [sys.executable, "-m", "proxy.cli", "serve", "--port", str(port), "--upstream", upstream, "--config", str(config)]
    proc = await asyncio.to_thread(spawn, args, port, {"RUYI_DATA_DIR": str(data), "PYTHONPATH": str(ROOT)})
    return proc, f"http://127.0.0.1:{port}"


async def replay(urls: list[str], requests: list[list[dict[str, Any]]]) -> list[float]:
    times = []
    async with aiohttp.ClientSession() as http:
        for i, messages in enumerate(requests):
            started = time.perf_counter()
            async with http.post(
                urls[i % len(urls)] + "/v1/chat/completions", json={"model": "gpt-4o", "messages": messages}, headers={"X-Ruyi-Agent": "agent"}
            ) as resp:
                await resp.read()
                assert resp.status == 200, resp.status
            times.append(time.perf_counter() - started)
    return times


async def run(
    config: str, processes: int, store: dict[str, Any], upstream: str, fake: FakeUpstream, requests: list[list[dict[str, Any]]]
) -> tuple[list[bytes], list[float]]:
    tmp = Path(tempfile.mkdtemp(prefix="ruyi-bench-replicas-"))
    procs, urls = [], []
    try:
        for n in range(processes):
            proc, url = await start(upstream, tmp / "data", store, f"{config}-{n}")
            procs.append(proc)
            urls.append(url)
        fake.received.clear()
        times = await replay(urls, requests)
        return [r.body for r in fake.received if r.path == "/v1/chat/completions"], times
    finally:
        await asyncio.to_thread(stop, procs)
        shutil.rmtree(tmp, ignore_errors=True)


def reset_pg(url: str, schema: str, drop_only: bool = False) -> None:
    import psycopg

    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute(f"DROP SCHEMA IF EXISTS {schema} CASCADE")
        if not drop_only:
            conn.execute(f"CREATE SCHEMA {schema}")


async def main_async(args: argparse.Namespace) -> None:
    trace = load_traces()[3]
    requests = list(requests_of(trace))
    fake = FakeUpstream()
    runner = web.AppRunner(make_fake_app(fake))
    await runner.setup()
    port = free_port()
    await web.TCPSite(runner, "127.0.0.1", port).start()
    upstream = f"http://127.0.0.1:{port}/v1"
    configs: dict[str, tuple[int, dict[str, Any]]] = {"one": (1, {}), "two-sqlite": (2, {"shared": True})}
    schema = "ruyi_bench_replicas"
    if args.pg:
        url = args.pg + ("&" if "?" in args.pg else "?") + f"options=-csearch_path%3D{schema}"
        configs["two-postgres"] = (2, {"shared": True, "backend": "postgres", "url": url})
    bodies: dict[str, list[bytes]] = {}
    identical: dict[str, bool] = {}
    best: dict[str, list[float]] = {}
    try:
        for _ in range(args.rounds):
            for name, (processes, store) in configs.items():
                if "postgres" in name:
                    reset_pg(args.pg, schema)
                got, times = await run(name, processes, store, upstream, fake, requests)
                bodies.setdefault(name, got)
                identical[name] = identical.get(name, True) and got == bodies["one"]
                if name not in best or statistics.mean(times) < statistics.mean(best[name]):
                    best[name] = times
    finally:
        await runner.cleanup()
        if args.pg:
            reset_pg(args.pg, schema, drop_only=True)
    rewritten = sum(1 for b in bodies["one"] if b"[ruyi:" in b or b"<ruyi-archive" in b)
    print(f"{trace.name[:60]}: {len(requests)} requests, {rewritten} forwarded rewritten (pruned or archived), best of {args.rounds}")
    print(f"{'config':14} {'identical':>9} {'mean ms':>8} {'p50 ms':>8} {'vs one':>7}")
    base = statistics.mean(best["one"])
    for name, times in best.items():
        mean = statistics.mean(times)
        print(f"{name:14} {str(identical[name]):>9} {1000 * mean:>8.1f} {1000 * statistics.median(times):>8.1f} {mean / base:>6.2f}x")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--pg", metavar="URL", help="also two replicas on PostgreSQL (schema ruyi_bench_replicas, dropped after)")
    asyncio.run(main_async(parser.parse_args()))


if __name__ == "__main__":
    main()
