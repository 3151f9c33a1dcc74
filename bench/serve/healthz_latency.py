"""Does Ruyi stay responsive while it rewrites one huge request? /healthz latency during the rewrite, measured.

Three requests, one at a time, each through a real `ruyi serve`: one with a 25 MB tool output, a 32 MiB body
(the public traces repeated, every text unique), and 50,000 tiny messages. While each is in flight, a second
client asks /healthz again and again (10 ms apart) and keeps the slowest answer.

    .venv/bin/python bench/serve/healthz_latency.py                       # this tree
    .venv/bin/python bench/serve/healthz_latency.py --root /tmp/before    # the same bench against another checkout
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

import aiohttp

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from bench.processes import ROOT, fake_upstream, free_port, ruyi, stop
from bench.traces import trace_paths

MAX_BODY = 32 * 1024 * 1024


def tool_output_body(size: int) -> dict[str, Any]:
    line = "2026-11-22T10:00:00 INFO worker-{i:06d} processed batch {i} in 12 ms (ok)\n"
    lines, total, i = [], 0, 0
    while total < size:
        text = line.format(i=i)
        lines.append(text)
        total += len(text)
        i += 1
    call = {"id": "call_1", "type": "function", "function": {"name": "bash", "arguments": json.dumps({"command": "cat worker.log"})}}
    return {
        "model": "gpt-4o",
        "messages": [
            {"role": "system", "content": "You are a coding agent."},
            {"role": "user", "content": "Why is the worker slow?"},
            {"role": "assistant", "content": None, "tool_calls": [call]},
            {"role": "tool", "tool_call_id": "call_1", "content": "".join(lines)},
            {"role": "user", "content": "Well?"},
        ],
    }


def big_body(limit: int) -> dict[str, Any]:
    traces = [json.loads(p.read_text())["messages"] for p in trace_paths()]
    messages: list[dict[str, Any]] = [traces[0][0]]
    size = 0
    while True:
        for trace in traces:
            nonce = uuid.uuid4().hex
            for m in trace[1:]:
                m = dict(m)
                if isinstance(m.get("content"), str):
                    m["content"] = f"{m['content']}\n[{nonce}]"
                size += len(json.dumps(m))
                if size > limit:
                    return {"model": "gpt-4o", "messages": messages}
                messages.append(m)


def tiny_messages(n: int) -> dict[str, Any]:
    return {"model": "gpt-4o", "messages": [{"role": "user" if i % 2 == 0 else "assistant", "content": f"hi {i}"} for i in range(n)]}


async def health_while(url: str, body: bytes) -> tuple[float, float, int]:
    """(slowest /healthz answer, ms the request took, its status)."""
    done = asyncio.Event()
    slowest = 0.0

    async def poll() -> None:
        nonlocal slowest
        async with aiohttp.ClientSession() as http:
            while not done.is_set():
                started = time.perf_counter()
                async with http.get(url + "/healthz") as resp:
                    await resp.read()
                slowest = max(slowest, (time.perf_counter() - started) * 1000)
                await asyncio.sleep(0.01)

    poller = asyncio.create_task(poll())
    await asyncio.sleep(0.2)
    started = time.perf_counter()
    async with aiohttp.ClientSession() as http:
        async with http.post(url + "/v1/chat/completions", data=body, headers={"Content-Type": "application/json"}) as resp:
            await resp.read()
            status = resp.status
    took = (time.perf_counter() - started) * 1000
    done.set()
    await poller
    return slowest, took, status


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--root", type=Path, default=ROOT, help="source tree of the Ruyi to measure (default: this one)")
    parser.add_argument("--only", default="", help="comma-separated scenario numbers to run (1, 2, 3)")
    args = parser.parse_args()
    scenarios: list[tuple[str, Callable[[], dict[str, Any]]]] = [
        ("a 25 MB tool output", lambda: tool_output_body(25_000_000)),
        ("a 32 MiB body (the traces repeated)", lambda: big_body(MAX_BODY - 64 * 1024)),
        ("50,000 tiny messages", lambda: tiny_messages(50_000)),
    ]
    chosen = {int(s) for s in args.only.split(",") if s} or {1, 2, 3}
    up, port = free_port(), free_port()
    procs = [fake_upstream(up)]
    rows = []
    try:
        procs.append(ruyi(port, f"http://127.0.0.1:{up}/v1", {}, args.root))
        for n, (label, make) in enumerate(scenarios, 1):
            if n not in chosen:
                continue
            body = json.dumps(make()).encode()
            slowest, took, status = asyncio.run(health_while(f"http://127.0.0.1:{port}", body))
            rows.append(f"| {label} | {len(body) / 1e6:.1f} MB | {status} | {took:.0f} | **{slowest:.0f}** |")
    finally:
        stop(procs)
    print(f"root {args.root}")
    print("| request being rewritten | body | status | request ms | slowest /healthz ms |")
    print("|---|---:|---:|---:|---:|")
    print("\n".join(rows))


if __name__ == "__main__":
    main()
