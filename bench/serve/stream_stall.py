"""Does a stream keep flowing while Ruyi rewrites long requests of other sessions? Gaps between chunks, measured.

One stream (its upstream sends a chunk every 20 ms) is relayed through a real `ruyi serve` while 6 cold long
requests (the longest public trace, 276 messages, every message made unique so nothing is cached) of 6 other
sessions arrive at once. The client times every SSE event it receives; a stall shows as a gap well above 20 ms.
The stream and the long requests go to two upstream processes, so the upstream's own work cannot stall the stream.

    .venv/bin/python bench/serve/stream_stall.py                       # this tree
    .venv/bin/python bench/serve/stream_stall.py --root /tmp/before    # the same bench against another checkout
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import sys
import time
import uuid
from pathlib import Path
from typing import Any

import aiohttp

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from bench.processes import ROOT, fake_upstream, free_port, ruyi, stop
from bench.traces import trace_paths

CHUNK_EVERY_S = 0.02


def longest_trace() -> list[dict[str, Any]]:
    traces = [json.loads(p.read_text()) for p in trace_paths()]
    longest: list[dict[str, Any]] = max(traces, key=lambda t: len(t["messages"]))["messages"]
    return longest


def cold_copy(messages: list[dict[str, Any]], nonce: str) -> list[dict[str, Any]]:
    """The messages with every text made unique: no fingerprint, count or analysis can come from a cache."""
    out = []
    for m in messages:
        m = dict(m)
        if isinstance(m.get("content"), str):
            m["content"] = f"{m['content']}\n[{nonce}]"
        out.append(m)
    return out


async def stream(http: aiohttp.ClientSession, url: str, started: asyncio.Event) -> list[float]:
    """Arrival times of the stream's events."""
    body = {"model": "stream-model", "stream": True, "messages": [{"role": "user", "content": "tell me a long story"}]}
    arrivals: list[float] = []
    async with http.post(url + "/v1/chat/completions", json=body, headers={"X-Ruyi-Session": f"stream-{uuid.uuid4().hex}"}) as resp:
        assert resp.status == 200, resp.status
        async for line in resp.content:
            if line.startswith(b"data: "):
                arrivals.append(time.perf_counter())
                started.set()
    return arrivals


async def long_request(http: aiohttp.ClientSession, url: str, body: bytes, agent: str) -> float:
    started = time.perf_counter()
    headers = {"Content-Type": "application/json", "X-Ruyi-Agent": agent}
    async with http.post(url + "/v1/chat/completions", data=body, headers=headers) as resp:
        await resp.read()
        assert resp.status == 200, resp.status
    return (time.perf_counter() - started) * 1000


async def one_round(url: str, trace: list[dict[str, Any]], requests: int) -> tuple[list[float], list[float]]:
    bodies = [json.dumps({"model": "gpt-4o", "messages": cold_copy(trace, uuid.uuid4().hex)}).encode() for _ in range(requests)]
    async with aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=0)) as http:
        started = asyncio.Event()
        relay = asyncio.create_task(stream(http, url, started))
        await started.wait()
        await asyncio.sleep(0.3)
        latencies = await asyncio.gather(*(long_request(http, url, b, f"agent-{i}") for i, b in enumerate(bodies)))
        arrivals = await relay
    gaps = [(b - a) * 1000 for a, b in zip(arrivals, arrivals[1:])]
    return gaps, list(latencies)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--root", type=Path, default=ROOT, help="source tree of the Ruyi to measure (default: this one)")
    parser.add_argument("--requests", type=int, default=6, help="cold long requests sent beside the stream")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--words", type=int, default=150, help="chunks the stream's upstream sends, one every 20 ms")
    args = parser.parse_args()
    trace = longest_trace()
    ports = [free_port() for _ in range(3)]
    words = " ".join(f"w{i}" for i in range(args.words))
    procs = [fake_upstream(ports[0], chunk_delay=CHUNK_EVERY_S, reply=words), fake_upstream(ports[1])]
    try:
        config = {
            "routes": [{"model": "stream-*", "url": f"http://127.0.0.1:{ports[0]}/v1", "kind": "openai"}],
            "window": {"models": {"gpt-4o*": 32000}},
        }
        procs.append(ruyi(ports[2], f"http://127.0.0.1:{ports[1]}/v1", config, args.root))
        url = f"http://127.0.0.1:{ports[2]}"
        gaps: list[float] = []
        latencies: list[float] = []
        for _ in range(args.rounds):
            g, lat = asyncio.run(one_round(url, trace, args.requests))
            gaps += g
            latencies += lat
    finally:
        stop(procs)
    ordered = sorted(gaps)
    print(
        f"root {args.root}: {args.rounds} rounds, a stream of {args.words} events every {CHUNK_EVERY_S * 1000:.0f} ms "
        f"beside {args.requests} cold long requests ({len(trace)} messages)"
    )
    print("| gaps | median ms | p99 ms | max ms | gaps over 80 ms | long requests, median ms | max ms |")
    print("|---|---:|---:|---:|---:|---:|---:|")
    print(
        f"| {len(gaps)} | {statistics.median(gaps):.1f} | {ordered[int(0.99 * (len(ordered) - 1))]:.1f} | {ordered[-1]:.1f} | "
        f"{sum(g > 80 for g in gaps)} | {statistics.median(latencies):.0f} | {max(latencies):.0f} |"
    )


if __name__ == "__main__":
    main()
