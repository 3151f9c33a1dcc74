"""Added latency of Ruyi vs calling the upstream directly, beside a minimal aiohttp passthrough, in one run."""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import socket
import statistics
import subprocess
import sys
import time
from pathlib import Path

import aiohttp

ROOT = Path(__file__).resolve().parents[1]
MESSAGES = [{"role": "system", "content": "You are terse."}] + [
    {"role": "user" if i % 2 == 0 else "assistant", "content": f"turn {i}: " + "lorem ipsum dolor sit amet " * 20} for i in range(20)
]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def spawn(args: list[str], port: int, env: dict[str, str] | None = None) -> subprocess.Popen[bytes]:
    proc = subprocess.Popen(args, cwd=ROOT, env={**os.environ, **(env or {})}, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    for _ in range(400):
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.1).close()
            return proc
        except OSError:
            time.sleep(0.05)
    proc.kill()
    raise RuntimeError(f"{args} did not start")


async def one(http: aiohttp.ClientSession, url: str, stream: bool) -> float:
    body = {"model": "gpt-4o", "messages": MESSAGES, "stream": stream}
    started = time.perf_counter()
    async with http.post(url + "/v1/chat/completions", json=body) as resp:
        async for _ in resp.content.iter_any():
            pass
        assert resp.status == 200, resp.status
    return (time.perf_counter() - started) * 1000


async def run_batch(http: aiohttp.ClientSession, url: str, stream: bool, n: int, concurrency: int) -> tuple[list[float], float]:
    sem = asyncio.Semaphore(concurrency)

    async def guarded() -> float:
        async with sem:
            return await one(http, url, stream)

    started = time.perf_counter()
    lat = await asyncio.gather(*(guarded() for _ in range(n)))
    return list(lat), n / (time.perf_counter() - started)


def pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


async def measure(targets: dict[str, str], n: int, rounds: int) -> list[dict[str, object]]:
    rows = []
    async with aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=64)) as http:
        for stream in (False, True):
            for conc in (1, 16):
                lat: dict[str, list[float]] = {k: [] for k in targets}
                rps: dict[str, list[float]] = {k: [] for k in targets}
                for name, url in targets.items():  # warm-up
                    await run_batch(http, url, stream, 20, conc)
                for _ in range(rounds):  # interleaved so drift hits every target alike
                    for name, url in targets.items():
                        values, rate = await run_batch(http, url, stream, n, conc)
                        lat[name] += values
                        rps[name].append(rate)
                base = statistics.median(lat["direct"])
                base99 = pct(lat["direct"], 0.99)
                for name in targets:
                    rows.append({
                        "stream": stream, "concurrency": conc, "target": name,
                        "median_ms": statistics.median(lat[name]), "added_median_ms": statistics.median(lat[name]) - base,
                        "added_p99_ms": pct(lat[name], 0.99) - base99, "rps": statistics.median(rps[name]),
                    })
    return rows


def table(rows: list[dict[str, object]]) -> str:
    out = ["| stream | conc | target | median ms | added median ms | added p99 ms | req/s |", "|---|---|---|---|---|---|---|"]
    for r in rows:
        out.append(f"| {'yes' if r['stream'] else 'no'} | {r['concurrency']} | {r['target']} | {r['median_ms']:.2f} | "
                   f"{r['added_median_ms']:.2f} | {r['added_p99_ms']:.2f} | {r['rps']:.0f} |")
    ratios = []
    for stream in (False, True):
        for conc in (1, 16):
            sel = {r["target"]: r for r in rows if r["stream"] == stream and r["concurrency"] == conc}
            mini, ruyi = float(sel["minimal"]["added_median_ms"]), float(sel["ruyi"]["added_median_ms"])  # type: ignore[arg-type]
            ratios.append(f"stream={'yes' if stream else 'no'} conc={conc}: Ruyi adds {ruyi:.2f} ms vs minimal {mini:.2f} ms "
                          f"= {ruyi / mini if mini > 0 else float('nan'):.2f}x")
    return "\n".join(out) + "\n\n" + "\n".join(f"- {r}" for r in ratios)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("-n", type=int, default=100, help="requests per target per round")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    up, mini, ruyi = free_port(), free_port(), free_port()
    procs = [spawn([sys.executable, "bench/fake_upstream_server.py", str(up)], up)]
    try:
        procs.append(spawn([sys.executable, "bench/minimal_passthrough.py", f"http://127.0.0.1:{up}", str(mini)], mini))
        procs.append(spawn([sys.executable, "-m", "proxy.cli", "serve", "--port", str(ruyi), "--upstream", f"http://127.0.0.1:{up}/v1"], ruyi))
        targets = {"direct": f"http://127.0.0.1:{up}", "minimal": f"http://127.0.0.1:{mini}", "ruyi": f"http://127.0.0.1:{ruyi}"}
        rows = asyncio.run(measure(targets, args.n, args.rounds))
    finally:
        for proc in procs:
            proc.terminate()
            proc.wait(10)
    print(json.dumps(rows, indent=1) if args.json else table(rows))


if __name__ == "__main__":
    main()
