"""One hash per replay scenario (forwarded bodies and DCP reports, request by request), to show what a change changed.

Every public trace is replayed as the requests its agent made, in scenarios that exercise the paths a
rewrite can take: offline at several windows, with the economic rule off, two sessions interleaved in one
registry, skipped requests; and through the real proxy over HTTP (a fake upstream records what is
forwarded) for the OpenAI and Ollama dialects. A scenario's hash covers, for every request in order, the
body forwarded (or, offline, the rewritten messages) and the DCP report without its request id.

    .venv/bin/python bench/savings/replay_hashes.py                         # prints one line per scenario
    .venv/bin/python bench/savings/replay_hashes.py --save before.json      # keep the per-request hashes
    .venv/bin/python bench/savings/replay_hashes.py --compare before.json   # name the first request that differs

A refactoring shows the same hashes before and after; a behaviour change shows which scenarios moved and
from which request on. Exit status 1 when ``--compare`` finds a difference.
"""

from __future__ import annotations

import argparse
import asyncio
import hashlib
import json
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from aiohttp import ClientSession, web  # noqa: E402

from bench.traces import TRACES, load_traces, requests_of  # noqa: E402
from config.load import load_config  # noqa: E402
from config.schema import Config  # noqa: E402
from proxy.http.app import make_app  # noqa: E402
from proxy.http.log import configure_logging  # noqa: E402
from proxy.replay.offline import OfflineRuyi  # noqa: E402
from proxy.replay.run import Trace  # noqa: E402
from proxy.rewrite.steps import default_steps  # noqa: E402
from tests.fake_upstream import FakeUpstream, make_fake_app  # noqa: E402

Hashes = dict[str, list[str]]
SEMANTIC = False
"""``--semantic``: hash forwarded bodies as parsed JSON (a change of JSON formatting alone then hashes the same)."""
VOLATILE = {"request_id"}


def digest(value: Any) -> str:
    return hashlib.sha256(json.dumps(value, sort_keys=True, ensure_ascii=False, default=str).encode()).hexdigest()[:16]


def stable(report: Any) -> Any:
    """A report without what changes from run to run (request ids)."""
    if isinstance(report, dict):
        return {k: stable(v) for k, v in report.items() if k not in VOLATILE}
    if isinstance(report, list):
        return [stable(v) for v in report]
    return report


def config(data_dir: str, **overrides: Any) -> Config:
    return load_config(None, {"RUYI_DATA_DIR": data_dir}, {"store.backend": "memory", **overrides})


def offline(traces: list[Trace], window: int, skip: int = 1, **overrides: Any) -> list[str]:
    out = []
    with tempfile.TemporaryDirectory() as tmp:
        for trace in traces:
            ruyi = OfflineRuyi(config(tmp, **overrides), trace.model or "gpt-4o", window)
            for i, request in enumerate(requests_of(trace)):
                if i % skip:
                    continue
                sent = ruyi(list(request), trace.tools)
                out.append(digest([sent, stable(ruyi.outcomes[-1].report)]))
    return out


def interleaved(traces: list[Trace], window: int) -> list[str]:
    """Two traces at a time through one OfflineRuyi (one registry): sessions found by their chains."""
    out = []
    with tempfile.TemporaryDirectory() as tmp:
        for a, b in zip(traces[::2], traces[1::2]):
            ruyi = OfflineRuyi(config(tmp), a.model or "gpt-4o", window)
            ra, rb = list(requests_of(a)), list(requests_of(b))
            for i in range(max(len(ra), len(rb))):
                for trace, reqs in ((a, ra), (b, rb)):
                    if i < len(reqs):
                        sent = ruyi(list(reqs[i]), trace.tools)
                        out.append(digest([sent, stable(ruyi.outcomes[-1].report)]))
    return out


