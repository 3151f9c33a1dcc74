"""Where the event loop's time goes per request: `ruyi serve` under cProfile with a thread-CPU clock (the loop's thread
only; profiling roughly doubles every figure), driven by the soak's traffic (agents growing their conversations, not
streamed); prints the request path's functions by cumulative loop CPU per request.

    .venv/bin/python bench/serve/profile_loop.py [--root /tmp/before] [--seconds 20] [--rate 20] [--save out.prof]
"""

from __future__ import annotations

import argparse
import asyncio
import pstats
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from bench.processes import fake_upstream, free_port, spawn, stop  # noqa: E402
from bench.reliability.stack import client, conversation, cpu_s, timed  # noqa: E402

SERVE = """
import atexit, cProfile, os, sys, time
profile = cProfile.Profile(time.thread_time)
atexit.register(lambda: (profile.disable(), profile.dump_stats(os.environ["PROFILE_OUT"])))
from proxy.cli import main
profile.enable()
sys.exit(main(sys.argv[1:]))
"""
PATH_PARTS = ("proxy/", "memory/", "strategies/", "aiohttp/web_protocol", "aiohttp/client", "structlog/_native")


async def drive(url: str, seconds: float, rate: float, pid: int, agents: int = 20) -> tuple[list[float], float]:
    tasks = []
    async with client() as http:
        cpu0, started, n = cpu_s(pid), time.perf_counter(), 0
        while (now := time.perf_counter() - started) < seconds:
            while n < int(now * rate):
                payload = conversation(n % agents, n // agents, 50)
                tasks.append(asyncio.ensure_future(timed(http, url, payload, {"X-Ruyi-Agent": f"profile-{n % agents}"})))
                n += 1
            await asyncio.sleep(0.01)
        answers = await asyncio.gather(*tasks)
        await asyncio.sleep(1.5)
        cpu = cpu_s(pid) - cpu0
    assert all(status == 200 for status, _ in answers)
    return [first * 1000 for _, first in answers], cpu * 1000 / len(answers)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--root", type=Path, default=ROOT, help="source tree of the Ruyi to profile")
    parser.add_argument("--seconds", type=float, default=20.0)
    parser.add_argument("--rate", type=float, default=20.0)
    parser.add_argument("--top", type=int, default=40)
    parser.add_argument("--save", type=Path, help="keep the profile (pstats) here")
    args = parser.parse_args()
    data = Path(tempfile.mkdtemp(prefix="ruyi-profile-"))
    (data / "config.yaml").write_text("{}")
    out = args.save or data / "loop.prof"
    up, port = free_port(), free_port()
    procs = [fake_upstream(up)]
    try:
        env = {"RUYI_DATA_DIR": str(data / "data"), "RUYI_LOG_LEVEL": "info", "PYTHONPATH": str(args.root), "PROFILE_OUT": str(out)}
        serve = [
            sys.executable,
            "-c",
            SERVE,
            "serve",
            "--port",
            str(port),
            "--upstream",
            f"http://127.0.0.1:{up}/v1",
            "--config",
            str(data / "config.yaml"),
        ]
        procs.append(spawn(serve, port, env, cwd=args.root))
        ttfb, cpu = asyncio.run(drive(f"http://127.0.0.1:{port}", args.seconds, args.rate, procs[-1].pid))
    finally:
        stop(procs)
    n = len(ttfb)
    print(f"{n} requests (profiled): time to first byte p50 {statistics.median(ttfb):.2f} ms; CPU per request, all threads {cpu:.2f} ms\n")
    stats = pstats.Stats(str(out))
    rows = []
    for (path, line, fn), (_, calls, own, cum, _) in stats.stats.items():  # type: ignore[attr-defined]
        where = path.split("/site-packages/")[-1].replace(str(args.root) + "/", "")
        if any(part in where for part in PATH_PARTS) and calls >= n // 2:  # per request, not start-up
            rows.append((cum / n * 1000, own / n * 1000, calls, f"{where}:{line}({fn})"))
    print("| loop CPU ms per request, cumulative | own | calls | function |\n|---:|---:|---:|---|")
    for cum, own, calls, name in sorted(rows, reverse=True)[: args.top]:
        print(f"| {cum:.3f} | {own:.3f} | {calls} | `{name}` |")


if __name__ == "__main__":
    main()
