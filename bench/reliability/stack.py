"""What the reliability suite runs its scenarios on: a fake upstream and a `ruyi serve` as processes, the bodies it
sends, and what it reads of a process (resident memory, open files, disk)."""

from __future__ import annotations

import os
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import aiohttp

from bench.processes import ROOT, fake_upstream, free_port, ruyi, stop

SECRET = "sk-ruyi-reliability-0123456789abcdefghijklmnop"
"""A client's key and a secret in a message: neither may reach the store, the log or an error."""


@dataclass
class Stack:
    """A fake upstream and a `ruyi serve` in front of it, each its own process."""

    upstream: str
    url: str
    data_dir: Path
    log: Path
    procs: list[subprocess.Popen[bytes]] = field(default_factory=list)

    @property
    def ruyi_pid(self) -> int:
        return self.procs[-1].pid


TREE = {"root": ROOT}
"""The source tree of the Ruyi under test (``--root``: another checkout, for a before/after)."""


def start(config: dict[str, Any] | None = None, **switches: Any) -> Stack:
    up, port = free_port(), free_port()
    procs = [fake_upstream(up, **switches)]
    try:
        proc = ruyi(port, f"http://127.0.0.1:{up}/v1", config or {}, TREE["root"])
    except BaseException:
        stop(procs)
        raise
    procs.append(proc)
    args = [str(a) for a in proc.args]  # type: ignore[union-attr]
    data = Path(args[args.index("--config") + 1]).parent
    return Stack(f"http://127.0.0.1:{up}", f"http://127.0.0.1:{port}", data / "data", data / "ruyi.log", procs)


def rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return float("nan")


def cpu_s(pid: int) -> float:
    """CPU seconds a process has used so far, all its threads (user + system)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def fds(pid: int) -> int:
    return len(os.listdir(f"/proc/{pid}/fd"))


def disk_bytes(data_dir: Path) -> int:
    return sum(p.stat().st_size for p in data_dir.glob("*") if p.is_file())


def pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))] if ordered else float("nan")


def body(i: int, stream: bool = False, words: int = 20) -> dict[str, Any]:
    return {
        "model": "gpt-4o",
        "stream": stream,
        "messages": [
            {"role": "system", "content": "You are a coding agent."},
            {"role": "user", "content": f"agent {i}: fix the failing test " + "context " * words},
        ],
    }


REPLY = "Hello from the fake upstream."
"""What the fake upstream answers (tests/fake_upstream.py): an agent's next request carries it as the assistant's turn."""


def conversation(agent: int, request: int, turns: int, words: int = 20) -> dict[str, Any]:
    """Agent ``agent``'s ``request``-th request: its conversation grown by one exchange per request (the answer it got,
    then a new user turn), a new task (a new session) every ``turns`` requests."""
    task, step = divmod(request, turns)
    messages: list[dict[str, Any]] = [{"role": "system", "content": "You are a coding agent."}]
    for s in range(step + 1):
        if s:
            messages.append({"role": "assistant", "content": REPLY})
        messages.append({"role": "user", "content": f"agent {agent} task {task} step {s}: fix the failing test " + "context " * words})
    return {"model": "gpt-4o", "stream": False, "messages": messages}


def slope_per_min(samples: list[tuple[float, float]]) -> float:
    """Least-squares slope of (seconds, value) samples, per minute (0 for fewer than two)."""
    if len(samples) < 2:
        return 0.0
    mt = sum(t for t, _ in samples) / len(samples)
    mv = sum(v for _, v in samples) / len(samples)
    var = sum((t - mt) ** 2 for t, _ in samples)
    return 60 * sum((t - mt) * (v - mv) for t, v in samples) / var if var else 0.0


async def timed(http: aiohttp.ClientSession, url: str, payload: dict[str, Any], headers: dict[str, str] | None = None) -> tuple[int, float]:
    """(status, seconds to the first body byte)."""
    started = time.perf_counter()
    async with http.post(url + "/v1/chat/completions", json=payload, headers=headers or {}) as resp:
        first = None
        async for _ in resp.content.iter_any():
            if first is None:
                first = time.perf_counter() - started
        return resp.status, first if first is not None else time.perf_counter() - started


def client(timeout_s: float = 300) -> aiohttp.ClientSession:
    return aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=0), timeout=aiohttp.ClientTimeout(total=timeout_s))


async def stats(url: str) -> dict[str, Any]:
    async with aiohttp.ClientSession() as http, http.get(url + "/ruyi/v1/stats") as r:
        return dict(await r.json())