async def over_http(traces: list[Trace], kind: str, window: int) -> list[str]:
    """Every request through the real proxy; what the fake upstream received, and the session's reports."""
    out: list[str] = []
    fake = FakeUpstream()
    up = web.AppRunner(make_fake_app(fake), access_log=None)
    await up.setup()
    up_site = web.TCPSite(up, "127.0.0.1", 0)
    await up_site.start()
    up_port = up_site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
    suffix = "/v1" if kind == "openai" else ""
    path = "/v1/chat/completions" if kind == "openai" else "/api/chat"
    with tempfile.TemporaryDirectory() as tmp:
        cfg = config(
            tmp,
            **{
                "default_route.url": f"http://127.0.0.1:{up_port}{suffix}",
                "default_route.kind": kind,
                "store.backend": "sqlite",
                "window.context_window": window,
                "ollama.max_num_ctx": window,
                "retrieval.enabled": False,
                "notebook.pool_lines": False,
            },
        )  # recall reads chunks written off the request path, and the notebook's pool lines carry the minute they
        # were written (an archive's stable part shows them): neither is repeatable from one run to the next
        proxy = web.AppRunner(make_app(cfg, default_steps(cfg), probe_upstream=False), access_log=None)
        await proxy.setup()
        site = web.TCPSite(proxy, "127.0.0.1", 0)
        await site.start()
        port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
        try:
            async with ClientSession() as http:
                for t, trace in enumerate(traces):
                    agent = {"X-Ruyi-Agent": f"hash-{t}"}
                    session = None
                    for request in requests_of(trace):
                        body: dict[str, Any] = {"model": "unknown-model", "messages": request, "stream": False}
                        if trace.tools and kind == "openai":
                            body["tools"] = trace.tools
                        async with http.post(f"http://127.0.0.1:{port}{path}", json=body, headers=agent) as resp:
                            await resp.read()
                            session = resp.headers.get("X-Ruyi-Session")
                            tier = resp.headers.get("X-Ruyi-Tier"), resp.headers.get("X-Ruyi-Tokens-After")
                        sent = fake.received[-1].body
                        out.append(digest([json.loads(sent) if SEMANTIC else sent.decode(), tier]))
                    async with http.get(f"http://127.0.0.1:{port}/ruyi/v1/sessions/{session}/report", headers=agent) as resp:
                        report = await resp.json()
                    out.append(digest(stable(report.get("reports", report))))
        finally:
            await proxy.cleanup()
            await up.cleanup()
    return out


def scenarios(traces: list[Trace]) -> dict[str, Callable[[], list[str]]]:
    return {
        "offline-8k": lambda: offline(traces, 8_000),
        "offline-16k": lambda: offline(traces, 16_000),
        "offline-32k": lambda: offline(traces, 32_000),
        "offline-64k": lambda: offline(traces, 64_000),
        "offline-32k-economic-off": lambda: offline(traces, 32_000, **{"pruning.economic": False}),
        "offline-16k-every-2nd": lambda: offline(traces, 16_000, skip=2),
        "offline-32k-interleaved": lambda: interleaved(traces, 32_000),
        "http-openai-32k": lambda: asyncio.run(over_http(traces, "openai", 32_000)),
        "http-ollama-16k": lambda: asyncio.run(over_http(traces, "ollama", 16_000)),
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--save", help="write the per-request hashes to this JSON file")
    parser.add_argument("--compare", help="compare with hashes saved earlier; exit 1 on a difference")
    parser.add_argument("--only", help="comma-separated scenario names")
    parser.add_argument("--semantic", action="store_true", help="hash forwarded bodies as parsed JSON, not bytes")
    args = parser.parse_args(argv)
    global SEMANTIC
    SEMANTIC = args.semantic
    configure_logging("error", "console", [])
    where = TRACES
    if where is None:
        print("no public traces here (set RUYI_TRACE_DIR): nothing to hash", file=sys.stderr)
        return 0
    traces = load_traces(where)
    chosen = scenarios(traces)
    if args.only:
        chosen = {k: v for k, v in chosen.items() if k in args.only.split(",")}
    saved: Hashes = json.loads(Path(args.compare).read_text()) if args.compare else {}
    result: Hashes = {}
    differ = False
    for name, run in chosen.items():
        hashes = result[name] = run()
        line = f"{name:28} {len(hashes):5d} requests  {digest(hashes)}"
        if name in saved:
            first = next((i for i, (x, y) in enumerate(zip(saved[name], hashes)) if x != y), None)
            if first is None and len(saved[name]) == len(hashes):
                line += "  same"
            else:
                differ = True
                line += f"  DIFFERS from request {first if first is not None else min(len(hashes), len(saved[name]))}"
        print(line, flush=True)
    if args.save:
        Path(args.save).write_text(json.dumps(result, indent=0))
    return 1 if differ else 0


if __name__ == "__main__":
    sys.exit(main())
