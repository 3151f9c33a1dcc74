"""Peak memory of `ruyi serve` answering one large chat body: against the body's size, optionally beside another checkout.

Each ``--mib`` size is one OpenAI chat request of just under that many MiB (the last is at most ``limits.max_body_bytes``,
32 MiB): a conversation of ``--messages`` messages (user questions, assistant tool calls, short tool outputs) and one
huge tool output that makes up the rest, as an agent that read a big log sends. A fresh ``ruyi serve`` (the test
suite's fake upstream behind it) answers it once; its peak resident memory (VmHWM) is read at start, once the answer
is back, and once its background writes settled (the peak stopped moving), with what it still holds then (VmRSS).
"grew by" is the peak minus the peak at start; "× body" that over the bodies' size (the target: about 3 at most).

``--at-once N`` sends N such bodies (other conversations) at the same time instead of one; "resident N s later" is
VmRSS ``--later-s`` after settling (the idle sweep, every 30 s, gives the C heap's free pages back).

``--before DIR`` is a checkout of another version (``git archive REV | tar -x -C DIR``), measured first, in the same run.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import random
import shutil
import sys
import time
from pathlib import Path
from typing import Any

import aiohttp
from aiohttp import web

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from bench.processes import free_port, serve  # noqa: E402
from tests.fake_upstream import FakeUpstream, make_fake_app  # noqa: E402

WORDS = (
    "error",
    "warning",
    "request",
    "handler",
    "timeout",
    "retry",
    "queue",
    "worker",
    "socket",
    "commit",
    "build",
    "test",
    "module",
    "config",
    "session",
    "token",
    "cache",
    "index",
    "write",
    "read",
    "line",
    "file",
    "path",
)


def memory_mib(pid: int) -> tuple[float, float]:
    """(VmHWM, VmRSS) of the process, in MiB."""
    found = {}
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith(("VmHWM:", "VmRSS:")):
            found[line.split(":")[0]] = int(line.split()[1]) / 1024
    return found["VmHWM"], found["VmRSS"]


def log_text(n_bytes: int, seed: int) -> str:
    """Log-like lines, about ``n_bytes`` of them (varied, so token counts and digests do real work)."""
    rng = random.Random(seed)
    lines, size, i = [], 0, 0
    while size < n_bytes:
        line = f"2026-11-27T04:{i // 60 % 60:02d}:{i % 60:02d} {rng.choice(WORDS)} {' '.join(rng.choices(WORDS, k=8))} #{i}"
        lines.append(line)
        size += len(line) + 1
        i += 1
    return "\n".join(lines)[:n_bytes]


def body_of(n_bytes: int, messages: int, seed: int = 7) -> bytes:
    """One chat body of exactly ``n_bytes`` bytes: ``messages`` small ones, then one tool output with the rest (its
    lines drawn from ``seed``: bodies of other seeds are other conversations)."""
    msgs: list[dict[str, Any]] = [{"role": "system", "content": "You are a coding agent. Use the tools to inspect the repository."}]
    for i in range(messages // 3):
        msgs.append({"role": "user" if i == 0 else "assistant", "content": f"step {i}: look at the logs of worker {i} " + log_text(200, i)})
        msgs.append(
            {
                "role": "assistant",
                "content": None,
                "tool_calls": [
                    {
                        "id": f"call_{i}",
                        "type": "function",
                        "function": {"name": "read_file", "arguments": json.dumps({"path": f"logs/worker-{i}.log"})},
                    }
                ],
            }
        )
        msgs.append({"role": "tool", "tool_call_id": f"call_{i}", "content": log_text(400, 10_000 + i)})
    msgs.append(
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {"id": "call_big", "type": "function", "function": {"name": "read_file", "arguments": json.dumps({"path": "logs/all.log"})}}
            ],
        }
    )
    msgs.append({"role": "tool", "tool_call_id": "call_big", "content": ""})
    msgs.append({"role": "user", "content": "What failed first, and why?"})
    body = {"model": "gpt-4o", "messages": msgs}
    rest = n_bytes - len(json.dumps(body).encode())
    text = log_text(rest, seed)
    msgs[-2]["content"] = text
    while (over := len(json.dumps(body).encode()) - n_bytes) > 0:  # newlines take two bytes once escaped
        text = msgs[-2]["content"] = text[: len(text) - over]
    msgs[-2]["content"] = text + " " * (n_bytes - len(json.dumps(body).encode()))
    raw = json.dumps(body).encode()
    assert len(raw) == n_bytes, (len(raw), n_bytes)
    return raw


async def settled(pid: int, quiet_s: float = 1.5, most_s: float = 60.0) -> tuple[float, float]:
    """(VmHWM, VmRSS) once the peak has not moved for ``quiet_s`` (background writes done), at most ``most_s``."""
    last, since, end = memory_mib(pid), time.monotonic(), time.monotonic() + most_s
    while time.monotonic() < end:
        await asyncio.sleep(0.25)
        now = memory_mib(pid)
        if now[0] != last[0]:
            last, since = now, time.monotonic()
        elif time.monotonic() - since >= quiet_s:
            return now
    return memory_mib(pid)


async def measure(checkout: Path, upstream: str, data_dir: Path, raws: list[bytes], later_s: float) -> dict[str, float]:
    shutil.rmtree(data_dir, ignore_errors=True)  # a fresh store each time
    port = free_port()
    proc = await serve(checkout, port, upstream, data_dir)
    url = f"http://127.0.0.1:{port}"
    try:
        async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=600)) as http:
            for _ in range(600):
                try:
                    async with http.get(url + "/healthz") as resp:
                        if resp.status == 200:
                            break
                except aiohttp.ClientConnectionError:
                    await asyncio.sleep(0.05)
            start = memory_mib(proc.pid)[0]
            began = time.monotonic()

            async def post(raw: bytes) -> int:
                async with http.post(url + "/v1/chat/completions", data=raw, headers={"Content-Type": "application/json"}) as resp:
                    await resp.read()
                    return resp.status

            status = max(await asyncio.gather(*(post(raw) for raw in raws)))  # at once
            answered_s = time.monotonic() - began
            answered = memory_mib(proc.pid)[0]
            peak, resident = await settled(proc.pid)
            async with http.get(url + "/ruyi/v1/stats") as resp:  # requests whose rewrite gave up on a store thought stuck
                stalled = (await resp.json()).get("store_stuck", {}).get("waits_given_up")  # None: a tree before the watchdog
            await asyncio.sleep(later_s)  # the idle sweep (every 30 s) gives the heap's free pages back
            later = memory_mib(proc.pid)[1]
            return {
                "status": status,
                "start": start,
                "answered": answered,
                "peak": peak,
                "resident": resident,
                "later": later,
                "seconds": answered_s,
                "stalled": stalled,
            }
    finally:
        proc.terminate()
        await proc.wait()


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--before", type=Path, help="a checkout of the version to compare with")
    parser.add_argument("--mib", default="8,32", help="body sizes in MiB, comma-separated (32 is the default limit)")
    parser.add_argument("--messages", type=int, default=600, help="small messages before the huge tool output")
    parser.add_argument("--data-dir", type=Path, default=Path("/tmp/ruyi-bench-body-memory"))
    parser.add_argument("--at-once", type=int, default=1, help="bodies of that size sent at once (other conversations)")
    parser.add_argument("--later-s", type=float, default=35.0, help="resident memory read again this long after settling")
    args = parser.parse_args()
    fake = FakeUpstream()
    runner = web.AppRunner(make_fake_app(fake))
    await runner.setup()
    port = free_port()
    await web.TCPSite(runner, "127.0.0.1", port).start()
    upstream = f"http://127.0.0.1:{port}/v1"
    checkouts = ([("before", args.before.resolve())] if args.before is not None else []) + [("this", ROOT)]
    print(f"{args.at_once} chat body(ies) at once, each {args.messages} messages and one huge tool output, answered by a fresh ruyi serve\n")
    print(
        "| body MiB | ruyi | status | peak MiB at start | peak once answered | peak once settled | grew by | × body | resident after | "
        f"resident {args.later_s:.0f} s later | answered in s | gave up on the store |"
    )
    print("|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    try:
        for mib in (int(m) for m in args.mib.split(",")):
            raws = [body_of(mib * 2**20 - 1024, args.messages, 7 + n) for n in range(args.at_once)]  # under the 32 MiB limit
            for name, checkout in checkouts:
                fake.received.clear()
                r = await measure(checkout, upstream, args.data_dir / f"{name}-{mib}", raws, args.later_s)
                grew = r["peak"] - r["start"]
                print(
                    f"| {mib} | {name} | {r['status']:.0f} | {r['start']:.0f} | {r['answered']:.0f} | {r['peak']:.0f} | {grew:.0f} | "
                    f"{grew / (sum(map(len, raws)) / 2**20):.1f} | {r['resident']:.0f} | {r['later']:.0f} | {r['seconds']:.1f} | {'—' if r['stalled'] is None else r['stalled']} |",
                    flush=True,
                )
    finally:
        await runner.cleanup()


if __name__ == "__main__":
    asyncio.run(main())
