"""Agent sessions through Ruyi: record what real agent CLIs send, replay it through Ruyi, report the cadence numbers.

Usage:
  ``python bench/savings/agents_sessions.py record [--agents claude,qwen,opencode,codex]``: run each pinned CLI (``make agents``)
  straight against the agents suite's scripted model (no Ruyi) and save the bodies it sent, compactly (each request as
  its change from the previous one), under tests/agents/recordings/<agent>.json.
  ``python bench/savings/agents_sessions.py [--window-scale 1.0] [--json]``: replay every recording through a Ruyi on a real
  socket (the same small window as the suite) and report, per agent, over the main conversation's requests: archives,
  requests at or above the prune tier after the first archive (``X-Ruyi-Tier`` of what was forwarded; target ≤ 1 in 5),
  and the prefix-cache hit rate of what was forwarded, computed as bench/savings.py does (tokens of each request equal
  to the start of the previous one, over the previous one's tokens; target ≥ 0.90), beside the agent's own bodies sent
  unchanged.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import tempfile
from pathlib import Path
from typing import Any

if __package__ in (None, ""):  # run as `python bench/savings/agents_sessions.py`
    sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

import aiohttp
from aiohttp import web

from proxy.http.app import make_app
from proxy.http.exposure import server_options
from proxy.replay.metrics import cached_prefix
from proxy.replay.run import Cl100kCounter
from proxy.rewrite.steps import default_steps
from tests.agents.scripted import SUBAGENT, Scripted, chat_is_subagent, is_subagent
from tests.agents.scripted import make_app as scripted_app
from tests.conftest import config_for

RECORDINGS = Path(__file__).resolve().parents[2] / "tests" / "agents" / "recordings"
KEPT_HEADERS = ("anthropic-beta", "anthropic-version", "x-claude-code-session-id", "session_id", "session-id", "user-agent",
                "openai-beta", "x-stainless-lang")
"""The request headers a recording keeps (never a key: no Authorization, no x-api-key)."""
AGENTS: dict[str, dict[str, Any]] = {
    "claude": {"module": "tests.agents.test_claude_code", "kind": "anthropic", "path": "/v1/messages", "models": {"claude-*": 64_000}},
    "qwen": {"module": "tests.agents.test_qwen_code", "kind": "openai", "path": "/v1/chat/completions", "models": {"qwen*": 32_000}},
    "opencode": {"module": "tests.agents.test_opencode", "kind": "openai", "path": "/v1/chat/completions", "models": {"qwen*": 22_000}},
    "codex": {"module": "tests.agents.test_codex", "kind": "openai", "path": "/v1/responses", "models": {"gpt-5*": 16_000}},
}


def history_key(body: dict[str, Any]) -> str:
    return "input" if isinstance(body.get("input"), list) else "messages"


def shared_prefix(a: list[Any], b: list[Any]) -> int:
    n = 0
    while n < min(len(a), len(b)) and a[n] == b[n]:
        n += 1
    return n


def compact(bodies: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Each body as its change from an earlier one (``base``, the one it shares most with; -1: none): how many history
    items it shares with it, its new items, its changed fields. Side requests and sub-agents interleave with the main
    conversation, so the base is not always the previous body."""
    out: list[dict[str, Any]] = []
    for n, body in enumerate(bodies):
        key = history_key(body)
        items = body.get(key) or []

        def size(d: dict[str, Any]) -> int:
            return len(json.dumps(d))

        best: dict[str, Any] = {"base": -1, "key": key, "shared": 0, "new": items, "set": {k: v for k, v in body.items() if k != key}, "unset": []}
        for m, prev in enumerate(bodies[:n]):
            shared = shared_prefix(items, prev.get(key) or [])
            delta = {"base": m, "key": key, "shared": shared, "new": items[shared:],
                     "set": {k: v for k, v in body.items() if k != key and prev.get(k) != v},
                     "unset": [k for k in prev if k not in body and k != key]}
            if size(delta) < size(best):
                best = delta
        out.append(best)
    return out


