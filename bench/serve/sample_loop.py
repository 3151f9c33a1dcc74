"""Where the event loop holds the interpreter per request, sampled (py-spy ``--gil``: only the thread holding the GIL is
sampled, no instrumentation): `ruyi serve` driven by the soak's traffic (agents growing their conversations, not
streamed), as `profile_loop.py` drives it. Unlike cProfile with a thread-CPU clock, this sees what a system call holding
the GIL costs the loop, a thread woken (a futex) or a socket written, and it does not inflate small functions.

    .venv/bin/python bench/serve/sample_loop.py [--root /tmp/before] [--seconds 30] [--py-spy /path/to/py-spy]

Needs py-spy (not a dependency of Ruyi: ``pip install py-spy`` into any environment and pass its path, or have it on
PATH). Prints ms per request: the request path's functions (inclusive) and the leaves where the loop's time is spent.
"""

from __future__ import annotations

import argparse
import asyncio
import collections
import re
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from bench.processes import fake_upstream, free_port, spawn, stop  # noqa: E402
from bench.serve.profile_loop import drive  # noqa: E402

RATE_HZ = 1000
PHASES = (
    "request_middleware (proxy/http/middleware.py)",
    "handle (proxy/flow.py)",
    "read_json_body (proxy/http/request_body.py)",
    "prepare (proxy/rewrite/prepare.py)",
    "Measurer.measure (proxy/know/measure.py)",
    "Fingerprinter.chain (memory/chain.py)",
    "TokenCounter.count (proxy/know/tokens.py)",
    "build (proxy/rewrite/build.py)",
    "record (proxy/rewrite/record.py)",
    "forward (proxy/flow.py)",
    "ClientRequest.write_bytes (aiohttp/client_reqrep.py)",
    "send_now (proxy/http/settling.py)",
    "after_answer (proxy/flow.py)",
    "_access (proxy/http/middleware.py)",
)
LINE = re.compile(r" \((.*?):\d+\)$")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--root", type=Path, default=ROOT, help="source tree of the Ruyi to sample")
    parser.add_argument("--seconds", type=float, default=30.0)
    parser.add_argument("--rate", type=float, default=20.0)
    parser.add_argument("--py-spy", default=shutil.which("py-spy"), help="the py-spy executable")
    parser.add_argument("--top", type=int, default=25)
    args = parser.parse_args()
    if not args.py_spy:
        sys.exit("py-spy not found: pip install py-spy (anywhere) and pass --py-spy PATH")
    data = Path(tempfile.mkdtemp(prefix="ruyi-sample-"))
    (data / "config.yaml").write_text("{}")
    out = data / "stacks.txt"
    up, port = free_port(), free_port()
    procs = [fake_upstream(up)]
    try:
        env = {"RUYI_DATA_DIR": str(data / "data"), "RUYI_LOG_LEVEL": "info", "PYTHONPATH": str(args.root)}
        serve = [sys.executable, "-m", "proxy.cli", "serve", "--port", str(port), "--upstream", f"http://127.0.0.1:{up}/v1"]
        procs.append(spawn([*serve, "--config", str(data / "config.yaml")], port, env, cwd=args.root))
        url, pid = f"http://127.0.0.1:{port}", procs[-1].pid
        asyncio.run(drive(url, 3, args.rate, pid))  # warm-up, not sampled: tiktoken's tables, first sessions
        record = [args.py_spy, "record", "-p", str(pid), "-r", str(RATE_HZ), "-f", "raw", "-o", str(out), "--gil", "--nonblocking"]
        spy = subprocess.Popen(record, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        time.sleep(1)
        ttfb, cpu = asyncio.run(drive(url, args.seconds, args.rate, pid))
        spy.send_signal(signal.SIGINT)
        spy.wait(60)
    finally:
        stop(procs)
    n = len(ttfb)
    print(f"{n} requests (sampled): time to first byte p50 {statistics.median(ttfb):.2f} ms; CPU per request, all threads {cpu:.2f} ms\n")
    inclusive: collections.Counter[str] = collections.Counter()
    leaves: collections.Counter[str] = collections.Counter()
    for line in out.read_text().splitlines():
        stack, _, samples = line.rpartition(" ")
        frames = [LINE.sub(r" (\1)", f) for f in stack.split(";")[1:]]
        if not frames:
            continue
        for frame in set(frames):
            inclusive[frame] += int(samples)
        leaves[frames[-1]] += int(samples)

    def ms(samples: int) -> str:
        return f"{samples / RATE_HZ * 1000 / n:.3f}"

    print("| holding the GIL, ms per request, inclusive | function |\n|---:|---|")
    for phase in PHASES:
        print(f"| {ms(inclusive[phase])} | `{phase}` |")
    print("\n| holding the GIL, ms per request, own (leaf) | function |\n|---:|---|")
    for frame, own in leaves.most_common(args.top):
        print(f"| {ms(own)} | `{frame}` |")


if __name__ == "__main__":
    main()
