"""Many agents streaming at once: time to first byte through Ruyi's upstream pool, and what a full pool answers.

N clients (1,000 by default) open a stream each at once through a real `ruyi serve`; each stream lasts about
2 s at the upstream (20 chunks, 100 ms apart). A pool smaller than N makes the rest wait for a connection: their
time to first byte grows by whole stream lengths. With ``--max-connections`` and ``--pool-wait`` the pool is made
small on purpose, to show the bounded wait ending in a 503 instead of a hang.

    .venv/bin/python bench/serve/pool.py                                             # this tree, its defaults
    .venv/bin/python bench/serve/pool.py --root /tmp/before                          # another checkout
    .venv/bin/python bench/serve/pool.py --clients 300 --max-connections 100 --pool-wait 1
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import time
from pathlib import Path

import aiohttp

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from bench.processes import ROOT, fake_upstream, free_port, ruyi, stop


async def one(http: aiohttp.ClientSession, url: str, i: int) -> tuple[int, float, float]:
    """(status, seconds to the first body byte, seconds to the end)."""
    body = {"model": "gpt-4o", "stream": True, "messages": [{"role": "user", "content": f"agent {i}: go on"}]}
    started = time.perf_counter()
    async with http.post(url + "/v1/chat/completions", json=body, headers={"X-Ruyi-Session": f"agent-{i}"}) as resp:
        first = None
        async for _ in resp.content.iter_any():
            if first is None:
                first = time.perf_counter() - started
        return resp.status, first if first is not None else float("nan"), time.perf_counter() - started


async def run(url: str, clients: int) -> list[tuple[int, float, float]]:
    timeout = aiohttp.ClientTimeout(total=600)
    async with aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=0), timeout=timeout) as http:
        return await asyncio.gather(*(one(http, url, i) for i in range(clients)))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--root", type=Path, default=ROOT, help="source tree of the Ruyi to measure (default: this one)")
    parser.add_argument("--clients", type=int, default=1000)
    parser.add_argument("--max-connections", type=int, help="upstream.max_connections (default: the tree's own default)")
    parser.add_argument("--pool-wait", type=float, help="upstream.pool_wait_seconds (default: the tree's own default)")
    args = parser.parse_args()
    upstream: dict[str, float] = {}
    if args.max_connections is not None:
        upstream["max_connections"] = args.max_connections
    if args.pool_wait is not None:
        upstream["pool_wait_seconds"] = args.pool_wait
    up, port = free_port(), free_port()
    procs = [fake_upstream(up, chunk_delay=0.1, reply=" ".join(f"w{i}" for i in range(20)))]
    try:
        procs.append(ruyi(port, f"http://127.0.0.1:{up}/v1", {"upstream": upstream} if upstream else {}, args.root))
        results = asyncio.run(run(f"http://127.0.0.1:{port}", args.clients))
    finally:
        stop(procs)
    ok = sorted(first for status, first, _ in results if status == 200)
    refused = [end for status, _, end in results if status == 503]
    print(f"root {args.root}: {args.clients} streams at once, upstream {upstream or 'defaults'}")
    print("| streams | 200 | 503 | TTFB p50 s | TTFB p99 s | TTFB max s | 503 answered after, max s |")
    print("|---:|---:|---:|---:|---:|---:|---:|")

    def p(q: float) -> float:
        return ok[min(len(ok) - 1, int(q * len(ok)))] if ok else float("nan")

    print(
        f"| {args.clients} | {len(ok)} | {len(refused)} | {statistics.median(ok) if ok else float('nan'):.2f} | {p(0.99):.2f} | "
        f"{ok[-1] if ok else float('nan'):.2f} | {max(refused) if refused else float('nan'):.2f} |"
    )


if __name__ == "__main__":
    main()