def expand(deltas: list[dict[str, Any]]) -> list[dict[str, Any]]:
    bodies: list[dict[str, Any]] = []
    for d in deltas:
        prev = bodies[d["base"]] if d["base"] >= 0 else {}
        body = {k: v for k, v in prev.items() if k not in d["unset"] and k != d["key"]}
        body.update(d["set"])
        body[d["key"]] = (prev.get(d["key"]) or [])[: d["shared"]] + d["new"]
        bodies.append(body)
    return bodies


def scrub(text: str, paths: dict[str, str]) -> str:
    for real, shown in paths.items():
        text = text.replace(real, shown)
    return text


async def record_one(name: str) -> Path:
    spec = AGENTS[name]
    module = __import__(spec["module"], fromlist=["_"])
    scripted = Scripted()
    runner = web.AppRunner(scripted_app(scripted))
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = runner.addresses[0][1]
    url = f"http://127.0.0.1:{port}"
    try:
        with tempfile.TemporaryDirectory(prefix="ruyi-agent-") as tmp:
            work, home = Path(tmp) / "work", Path(tmp) / "home"
            work.mkdir()
            home.mkdir()
            (work / "notes.txt").write_text("one\ntwo\nthree\n")
            if name == "claude":
                code, output = await module.run_claude(url, work, home)
            elif name == "qwen":
                code, output = await module.run_qwen(url + "/v1", work, home)
            elif name == "opencode":
                code, output = await module.run_opencode(url + "/v1", work, home)
            else:
                code, output = await module.run_codex(url, work, home)
            paths = {str(work): "/tmp/agent/work", str(home): "/tmp/agent/home", tmp: "/tmp/agent", str(port): "PORT"}
    finally:
        await runner.cleanup()
    if code != 0:
        raise SystemExit(f"{name} failed ({code}): {output[-2000:]}")
    headers = [{k.lower(): v for k, v in h.items() if k.lower() in KEPT_HEADERS} for h in scripted.headers]
    version = json.loads((Path(__file__).resolve().parents[2] / "tests" / "agents" / "package.json").read_text())["dependencies"]  # noqa: ASYNC240 - a bench, once
    assert expand(compact(scripted.received)) == scripted.received
    doc = {"agent": name, "versions": version, "kind": spec["kind"], "path": spec["path"], "models": spec["models"],
           "headers": headers, "requests": compact(scripted.received)}
    RECORDINGS.mkdir(parents=True, exist_ok=True)
    out = RECORDINGS / f"{name}.json"
    out.write_text(scrub(json.dumps(doc, separators=(",", ":")), paths) + "\n")
    return out


COUNTER = Cl100kCounter()  # cl100k_base offline (litellm's bundled files), as bench/savings.py


def tokens(value: Any) -> int:
    return COUNTER.text(json.dumps(value, sort_keys=True))


def cache_hit(bodies: list[dict[str, Any]]) -> float:
    """Tokens equal to the start of the previous request over the previous request's tokens, as bench/savings.py."""
    cached = previous = 0
    prev_canon: list[str] | None = None
    prev_head: Any = None
    prev_size = 0
    for body in bodies:
        key = history_key(body)
        items = body.get(key) or []
        head = {k: body.get(k) for k in ("system", "instructions", "tools")}
        canon = [json.dumps(m, sort_keys=True) for m in items]
        counts = [tokens(m) for m in items]
        head_tokens = tokens(head)
        if prev_canon is not None:
            cached += cached_prefix(prev_canon, canon, counts, head_tokens) if head == prev_head else 0
            previous += prev_size
        prev_canon, prev_head, prev_size = canon, head, head_tokens + sum(counts)
    return cached / previous if previous else 1.0


def is_main(body: dict[str, Any]) -> bool:
    if not body.get("tools"):
        return False
    if isinstance(body.get("input"), list):
        return True
    return not (chat_is_subagent(body) or is_subagent(body) or SUBAGENT in json.dumps((body.get("messages") or [{}])[0]))


