"""The reliability suite (issue 27): load, a soak, a stalled store, upstream faults, bad input, slow clients and key
leaks, each against a real `ruyi serve` and, where a figure is compared, side by side with the fake upstream direct.

Only 127.0.0.1; every scenario is bounded in count and time. ``--short`` is what `make test` runs
(tests/reliability/test_suite.py calls the same functions with small numbers and checks outcomes, never timings);
the long run is the documented command, its figures in RELIABILITY.md:

    .venv/bin/python bench/reliability/suite.py --short                  # about a minute
    .venv/bin/python bench/reliability/suite.py                          # 500 and 1,000 streams, a 10-minute soak
    .venv/bin/python bench/reliability/suite.py --only soak --soak-s 120 --rate 20
    .venv/bin/python bench/reliability/suite.py --only soak --soak-s 120 --rate 20 --upstream-ms 300   # a model's first byte
    .venv/bin/python bench/reliability/suite.py --only soak --soak-s 120 --rate 20 --soak-minimal      # a bare proxy beside
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import sys
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from bench.processes import ROOT, free_port, spawn, stop
from bench.reliability.stack import SECRET, TREE, body, client, conversation, cpu_s, disk_bytes, fds, pct, rss_mb, slope_per_min, start, timed
from bench.reliability.store_faults import full_disk, stalled_store

# --- scenarios: each returns its figures (a flat dict) ---


async def load(streams: int, settle_s: float = 45.0) -> dict[str, Any]:
    """``streams`` streams at once (each ~1 s at the upstream: 10 chunks 100 ms apart), through Ruyi and direct; then
    how long, within ``settle_s``, until Ruyi's file descriptors are back (its idle upstream connections close ~30 s on)."""
    stack = start(chunk_delay=0.1, reply=" ".join(f"w{i}" for i in range(10)))
    try:
        before_rss, before_fds = rss_mb(stack.ruyi_pid), fds(stack.ruyi_pid)
        async with client() as http:
            direct = await asyncio.gather(*(timed(http, stack.upstream, body(i, True)) for i in range(streams)))
            proxied = await asyncio.gather(*(timed(http, stack.url, body(i, True), {"X-Ruyi-Agent": f"agent-{i}"}) for i in range(streams)))
        closed = time.perf_counter()
        back_s = None
        for _ in range(int(settle_s * 10)):  # file descriptors back (bounded poll): idle upstream connections close after their keep-alive
            if fds(stack.ruyi_pid) <= before_fds + 5:
                back_s = round(time.perf_counter() - closed, 1)
                break
            await asyncio.sleep(0.1)
        return {
            "streams": streams,
            "ok": sum(s == 200 for s, _ in proxied),
            "direct_ok": sum(s == 200 for s, _ in direct),
            "ttfb_p50_s": statistics.median(t for _, t in proxied),
            "ttfb_p99_s": pct([t for _, t in proxied], 0.99),
            "direct_ttfb_p50_s": statistics.median(t for _, t in direct),
            "direct_ttfb_p99_s": pct([t for _, t in direct], 0.99),
            "rss_mb_before": round(before_rss),
            "rss_mb_after": round(rss_mb(stack.ruyi_pid)),
            "fds_before": before_fds,
            "fds_after": fds(stack.ruyi_pid),
            "fds_back_after_s": back_s,
        }
    finally:
        stop(stack.procs)


