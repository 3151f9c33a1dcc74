"""Added latency of Ruyi vs calling the upstream directly, beside a minimal aiohttp passthrough, in one run.

Small requests (21 short messages) streamed or not at concurrency 1 and 16, and a real 276-message body (the
longest public trace, repeated: the session's warm path) at concurrency 1. Besides latency and requests per
second, each server's CPU time per request (all its threads, from /proc): the machine's load moves the latency
columns, much less this one.

    .venv/bin/python bench/serve/overhead.py                        # this tree
    .venv/bin/python bench/serve/overhead.py --root /tmp/before     # the same bench against another checkout
    .venv/bin/python bench/serve/overhead.py --before /tmp/before   # both side by side in one run ("ruyi-before", "ruyi")
"""

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
from typing import Any

import aiohttp

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from bench.processes import ruyi as ruyi_process

ROOT = Path(__file__).resolve().parents[2]
from proxy.replay.run import public_traces  # noqa: E402

# RUYI_TRACE_DIR, else shared/traces beside the checkout
TRACE = (public_traces() or Path("shared/traces")) / "mini-swe-agent-pr816__deepseek_chat_test_1-100__django__django-11910.json"
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


BODIES: dict[str, list[dict[str, Any]]] = {"small": MESSAGES}


def cpu_seconds(pid: int) -> float:
    """User + system CPU time of a process, all its threads."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


async def one(http: aiohttp.ClientSession, url: str, stream: bool, kind: str = "small") -> float:
    body = json.dumps({"model": "gpt-4o", "messages": BODIES[kind], "stream": stream}).encode()
    started = time.perf_counter()
    async with http.post(url + "/v1/chat/completions", data=body, headers={"Content-Type": "application/json"}) as resp:
        async for _ in resp.content.iter_any():
            pass
        assert resp.status == 200, resp.status
    return (time.perf_counter() - started) * 1000


async def run_batch(http: aiohttp.ClientSession, url: str, stream: bool, n: int, concurrency: int, kind: str = "small") -> tuple[list[float], float]:
    sem = asyncio.Semaphore(concurrency)

    async def guarded() -> float:
        async with sem:
            return await one(http, url, stream, kind)

    started = time.perf_counter()
    lat = await asyncio.gather(*(guarded() for _ in range(n)))
    return list(lat), n / (time.perf_counter() - started)


def pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


SCENARIOS = [("small", False, 1), ("small", False, 16), ("small", True, 1), ("small", True, 16), ("276 messages", False, 1)]


async def measure(targets: dict[str, str], pids: dict[str, int], n: int, rounds: int) -> list[dict[str, object]]:
    rows = []
    async with aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=64)) as http:
        for kind, stream, conc in SCENARIOS:
            count = n if kind == "small" else max(10, n // 5)
            lat: dict[str, list[float]] = {k: [] for k in targets}
            rps: dict[str, list[float]] = {k: [] for k in targets}
            cpu: dict[str, float] = {k: 0.0 for k in targets}
            for url in targets.values():  # warm-up
                await run_batch(http, url, stream, 20, conc, kind)
            for _ in range(rounds):  # interleaved so drift hits every target alike
                for name, url in targets.items():
                    before = cpu_seconds(pids[name])
                    values, rate = await run_batch(http, url, stream, count, conc, kind)
                    cpu[name] += cpu_seconds(pids[name]) - before
                    lat[name] += values
                    rps[name].append(rate)
            base = statistics.median(lat["direct"])
            base99 = pct(lat["direct"], 0.99)
            for name in targets:
                rows.append(
                    {
                        "body": kind,
                        "stream": stream,
                        "concurrency": conc,
                        "target": name,
                        "median_ms": statistics.median(lat[name]),
                        "added_median_ms": statistics.median(lat[name]) - base,
                        "added_p99_ms": pct(lat[name], 0.99) - base99,
                        "rps": statistics.median(rps[name]),
                        "cpu_ms_per_request": 1000 * cpu[name] / (count * rounds),
                    }
                )
    return rows


def table(rows: list[dict[str, Any]]) -> str:
    out = [
        "| body | stream | conc | target | median ms | added median ms | added p99 ms | req/s | server CPU ms/req |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        cpu = "–" if r["target"] == "direct" else f"{r['cpu_ms_per_request']:.2f}"
        out.append(
            f"| {r['body']} | {'yes' if r['stream'] else 'no'} | {r['concurrency']} | {r['target']} | {r['median_ms']:.2f} | "
            f"{r['added_median_ms']:.2f} | {r['added_p99_ms']:.2f} | {r['rps']:.0f} | {cpu} |"
        )
    ratios = []
    for kind, stream, conc in SCENARIOS:
        sel = {r["target"]: r for r in rows if r["body"] == kind and r["stream"] == stream and r["concurrency"] == conc}
        mini = float(sel["minimal"]["added_median_ms"])
        for name in [t for t in sel if t.startswith("ruyi")]:
            ruyi = float(sel[name]["added_median_ms"])
            throughput = float(sel[name]["rps"]) / float(sel["minimal"]["rps"])
            cpu_ratio = float(sel[name]["cpu_ms_per_request"]) / float(sel["minimal"]["cpu_ms_per_request"])
            ratios.append(
                f"{kind} stream={'yes' if stream else 'no'} conc={conc} {name}: adds {ruyi:.2f} ms vs minimal {mini:.2f} ms "
                f"= {ruyi / mini if mini > 0 else float('nan'):.2f}x (+{ruyi - mini:.2f} ms); "
                f"throughput {throughput:.2f}x; CPU per request {cpu_ratio:.2f}x"
            )
    return "\n".join(out) + "\n\n" + "\n".join(f"- {r}" for r in ratios)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("-n", type=int, default=100, help="requests per target per round")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--json", action="store_true")
    parser.add_argument("--root", type=Path, default=ROOT, help="source tree of the Ruyi to measure (default: this one)")
    parser.add_argument("--before", type=Path, help="another source tree measured in the same run, as ruyi-before")
    args = parser.parse_args()
    BODIES["276 messages"] = json.loads(TRACE.read_text())["messages"]
    up, mini, ruyi = free_port(), free_port(), free_port()
    procs = [spawn([sys.executable, "bench/fake_upstream_server.py", str(up)], up)]
    try:
        procs.append(spawn([sys.executable, "bench/serve/minimal_passthrough.py", f"http://127.0.0.1:{up}", str(mini)], mini))
        procs.append(ruyi_process(ruyi, f"http://127.0.0.1:{up}/v1", {}, args.root))
        targets = {"direct": f"http://127.0.0.1:{up}", "minimal": f"http://127.0.0.1:{mini}", "ruyi": f"http://127.0.0.1:{ruyi}"}
        pids = {"direct": procs[0].pid, "minimal": procs[1].pid, "ruyi": procs[2].pid}
        if args.before is not None:
            port = free_port()
            procs.append(ruyi_process(port, f"http://127.0.0.1:{up}/v1", {}, args.before))
            targets["ruyi-before"], pids["ruyi-before"] = f"http://127.0.0.1:{port}", procs[-1].pid
        rows = asyncio.run(measure(targets, pids, args.n, args.rounds))
    finally:
        for proc in procs:
            proc.terminate()
            proc.wait(10)
    print(json.dumps(rows, indent=1) if args.json else table(rows))


if __name__ == "__main__":
    main()
