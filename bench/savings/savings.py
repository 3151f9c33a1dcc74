"""Savings benchmark: every public trace replayed at 8k, 16k and 32k windows, Ruyi beside the usual answers.

Usage: ``python bench/savings/savings.py [--traces DIR] [--windows 8000,16000,32000] [--only NAME,...] [--json]``.
Every strategy sees the same requests (see proxy/replay.py for the definitions of each column).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict
from pathlib import Path

if __package__ in (None, ""):  # run as `python bench/savings/savings.py`: make `bench` importable
    sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from bench.savings import baselines
from bench.traces import TRACES, load_traces
from config.load import load_config
from conversation.task import head_end
from proxy.know.tokens import TokenCounter
from proxy.replay.metrics import request_ends
from proxy.replay.offline import OfflineRuyi
from proxy.replay.run import (
    Cl100kCounter,
    CountTokens,
    Prices,
    ReplayResult,
    Rewrite,
    StderrProgress,
    Trace,
    merge,
    replay,
)

RUYI_CONFIG = load_config(None, {k: v for k, v in os.environ.items() if k.startswith("RUYI_")})
RUYI_COUNTER = TokenCounter(RUYI_CONFIG.tokens)
WINDOWS = (8_000, 16_000, 32_000)
Factory = Callable[[int], Rewrite]
NOTES = (
    "Budget for the trimmers and trigger for clearing: window − reserve (15 %, at least 2,000 tokens). "
    "litellm's trim_messages runs unchanged but counts with our cached cl100k counter (its own is too slow)."
)


RUYI_RUNS: list[OfflineRuyi] = []
"""Every Ruyi made since the last ``refused()``: how many requests it would have refused."""


def make_ruyi_rewrite(window: int) -> Rewrite:
    """Ruyi with its default config, one fresh offline session per trace."""
    RUYI_RUNS.append(OfflineRuyi(RUYI_CONFIG, "gpt-4", window, RUYI_COUNTER))
    return RUYI_RUNS[-1]


def refused() -> int:
    """Requests the Ruyis made since the last call would have refused as unable to fit (``ruyi serve`` answers them
    with the provider's context-length error instead of forwarding them over the window)."""
    n = sum(r.unfit for r in RUYI_RUNS)
    RUYI_RUNS.clear()
    return n


STRATEGIES: dict[str, Factory] = {
    "send everything": baselines.send_everything,
    "litellm trim_messages": baselines.make_litellm_trim,
    "LangChain trim_messages (last, start on human)": baselines.make_langchain_trim,
    "Anthropic-style clearing (keep last 3)": baselines.make_clearing,
    "mask observations older than the last 10": baselines.make_masking,
    "summarize everything at 92 % (Codex / Claude Code style)": baselines.make_summarize_everything,
    "Ruyi": make_ruyi_rewrite,
}


def run_strategy(factory: Factory, traces: Sequence[Trace], window: int, count: CountTokens, label: str) -> ReplayResult:
    """Replay every trace with a fresh rewrite from ``factory``; totals over all their requests."""
    total = sum(len(request_ends(t.messages)) for t in traces)
    bar = StderrProgress(f"{window // 1000}k {label[:28]:<28}")
    results: list[ReplayResult] = []
    done = 0
    for t in traces:

        def progress(i: int, n: int, base: int = done) -> None:
            bar(base + i, total)

        results.append(replay(t.messages, t.tools, factory(window), window, count, Prices(), trace=t.name, progress=progress))
        done += len(results[-1].rows)
    bar(total, total)
    return merge(results)


def head_too_big(traces: Sequence[Trace], window: int, count: CountTokens) -> set[str]:
    """The traces whose system text, task and tools alone are over ``window``: no rewrite can fit their requests."""
    out = set()
    for t in traces:
        head = t.messages[: head_end(t.messages)]
        if count(head, t.tools).total > window:
            out.add(t.name)
    return out


def over_where_head_fits(result: ReplayResult, unfit: set[str]) -> tuple[int, int]:
    """(requests over the window, requests) among the traces whose head fits it."""
    rows = [r for r in result.rows if r.trace not in unfit]
    return sum(r.over_window for r in rows), len(rows)


def markdown_table(window: int, rows: dict[str, ReplayResult]) -> str:
    """One window's comparison as a markdown table."""
    head = (
        f"| at a {window // 1000}k window | tokens sent | saved | peak request | over the window | cache hit "
        "| cost with caching | orphans | needles | invalid args | archives |"
    )
    lines = [head, "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for name, result in rows.items():
        r = result.totals
        lines.append(
            f"| {name} | {r.tokens_sent:,} | {100 * r.saved:.1f} % | {r.peak:,} | {r.over_window} / {r.requests} "
            f"| {100 * r.cache_hit_rate:.1f} % | {r.cost_ratio:.2f}× | {r.orphans} | {100 * r.needles_kept:.1f} % "
            f"| {r.invalid_args} | {r.archives} |"
        )
    return "\n".join(lines)


def side_by_side(results: dict[int, dict[str, ReplayResult]]) -> str:
    """Every window at once: per strategy, requests over the window, cost with caching, cache hit, needles, saved."""
    windows = list(results)
    head = "| strategy | " + " | ".join(f"{w // 1000}k: over · cost · cache · needles · saved" for w in windows) + " |"
    lines = [head, "|---|" + "---|" * len(windows)]
    for name in next(iter(results.values())):
        cells = []
        for w in windows:
            t = results[w][name].totals
            cells.append(
                f"{t.over_window} · {t.cost_ratio:.2f}× · {100 * t.cache_hit_rate:.1f} % · {100 * t.needles_kept:.1f} % · {100 * t.saved:.1f} %"
            )
        lines.append(f"| {name} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--traces", type=Path, default=TRACES, help="folder of trace files")
    parser.add_argument("--windows", default=",".join(map(str, WINDOWS)), help="comma-separated windows in tokens")
    parser.add_argument("--only", default="", help="comma-separated substrings of strategy names to run")
    parser.add_argument("--json", action="store_true", help="print JSON totals instead of markdown tables")
    args = parser.parse_args(argv)
    traces = load_traces(args.traces)
    wanted = [s.strip().lower() for s in args.only.split(",") if s.strip()]
    chosen = {n: f for n, f in STRATEGIES.items() if not wanted or any(w in n.lower() for w in wanted)}
    count = Cl100kCounter()
    report: dict[str, dict[str, object]] = {}
    everything: dict[int, dict[str, ReplayResult]] = {}
    for window in (int(w) for w in args.windows.split(",")):
        rows: dict[str, ReplayResult] = {}
        unfit = head_too_big(traces, window, count)
        refusals: dict[str, int] = {}
        for name, factory in chosen.items():
            started = time.perf_counter()
            rows[name] = run_strategy(factory, traces, window, count, name)
            seconds = time.perf_counter() - started
            refusals[name] = refused()
            report.setdefault(str(window), {})[name] = asdict(rows[name].totals) | {
                "seconds": round(seconds, 2),
                "over_where_head_fits": over_where_head_fits(rows[name], unfit)[0],
                "refused": refusals[name],
            }
            print(f"{window // 1000}k {name}: {seconds:.1f} s", file=sys.stderr)
        everything[window] = rows
        if not args.json:
            requests = len(next(iter(rows.values())).rows)
            fits = "; ".join(
                f"{name}: {over} / {n}" for name, (over, n) in ((name, over_where_head_fits(result, unfit)) for name, result in rows.items())
            )
            where = (
                (
                    f" Traces whose system text, task and tools alone are over the window: {', '.join(sorted(unfit))}; over the "
                    f"window where they fit: {fits}."
                )
                if unfit
                else ""
            )
            where += "".join(
                f" {name} would refuse {n} of the requests over the window as unable to fit (never sent)." for name, n in refusals.items() if n
            )
            print(f"{markdown_table(window, rows)}\n\n{len(traces)} traces, {requests} requests. {NOTES}{where}\n")
    if not args.json and len(everything) > 1:
        print(side_by_side(everything))
    if args.json:
        print(json.dumps(report, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