async def soak(
    seconds: float,
    rate: float,
    sessions: int = 20,
    turns: int = 50,
    upstream_ms: float = 0.0,
    config: dict[str, Any] | None = None,
    minimal: bool = False,
) -> dict[str, Any]:
    """``rate`` requests a second for ``seconds`` from ``sessions`` agents, each growing its conversation by one
    exchange per request and starting a new task every ``turns`` requests (``turns=1``: every request a new
    conversation, its one message longer each time, as this soak sent before), through Ruyi; then the same
    schedule direct. Time to first byte, memory over time (its slope after the first third: warm-up), disk per
    request. ``upstream_ms``: the fake upstream waits that long before each answer (a real model's first byte; 0: a
    free upstream, the hard case for the ratio). ``minimal``: the same schedule through a bare aiohttp passthrough
    on uvloop too (`bench/serve/minimal_passthrough.py`), the floor of any proxy in front of that upstream."""
    stack = start(config, fault="delay", delay=upstream_ms / 1000) if upstream_ms > 0 else start(config)

    def payload(n: int) -> dict[str, Any]:
        if turns == 1:
            return body(n % sessions, words=20 + n // sessions)
        return conversation(n % sessions, n // sessions, turns)

    try:

        async def schedule(url: str, headers: Callable[[int], dict[str, str]]) -> tuple[list[float], list[int], list[tuple[float, float]]]:
            ttfb: list[float] = []
            statuses: list[int] = []
            rss: list[tuple[float, float]] = []
            tasks: list[asyncio.Task[tuple[int, float]]] = []
            every = max(1.0, seconds / 20)
            async with client() as http:
                started, n = time.perf_counter(), 0
                while (now := time.perf_counter() - started) < seconds:
                    due = int(now * rate)
                    while n < due:
                        tasks.append(asyncio.ensure_future(timed(http, url, payload(n), headers(n))))
                        n += 1
                    if url == stack.url and now >= len(rss) * every:
                        rss.append((now, rss_mb(stack.ruyi_pid)))
                    await asyncio.sleep(0.01)
                for status, first in await asyncio.gather(*tasks):
                    statuses.append(status)
                    ttfb.append(first)
            return ttfb, statuses, rss

        disk0, cpu0 = disk_bytes(stack.data_dir), cpu_s(stack.ruyi_pid)
        ttfb, statuses, rss = await schedule(stack.url, lambda n: {"X-Ruyi-Agent": f"soak-{n % sessions}"})
        await asyncio.sleep(1.5)  # the background writer's last batch
        disk1, cpu1 = disk_bytes(stack.data_dir), cpu_s(stack.ruyi_pid)
        rss.append((seconds, rss_mb(stack.ruyi_pid)))
        async with client() as http, http.get(f"{stack.url}/ruyi/v1/stats") as resp:
            stats = await resp.json() if resp.status == 200 else {}
            rewrites = {**stats.get("rewrites", {}), "why": stats.get("rewrites_in_thread")}
        direct, _, _ = await schedule(stack.upstream, lambda n: {})
        p50, direct_p50 = statistics.median(ttfb) * 1000, statistics.median(direct) * 1000
        p99, direct_p99 = pct(ttfb, 0.99) * 1000, pct(direct, 0.99) * 1000
        beside = await _through_minimal(stack.upstream, schedule, direct_p50, direct_p99) if minimal else {}
        return {
            "seconds": seconds,
            "rate": rate,
            "turns": turns,
            "upstream_ms": upstream_ms,
            "requests": len(statuses),
            "ok": statuses.count(200),
            "ttfb_p50_ms": round(p50, 1),
            "ttfb_p99_ms": round(p99, 1),
            "direct_ttfb_p50_ms": round(direct_p50, 1),
            "direct_ttfb_p99_ms": round(direct_p99, 1),
            "added_p50_ms": round(p50 - direct_p50, 1),
            "ruyi_cpu_ms_per_request": round((cpu1 - cpu0) * 1000 / max(1, len(statuses)), 2),
            "ratio_p50": round(p50 / direct_p50, 2) if direct_p50 else None,
            "ratio_p99": round(p99 / direct_p99, 2) if direct_p99 else None,
            "rss_mb": [[round(t), round(r)] for t, r in rss],
            "rss_mb_per_min_after_warmup": round(slope_per_min([(t, r) for t, r in rss if t >= seconds / 3]), 2),
            "disk_kb_per_request": round((disk1 - disk0) / max(1, len(statuses)) / 1024, 2),
            "rewrites": rewrites,  # measured and rewritten on the loop or in a worker thread
            **beside,
        }
    finally:
        stop(stack.procs)


async def _through_minimal(
    upstream: str, schedule: Callable[..., Awaitable[tuple[list[float], list[int], Any]]], direct_p50: float, direct_p99: float
) -> dict[str, Any]:
    """The soak's schedule through a bare aiohttp passthrough (on uvloop, as `ruyi serve`) to the same upstream."""
    port = free_port()
    proc = spawn([sys.executable, str(ROOT / "bench" / "serve" / "minimal_passthrough.py"), upstream, str(port), "uvloop"], port)
    try:
        ttfb, statuses, _ = await schedule(f"http://127.0.0.1:{port}", lambda n: {})
    finally:
        stop([proc])
    p50, p99 = statistics.median(ttfb) * 1000, pct(ttfb, 0.99) * 1000
    return {
        "minimal_ok": statuses.count(200),
        "minimal_ttfb_p50_ms": round(p50, 1),
        "minimal_ttfb_p99_ms": round(p99, 1),
        "minimal_ratio_p50": round(p50 / direct_p50, 2) if direct_p50 else None,
        "minimal_ratio_p99": round(p99 / direct_p99, 2) if direct_p99 else None,
    }


async def faults(requests: int) -> dict[str, Any]:
    """Upstream 500, 429, a stall past the upstream timeout, a stream cut mid-way: relayed or answered in the client's
    format, Ruyi healthy after each."""
    out: dict[str, Any] = {}
    cases: list[tuple[str, dict[str, Any], dict[str, Any], bool]] = [
        ("500", {"fault": "status", "status": 500}, {}, False),
        ("429", {"fault": "status", "status": 429}, {}, False),
        ("stall", {"fault": "delay", "delay": 5.0}, {"upstream": {"read_timeout_seconds": 1.0}}, False),
        ("cut", {"fault": "cut", "cut_after": 2, "chunk_delay": 0.01}, {}, True),
    ]
    for name, switches, config, stream in cases:
        stack = start(config, **switches)
        try:
            async with client(60) as http:
                got = await asyncio.gather(
                    *(timed(http, stack.url, body(i, stream), {"X-Ruyi-Agent": f"f{i}"}) for i in range(requests)), return_exceptions=True
                )
                statuses = sorted({r[0] if isinstance(r, tuple) else type(r).__name__ for r in got}, key=str)
                async with http.get(stack.url + "/healthz") as r:
                    healthy = r.status == 200
            out[name] = {"statuses": statuses, "healthy_after": healthy, "alive": stack.procs[-1].poll() is None}
        finally:
            stop(stack.procs)
    return out


async def bad_input(requests: int) -> dict[str, Any]:
    """Malformed JSON, a lone surrogate, a non-object body, 200 headers, a traversal path: refused in the client's
    format (or, for valid JSON, served), never a crash."""
    stack = start()
    try:
        results: dict[str, list[int]] = {}
        async with client(60) as http:

            async def send(name: str, data: bytes, headers: dict[str, str] | None = None, path: str = "/v1/chat/completions") -> None:
                async with http.post(stack.url + path, data=data, headers={"Content-Type": "application/json", **(headers or {})}) as r:
                    await r.read()
                    results.setdefault(name, []).append(r.status)

            for i in range(requests):
                await send("malformed_json", b'{"model": "gpt-4o", "messages": [')
                await send("lone_surrogate", json.dumps(body(i)).replace("fix", "\\ud800fix").encode())
                await send("not_an_object", b"[1, 2, 3]")
                await send("many_headers", json.dumps(body(i)).encode(), {f"X-Pad-{k}": "x" for k in range(200)})
                await send("traversal", json.dumps(body(i)).encode(), path="/v1/../../etc/passwd")
            async with http.get(stack.url + "/healthz") as r:
                healthy = r.status == 200
        return {name: sorted(set(s)) for name, s in results.items()} | {"healthy_after": healthy, "alive": stack.procs[-1].poll() is None}
    finally:
        stop(stack.procs)


async def slow_clients(connections: int, header_timeout_s: float = 1.0) -> dict[str, Any]:
    """``connections`` clients trickling a request head (a byte now and then): cut after ``limits.header_timeout_seconds``;
    a normal request is answered meanwhile."""
    stack = start({"limits": {"header_timeout_seconds": header_timeout_s}})
    try:
        port = int(stack.url.rsplit(":", 1)[1])
        opened: list[tuple[asyncio.StreamReader, asyncio.StreamWriter]] = []
        for _ in range(connections):
            reader, writer = await asyncio.open_connection("127.0.0.1", port)
            writer.write(b"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\n")
            opened.append((reader, writer))
        async with client(60) as http:
            status, _ = await timed(http, stack.url, body(0), {"X-Ruyi-Agent": "normal"})
        cut: set[int] = set()
        started = time.perf_counter()
        while time.perf_counter() - started < header_timeout_s * 20 and len(cut) < connections:
            for i, (reader, writer) in enumerate(opened):
                if i in cut:
                    continue
                try:
                    writer.write(b"X")  # one more byte of the head
                    await writer.drain()
                    if not await asyncio.wait_for(reader.read(1 << 16), 0.05):
                        cut.add(i)  # the server closed it
                except TimeoutError:
                    pass
                except ConnectionError:  # closed, perhaps reset, before the byte went or the answer was read
                    cut.add(i)
                if reader.at_eof():
                    cut.add(i)
            await asyncio.sleep(0.2)
        closed = len(cut)
        for _, writer in opened:
            writer.close()
        return {"connections": connections, "cut": closed, "normal_request": status, "alive": stack.procs[-1].poll() is None}
    finally:
        stop(stack.procs)


async def key_leaks(requests: int) -> dict[str, Any]:
    """A client key, a key-shaped session header and secrets in messages: none of them in any file Ruyi wrote (the store,
    its log) nor in any answer; a body's ``base_url``/``api_base`` never reaches another address."""
    attacker = free_port()
    seen: list[bytes] = []

    async def note(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        seen.append(await reader.read(1 << 16))
        writer.close()

    trap = await asyncio.start_server(note, "127.0.0.1", attacker)
    stack = start()
    try:
        answers: list[bytes] = []
        async with client(60) as http:
            for i in range(requests):
                payload = body(i)
                payload["messages"].append({"role": "user", "content": f'my key is {SECRET} and db_password = "{SECRET}"'})
                payload |= {
                    "base_url": f"http://127.0.0.1:{attacker}",
                    "api_base": f"http://127.0.0.1:{attacker}",
                    "fallbacks": [{"api_base": f"http://127.0.0.1:{attacker}"}],
                }
                headers = {"Authorization": f"Bearer {SECRET}", "X-Ruyi-Session": SECRET, "X-Ruyi-Agent": "leaky"}
                async with http.post(stack.url + "/v1/chat/completions", json=payload, headers=headers) as r:
                    answers.append(await r.read() + str(dict(r.headers)).encode())
                async with http.post(stack.url + "/v1/chat/completions", data=b"{bad", headers=headers) as r:
                    answers.append(await r.read())
        await asyncio.sleep(1.5)  # the background writer's last batch
    finally:
        stop(stack.procs)
        trap.close()
    found = []
    for path in stack.data_dir.parent.rglob("*"):
        if path.is_file() and path.name != "config.yaml" and SECRET.encode() in path.read_bytes():
            found.append(path.name)
    return {
        "requests": requests,
        "files_with_secret": found,
        "answers_with_secret": sum(SECRET.encode() in a for a in answers),
        "attacker_connections": len(seen),
    }


SCENARIOS: dict[str, Callable[[argparse.Namespace], Awaitable[dict[str, Any]]]] = {
    "load": lambda a: _loads(a.streams),
    "soak": lambda a: soak(a.soak_s, a.rate, turns=a.turns, upstream_ms=a.upstream_ms, config=json.loads(a.soak_config), minimal=a.soak_minimal),
    "stalled_store": lambda a: stalled_store(a.stalled, a.held_s),
    "full_disk": lambda a: full_disk(a.full),
    "faults": lambda a: faults(a.faults),
    "bad_input": lambda a: bad_input(a.bad),
    "slow_clients": lambda a: slow_clients(a.slow),
    "key_leaks": lambda a: key_leaks(a.leaks),
}


async def _loads(streams: list[int]) -> dict[str, Any]:
    return {str(n): await load(n) for n in streams}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--short", action="store_true", help="the small numbers make test uses")
    parser.add_argument("--root", type=Path, default=ROOT, help="source tree of the Ruyi to measure (default: this one)")
    parser.add_argument("--only", action="append", choices=sorted(SCENARIOS), help="run only these (repeatable)")
    parser.add_argument("--streams", type=int, nargs="*", default=[500, 1000])
    parser.add_argument("--soak-s", type=float, default=600.0)
    parser.add_argument("--rate", type=float, default=20.0, help="soak requests per second")
    parser.add_argument(
        "--turns", type=int, default=50, help="soak requests per conversation before an agent starts a new one (1: every request new)"
    )
    parser.add_argument(
        "--upstream-ms", type=float, default=0.0, help="the soak's fake upstream waits this long before each answer (a real model's first byte)"
    )
    parser.add_argument(
        "--soak-minimal", action="store_true", help="the soak's schedule through a bare aiohttp passthrough too (the floor of any proxy)"
    )
    parser.add_argument("--soak-config", default="{}", help='the soak\'s Ruyi config, as JSON ({"sessions": {"idle_s": 30}})')
    parser.add_argument("--stalled", type=int, default=64)
    parser.add_argument("--held-s", type=float, default=10.0)
    parser.add_argument("--full", type=int, default=64, help="agents sending while the disk is full")
    parser.add_argument("--faults", type=int, default=20)
    parser.add_argument("--bad", type=int, default=20)
    parser.add_argument("--slow", type=int, default=500)
    parser.add_argument("--leaks", type=int, default=20)
    args = parser.parse_args()
    TREE["root"] = args.root
    if args.short:
        args.streams, args.soak_s, args.rate, args.stalled, args.held_s = [50], 5.0, 10.0, 16, 2.0
        args.faults, args.bad, args.slow, args.leaks, args.full = 3, 2, 20, 2, 8
    for name in args.only or SCENARIOS:
        started = time.perf_counter()
        figures: dict[str, Any] = asyncio.run(SCENARIOS[name](args))  # type: ignore[arg-type]
        print(json.dumps({"scenario": name, "wall_s": round(time.perf_counter() - started, 1), **figures}), flush=True)


if __name__ == "__main__":
    main()
