"""Agent sessions through Ruyi: record what real agent CLIs send, replay it through Ruyi, report the cadence numbers.

Usage:
  ``python bench/savings/agents_sessions.py record [--long] [--agents claude,qwen,opencode,codex]``: run each pinned CLI
  (``make agents``) straight against the agents suite's scripted model (no Ruyi) and save the bodies it sent, compactly
  (each request as its change from an earlier one), under tests/agents/recordings/<agent>.json; ``--long``: the long
  sessions (LONG) into <agent>.long.json.gz.
  ``python bench/savings/agents_sessions.py [--setups short,long] [--window-scale 1.0] [--json | --trace]``: replay the
  recordings through a Ruyi on a real socket (short: the suite's windows; long: LONG's) and report, per agent, over the
  main conversation's requests: archives, requests at or above the prune tier after the first archive (``X-Ruyi-Tier``
  of what was forwarded; target ≤ 1 in 5), the prefix-cache hit rate of what was forwarded, computed as
  bench/savings.py does (tokens of each request equal to the start of the previous one, over the previous one's
  tokens; target ≥ 0.90), also with Anthropic's ``cache_control`` markers not counted ("unmarked"), the tokens saved
  and the cost with caching, each beside the agent's own bodies sent unchanged (passthrough), and how many of those
  are over the usable window. ``--trace``: each main request as forwarded (tokens, usage, tier, archive, prefix kept).
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

from bench.savings.agent_recordings import AGENTS, RECORDINGS, expand, history_key, read_recording, record_one, shared_prefix
from config.load import load_config
from proxy.http.app import make_app
from proxy.http.exposure import server_options
from proxy.know.window import requested_output_tokens, reserve_for
from proxy.replay.metrics import cached_prefix
from proxy.replay.run import Cl100kCounter, Prices
from proxy.rewrite.steps import default_steps
from tests.agents.scripted import SUBAGENT, Scripted, chat_is_subagent, is_subagent
from tests.agents.scripted import make_app as scripted_app
from tests.conftest import config_for

PRICES = Prices()
WINDOW_OPTIONS = load_config(None).window
COUNTER = Cl100kCounter()  # cl100k_base offline (litellm's bundled files), as bench/savings.py


def tokens(value: Any) -> int:
    return COUNTER.text(json.dumps(value, sort_keys=True))


def unmarked(value: Any) -> Any:
    """``value`` without Anthropic's ``cache_control`` markers: where a breakpoint sits is not part of what is cached
    (Claude Code moves its marker to the newest message on every request, and the earlier prefix is still read)."""
    if isinstance(value, dict):
        return {k: unmarked(v) for k, v in value.items() if k != "cache_control"}
    if isinstance(value, list):
        return [unmarked(v) for v in value]
    return value


def prefix_cached(bodies: list[dict[str, Any]], markers: bool = True) -> list[tuple[int, int]]:
    """Each request's (tokens, tokens equal to the start of the previous request), as bench/savings.py counts them
    (``markers`` False: a moved ``cache_control`` marker is no change, as Anthropic's cache reads it)."""
    if not markers:
        bodies = [unmarked(b) for b in bodies]
    out: list[tuple[int, int]] = []
    prev_canon: list[str] | None = None
    prev_head: Any = None
    for body in bodies:
        key = history_key(body)
        items = body.get(key) or []
        head = {k: body.get(k) for k in ("system", "instructions", "tools")}
        canon = [json.dumps(m, sort_keys=True) for m in items]
        counts = [tokens(m) for m in items]
        head_tokens = tokens(head)
        cached = cached_prefix(prev_canon, canon, counts, head_tokens) if prev_canon is not None and head == prev_head else 0
        out.append((head_tokens + sum(counts), cached))
        prev_canon, prev_head = canon, head
    return out


def cache_hit(bodies: list[dict[str, Any]], markers: bool = True) -> float:
    """Tokens equal to the start of the previous request over the previous request's tokens, as bench/savings.py."""
    rows = prefix_cached(bodies, markers)
    previous = sum(t for t, _ in rows[:-1])
    return sum(c for _, c in rows[1:]) / previous if previous else 1.0


def cost(rows: list[tuple[int, int]], cache_read: float = PRICES.cache_read) -> float:
    """Input cost with caching, as bench/savings.py prices it: uncached tokens at 1, cached ones at ``cache_read``."""
    return sum(t - c + cache_read * c for t, c in rows)


def is_main(body: dict[str, Any]) -> bool:
    if not body.get("tools"):
        return False
    if isinstance(body.get("input"), list):
        return True
    return not (chat_is_subagent(body) or is_subagent(body) or SUBAGENT in json.dumps((body.get("messages") or [{}])[0]))


async def replay_one(path: Path, scale: float) -> dict[str, Any]:
    doc = read_recording(path)
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
            cfg = config_for(
                model + ("/v1" if doc["kind"] == "openai" else ""),
                doc["kind"],
                window={"models": models},
                store={"data_dir": str(Path(tmp) / "ruyi")},
            )
            ruyi = await serve(make_app(cfg, default_steps(cfg), probe_upstream=False), **server_options(cfg))
            async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=120)) as http:
                for body, headers in zip(bodies, doc["headers"]):
                    sent = {**headers, "Authorization": "Bearer sk-agents-bench", "x-api-key": "sk-agents-bench", "Content-Type": "application/json"}
                    before = len(scripted.received)
                    async with http.post(ruyi + doc["path"], json=body, headers=sent) as resp:
                        await resp.read()
                        forwarded = scripted.received[before] if len(scripted.received) > before else body
                        rows.append(
                            {
                                "main": is_main(body),
                                "tier": resp.headers.get("X-Ruyi-Tier", ""),
                                "before": int(resp.headers.get("X-Ruyi-Tokens-Before", 0) or 0),
                                "after": int(resp.headers.get("X-Ruyi-Tokens-After", 0) or 0),
                                "window": int(resp.headers.get("X-Ruyi-Window", 0) or 0),
                                "usable": usable(int(resp.headers.get("X-Ruyi-Window", 0) or 0), body),
                                "archived": bool(resp.headers.get("X-Ruyi-Archived")),
                                "sent": forwarded,
                                "original": body,
                                "window_source": resp.headers.get("X-Ruyi-Window-Source", ""),
                            }
                        )
                    await asyncio.sleep(0.05)  # a real agent's gap: Ruyi's background work between two requests
        finally:
            for runner in reversed(runners):
                await runner.cleanup()
    main = [r for r in rows if r["main"]]
    first = next((n for n, r in enumerate(main) if r["archived"] or "ruyi-archive" in json.dumps(r["sent"])), None)
    after = main[first + 1 :] if first is not None else []
    hot = sum(1 for r in after if r["tier"] in ("prune", "archive"))
    return {
        "agent": doc["agent"],
        "requests": len(rows),
        "main": len(main),
        "archives": sum(r["archived"] for r in main),
        "first_archive": first,
        "after_first": len(after),
        "at_prune_or_above": hot,
        "hot_share": hot / len(after) if after else 0.0,
        "cache_hit": cache_hit([r["sent"] for r in main]),
        "cache_hit_unchanged": cache_hit([r["original"] for r in main]),
        "cache_hit_unmarked": cache_hit([r["sent"] for r in main], False),
        "cache_hit_unmarked_unchanged": cache_hit([r["original"] for r in main], False),
        "over_window_unchanged": sum(1 for r in main if r["usable"] and r["before"] > r["usable"]),
        **savings(main),
        "losses": losses(main),
        "window_sources": sorted({r["window_source"] for r in main}),
        "window": max((r["window"] for r in main), default=0),
        "trace": trace(main),
    }


