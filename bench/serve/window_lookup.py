"""What asking a server for a model's window costs a request, beside Ollama's /api/show, in one run.

One fake upstream (the test suite's, a real aiohttp server answering /api/show, /props, /v1/models,
/api/v0/models and /info) and three Ruyi apps in front of it, in one process: an Ollama route (a model's
first request waits for /api/show), an OpenAI-compatible route asking the server (a model's first request
waits for its lookup), and the same route with ``window.ask_server: false``. Per target: the median time of
a model's first request (a fresh model name each time) and of a later one (the answer remembered).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import aiohttp
from aiohttp import web

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from config.load import load_config
from proxy.http.app import make_app
from proxy.http.log import configure_logging
from proxy.rewrite.steps import default_steps
from tests.fake_upstream import FakeUpstream, make_fake_app

MESSAGES = [{"role": "user", "content": "hi"}]


async def serve(app: web.Application) -> tuple[web.AppRunner, str]:
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
    return runner, f"http://127.0.0.1:{port}"


def ruyi(upstream: str, kind: str, data_dir: str, **window: Any) -> web.Application:
    overrides = {
        "default_route.url": upstream + ("/v1" if kind == "openai" else ""),
        "default_route.kind": kind,
        "store.backend": "memory",
        "store.data_dir": data_dir,
        "logging.level": "warning",
    }
    overrides.update({f"window.{k}": v for k, v in window.items()})
    cfg = load_config(None, {}, overrides)
    return make_app(cfg, default_steps(cfg), probe_upstream=False)


async def one(http: aiohttp.ClientSession, url: str, kind: str, model: str) -> float:
    path, body = (
        ("/api/chat", {"model": model, "messages": MESSAGES, "stream": False})
        if kind == "ollama"
        else ("/v1/chat/completions", {"model": model, "messages": MESSAGES})
    )
    started = time.perf_counter()
    async with http.post(url + path, json=body) as resp:
        await resp.read()
        assert resp.status == 200, resp.status
    return (time.perf_counter() - started) * 1000


async def main(n: int, rounds: int) -> list[dict[str, Any]]:
    fake = FakeUpstream(props={"default_generation_settings": {"n_ctx": 8192}})
    upstream_runner, upstream = await serve(make_fake_app(fake))
    data_dir = tempfile.mkdtemp(prefix="ruyi-bench-")
    targets = {
        "ollama route, /api/show": ("ollama", ruyi(upstream, "ollama", data_dir)),
        "openai route, server asked": ("openai", ruyi(upstream, "openai", data_dir)),
        "openai route, ask_server: false": ("openai", ruyi(upstream, "openai", data_dir, ask_server=False)),
    }
    runners, urls = [upstream_runner], {}
    for name, (kind, app) in targets.items():
        runner, url = await serve(app)
        runners.append(runner)
        urls[name] = (kind, url)
    first: dict[str, list[float]] = {k: [] for k in targets}
    later: dict[str, list[float]] = {k: [] for k in targets}
    async with aiohttp.ClientSession() as http:
        for kind, url in urls.values():  # warm-up: tokenizers, connections
            await one(http, url, kind, "warm-up")
        for r in range(rounds):  # interleaved so drift hits every target alike
            for i in range(n):
                for name, (kind, url) in urls.items():
                    model = f"local-model-{r}-{i}"
                    first[name].append(await one(http, url, kind, model))
                    later[name].append(await one(http, url, kind, model))
    for runner in runners:
        await runner.cleanup()
    base = statistics.median(first["ollama route, /api/show"])
    return [
        {
            "target": name,
            "first_ms": round(statistics.median(first[name]), 3),
            "later_ms": round(statistics.median(later[name]), 3),
            "first_vs_show": round(statistics.median(first[name]) / base, 2),
        }
        for name in targets
    ]


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("-n", type=int, default=100, help="fresh models per target per round")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    os.environ.pop("RUYI_CONFIG", None)
    configure_logging("warning", "console")
    rows = asyncio.run(main(args.n, args.rounds))
    if args.json:
        print(json.dumps(rows, indent=2))
    else:
        print(f"{'target':34} {'first request':>14} {'later request':>14} {'first vs /api/show':>19}")
        for row in rows:
            print(f"{row['target']:34} {row['first_ms']:>11.2f} ms {row['later_ms']:>11.2f} ms {row['first_vs_show']:>18.2f}×")
