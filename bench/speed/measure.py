"""Time to know a request (fingerprint + count tokens + resolve session + tier) on the longest public trace."""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
import timeit
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from bench.traces import trace_paths
from memory.chain import Fingerprinter
from memory.sessions import SessionRegistry
from proxy.know import tokens, window
from proxy.know.options import TierOptions, WindowOptions
from proxy.know.tiers import tier_for
from proxy.know.tokens import TokenCounter

Messages = list[dict[str, Any]]


def requests_of(messages: Messages) -> list[Messages]:
    """Every prefix ending just before an assistant message, then the whole trace."""
    cuts = [i for i, m in enumerate(messages) if m.get("role") == "assistant" and i > 0]
    return [messages[:i] for i in cuts] + [messages]


class Measurer:
    """One process's state: token cache and session registry."""

    def __init__(self, model: str, tools: list[Any] | None) -> None:
        self.model, self.tools = model, tools
        self.fingerprinter = Fingerprinter()
        self.counter = TokenCounter()
        self.registry = SessionRegistry()
        self.window_options = WindowOptions()
        self.tiers = TierOptions()

    def measure(self, messages: Messages, body: dict[str, Any]) -> tuple[float, float, float, int]:
        """Seconds spent fingerprinting, counting, and resolving + tiering; and the new messages."""
        t0 = time.perf_counter()
        chain = self.fingerprinter.chain(messages)
        t1 = time.perf_counter()
        counted = self.counter.count(self.model, messages, self.tools, chain)
        t2 = time.perf_counter()
        resolution = self.registry.resolve("bench", chain)
        win = window.window_for(self.model, self.window_options)
        budget = window.budget_for(win.tokens, window.requested_output_tokens(body), self.window_options)
        tier_for(budget.usage(counted.total), self.tiers)
        t3 = time.perf_counter()
        return t1 - t0, t2 - t1, t3 - t2, resolution.new_messages


def longest_trace() -> tuple[str, dict[str, Any]]:
    paths = trace_paths()
    loaded = {p.name: json.loads(p.read_text(encoding="utf-8")) for p in paths}
    name = max(loaded, key=lambda n: len(loaded[n]["messages"]))
    return name, loaded[name]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--repeat", type=int, default=7, help="runs per measurement (the median is shown)")
    parser.add_argument("--every", type=int, default=1, help="show every Nth request of the curve")
    args = parser.parse_args()

    name, trace = longest_trace()
    model, tools, messages = trace["model"], trace.get("tools"), trace["messages"]
    requests = requests_of(messages)
    body = {"model": model}

    t = time.perf_counter()
    tokens.warm_up([model])
    window.warm_up()
    start_up = time.perf_counter() - t

    # Each request is measured on a freshly parsed body, as the proxy sees it (parsing is not timed).
    wire = [json.dumps(r) for r in requests]

    def fresh(i: int) -> Messages:
        parsed: Messages = json.loads(wire[i])
        return parsed

    cold, warm = [], []
    curves: list[list[tuple[float, float, float, int]]] = []
    for _ in range(args.repeat):
        m = Measurer(model, tools)
        cold.append(sum(m.measure(fresh(-1), body)[:3]))
        m = Measurer(model, tools)
        curves.append([m.measure(fresh(i), body) for i in range(len(requests))])
        m = Measurer(model, tools)
        for i in range(len(requests) - 1):
            m.measure(fresh(i), body)
        warm.append(sum(m.measure(fresh(-1), body)[:3]))
    total_tokens = TokenCounter().count(model, messages, tools).total

    speed = min(timeit.repeat("sum(range(1000))", number=2000, repeat=5)) / 2000 * 1e6
    ms = 1000.0
    print(f"### Measuring a request — `{name}`\n")
    print(
        f"{len(messages)} messages, {total_tokens} tokens ({model}), {len(requests)} requests; "
        f"median of {args.repeat} runs; measure = fingerprint + count tokens + resolve session + tier. "
        f"Machine: `sum(range(1000))` takes {speed:.1f} µs here (a recent laptop: ≈10 µs).\n"
    )
    print("| case | time | target |")
    print("|---|---|---|")
    print(f"| cold: all {len(messages)} messages unseen | {statistics.median(cold) * ms:.2f} ms | < 60 ms |")
    print(f"| warm: previous request seen, {len(messages) - len(requests[-2])} new messages | {statistics.median(warm) * ms:.3f} ms | < 2 ms |")
    print(f"| start-up, once: tiktoken encoding + litellm model map | {start_up * ms:.0f} ms | — |")
    per_request = [[statistics.median(curve[i][k] for curve in curves) * 1e6 for k in range(3)] for i in range(len(requests))]
    half = len(requests) // 2
    first, second = per_request[1:half], per_request[half:]  # request 1 also pays for the tools schema
    sizes = [len(r) for r in requests]
    slope = statistics.linear_regression(sizes[1:], [p[0] for p in per_request[1:]]).slope
    print(
        f"\nFirst half vs second half of the trace (median µs): fingerprint "
        f"{statistics.median(p[0] for p in first):.0f} → {statistics.median(p[0] for p in second):.0f} "
        f"(+{slope:.2f} µs per message of history: a key per message, texts hashed, proves the prefix unchanged), "
        f"count {statistics.median(p[1] for p in first):.0f} → {statistics.median(p[1] for p in second):.0f}, "
        f"session + tier {statistics.median(p[2] for p in first):.0f} → {statistics.median(p[2] for p in second):.0f}."
    )
    print("\n#### Cost per request over the trace (warm state, replayed in order)\n")
    print("| request | messages | new messages | fingerprint µs | count µs | session + tier µs | total µs |")
    print("|---|---|---|---|---|---|---|")
    for i, r in enumerate(requests):
        if i % args.every and i != len(requests) - 1:
            continue
        fp, count, rest = per_request[i]
        new = curves[0][i][3]
        print(f"| {i + 1} | {len(r)} | {new} | {fp:.0f} | {count:.0f} | {rest:.0f} | {fp + count + rest:.0f} |")


if __name__ == "__main__":
    main()