def usable(window: int, body: dict[str, Any]) -> int:
    """The window less the answer's reserve, as Ruyi computes it (0: no window said)."""
    return window - reserve_for(window, requested_output_tokens(body), WINDOW_OPTIONS) if window else 0


def savings(main: list[dict[str, Any]]) -> dict[str, Any]:
    """The main conversation's input through Ruyi beside passthrough (the agent's bodies sent unchanged): tokens sent,
    the share saved, and the cost with caching (bench/savings.py's prices), Ruyi's over passthrough's."""
    ruyi, unchanged = prefix_cached([r["sent"] for r in main]), prefix_cached([r["original"] for r in main])
    sent, original = sum(t for t, _ in ruyi), sum(t for t, _ in unchanged)
    return {
        "tokens_sent": sent,
        "tokens_unchanged": original,
        "saved": 1 - sent / original if original else 0.0,
        "cost": cost(ruyi),
        "cost_unchanged": cost(unchanged),
        "cost_ratio": cost(ruyi) / cost(unchanged) if unchanged else 1.0,
    }


def losses(main: list[dict[str, Any]]) -> dict[str, int]:
    """Tokens of the previous request not cached by the next, Ruyi's forwarded bodies and the agent's own side by side,
    by what moved the prefix: an archive, anything else Ruyi changed (a prune batch, a recall), the agent itself."""
    ruyi, own = prefix_cached([r["sent"] for r in main]), prefix_cached([r["original"] for r in main])
    out = {"archive": 0, "other": 0, "agent": 0}
    for n in range(1, len(main)):
        lost, lost_own = ruyi[n - 1][0] - ruyi[n][1], own[n - 1][0] - own[n][1]
        out["archive" if main[n]["archived"] else "other"] += max(0, lost)
        out["agent"] += max(0, lost_own)
    return out