async def replay_one(path: Path, scale: float) -> dict[str, Any]:
    doc = json.loads(path.read_text())  # noqa: ASYNC240 - a bench, before its replay starts
    bodies = expand(doc["requests"])
    scripted = Scripted()
    runners: list[web.AppRunner] = []

    async def serve(app: web.Application, **options: Any) -> str:
        runner = web.AppRunner(app, **options)
        await runner.setup()
        await web.TCPSite(runner, "127.0.0.1", 0).start()
        runners.append(runner)
        return f"http://127.0.0.1:{runner.addresses[0][1]}"

    rows: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory(prefix="ruyi-replay-") as tmp:
        try:
            model = await serve(scripted_app(scripted))
            models = {k: int(v * scale) for k, v in doc["models"].items()}
            cfg = config_for(model + ("/v1" if doc["kind"] == "openai" else ""), doc["kind"], window={"models": models},
                             store={"data_dir": str(Path(tmp) / "ruyi")})
            ruyi = await serve(make_app(cfg, default_steps(cfg), probe_upstream=False), **server_options(cfg))
            async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=120)) as http:
                for body, headers in zip(bodies, doc["headers"]):
                    sent = {**headers, "Authorization": "Bearer sk-agents-bench", "x-api-key": "sk-agents-bench", "Content-Type": "application/json"}
                    before = len(scripted.received)
                    async with http.post(ruyi + doc["path"], json=body, headers=sent) as resp:
                        await resp.read()
                        forwarded = scripted.received[before] if len(scripted.received) > before else body
                        rows.append({"main": is_main(body), "tier": resp.headers.get("X-Ruyi-Tier", ""),
                                     "archived": bool(resp.headers.get("X-Ruyi-Archived")), "sent": forwarded, "original": body,
                                     "window_source": resp.headers.get("X-Ruyi-Window-Source", "")})
                    await asyncio.sleep(0.05)  # a real agent's gap: Ruyi's background work between two requests
        finally:
            for runner in reversed(runners):
                await runner.cleanup()
    main = [r for r in rows if r["main"]]
    first = next((n for n, r in enumerate(main) if r["archived"] or "ruyi-archive" in json.dumps(r["sent"])), None)
    after = main[first + 1:] if first is not None else []
    hot = sum(1 for r in after if r["tier"] in ("prune", "archive"))
    return {"agent": doc["agent"], "requests": len(rows), "main": len(main), "archives": sum(r["archived"] for r in main),
            "first_archive": first, "after_first": len(after), "at_prune_or_above": hot,
            "hot_share": hot / len(after) if after else 0.0,
            "cache_hit": cache_hit([r["sent"] for r in main]), "cache_hit_unchanged": cache_hit([r["original"] for r in main]),
            "window_sources": sorted({r["window_source"] for r in main})}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("command", nargs="?", default="replay", choices=("record", "replay"))
    parser.add_argument("--agents", default=",".join(AGENTS))
    parser.add_argument("--window-scale", type=float, default=1.0)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    names = [a for a in args.agents.split(",") if a]
    if args.command == "record":
        for name in names:
            print(asyncio.run(record_one(name)))
        return
    results = [asyncio.run(replay_one(RECORDINGS / f"{n}.json", args.window_scale)) for n in names if (RECORDINGS / f"{n}.json").exists()]
    if args.json:
        print(json.dumps(results, indent=2))
        return
    print(f"{'agent':<10} {'reqs':>4} {'main':>4} {'archives':>8} {'1st':>4} {'hot after 1st':>14} {'cache hit':>9} {'unchanged':>9}  window")
    for r in results:
        print(f"{r['agent']:<10} {r['requests']:>4} {r['main']:>4} {r['archives']:>8} {str(r['first_archive']):>4} "
              f"{r['at_prune_or_above']:>6}/{r['after_first']:<3} {r['hot_share']:>4.0%} {r['cache_hit']:>9.3f} {r['cache_hit_unchanged']:>9.3f}"
              f"  {','.join(r['window_sources'])}")


if __name__ == "__main__":
    main()