def trace(main: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Each main request as forwarded: its tokens before and after Ruyi, its usage of the usable window, its tier,
    whether it archived, and how much of the previous forwarded request it starts with (what moved the prefix)."""
    out: list[dict[str, Any]] = []
    prev: dict[str, Any] | None = None
    for n, r in enumerate(main):
        sent = r["sent"]
        key = history_key(sent)
        items = sent.get(key) or []
        head = {k: sent.get(k) for k in ("system", "instructions", "tools")}
        usable = r["usable"]
        row = {
            "n": n,
            "before": r["before"],
            "after": r["after"],
            "usage": round(r["after"] / usable, 3) if usable else None,
            "tier": r["tier"],
            "archived": r["archived"],
            "items": len(items),
        }
        if prev is not None:
            pitems = prev.get(history_key(prev)) or []
            same_head = head == {k: prev.get(k) for k in ("system", "instructions", "tools")}
            row["kept"] = shared_prefix(pitems, items) if same_head else "head"
            row["of"] = len(pitems)
        out.append(row)
        prev = sent
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("command", nargs="?", default="replay", choices=("record", "replay"))
    parser.add_argument("--agents", default=",".join(AGENTS))
    parser.add_argument("--window-scale", type=float, default=1.0)
    parser.add_argument("--json", action="store_true")
    parser.add_argument("--setups", default="short,long", help="replay: short (the suite's sessions and windows), long (LONG)")
    parser.add_argument("--long", action="store_true", help="record: the long sessions (LONG) into <agent>.long.json.gz")
    parser.add_argument("--trace", action="store_true", help="each main request as forwarded: tokens, usage, tier, archive, prefix kept")
    args = parser.parse_args()
    names = [a for a in args.agents.split(",") if a]
    if args.command == "record":
        for name in names:
            print(asyncio.run(record_one(name, args.long)))
        return
    setups = [x for x in args.setups.split(",") if x]
    files = [(setup, RECORDINGS / (f"{n}.json" if setup == "short" else f"{n}.long.json.gz")) for setup in setups for n in names]
    results = [{"setup": setup, **asyncio.run(replay_one(path, args.window_scale))} for setup, path in files if path.exists()]
    if args.json:
        print(json.dumps([{k: v for k, v in r.items() if k != "trace"} for r in results], indent=2))
        return
    if args.trace:
        for r in results:
            print(r["setup"], r["agent"])
            for t in r["trace"]:
                print("  " + " ".join(f"{k}={v}" for k, v in t.items()))
    print(
        f"{'setup':<6} {'agent':<9} {'window':>7} {'main':>4} {'archives':>8} {'1st':>4} {'hot after 1st':>14} "
        f"{'cache hit':>9} {'unchanged':>9} {'unmarked':>15} {'saved':>6} {'cost':>6} {'over (unchanged)':>16}"
    )
    for r in results:
        print(
            f"{r['setup']:<6} {r['agent']:<9} {r['window']:>7} {r['main']:>4} {r['archives']:>8} {str(r['first_archive']):>4} "
            f"{r['at_prune_or_above']:>6}/{r['after_first']:<3} {r['hot_share']:>4.0%} {r['cache_hit']:>9.3f} {r['cache_hit_unchanged']:>9.3f}"
            f" {r['cache_hit_unmarked']:>7.3f}/{r['cache_hit_unmarked_unchanged']:.3f} {r['saved']:>6.1%} {r['cost_ratio']:>5.2f}x"
            f" {r['over_window_unchanged']:>9}/{r['main']}"
        )


if __name__ == "__main__":
    main()
