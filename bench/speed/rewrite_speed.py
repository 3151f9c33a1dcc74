"""Time to rewrite a request of the longest public trace: warm (session known) and cold, beside litellm's trim."""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from bench.traces import load_traces, requests_of
from config.load import load_config
from proxy.know.tokens import TokenCounter, warm_up
from proxy.replay.offline import OfflineRuyi
from proxy.replay.run import Trace


def longest() -> Trace:
    traces = load_traces()
    return max(traces, key=lambda t: len(t.messages))


def fresh(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """A freshly parsed copy, as a request body would be."""
    copy: list[dict[str, Any]] = json.loads(json.dumps(messages))
    return copy


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--window", type=int, default=32000)
    parser.add_argument("--cold-runs", type=int, default=5)
    parser.add_argument("--litellm", action="store_true", help="also time litellm's trim_messages on the last request")
    args = parser.parse_args()
    warm_up()
    config = load_config(None, {})
    trace = longest()
    requests = list(requests_of(trace))
    ruyi = OfflineRuyi(config, "gpt-4", args.window, TokenCounter(config.tokens))
    warm: list[tuple[int, float, str]] = []
    for request in requests:
        body = fresh(request)
        started = time.perf_counter()
        ruyi(body, trace.tools)
        warm.append((len(request), (time.perf_counter() - started) * 1000, ruyi.outcomes[-1].report["batch"]))
    cold = []
    last = requests[-1]
    for _ in range(args.cold_runs):
        body = fresh(last)
        ruyi_cold = OfflineRuyi(config, "gpt-4", args.window, TokenCounter(config.tokens))
        started = time.perf_counter()
        ruyi_cold(body, trace.tools)
        cold.append((time.perf_counter() - started) * 1000)
    no_batch = [ms for _, ms, batch in warm[len(warm) // 2 :] if batch in ("none", "waiting")]
    print(f"trace {trace.name}: {len(trace.messages)} messages, {len(requests)} requests, window {args.window}\n")
    print("| measure | median ms | p90 ms | max ms |")
    print("|---|---:|---:|---:|")
    last_warm = [ms for end, ms, _ in warm if end >= len(last) - 10]
    for label, values in (
        ("warm, last requests (≈270 messages)", last_warm),
        ("warm, second half, no batch", no_batch),
        ("warm, every request", [ms for _, ms, _ in warm]),
        ("cold, last request", cold),
    ):
        if values:
            ordered = sorted(values)
            print(f"| {label} | {statistics.median(values):.2f} | {ordered[int(0.9 * (len(ordered) - 1))]:.2f} | {ordered[-1]:.2f} |")
    if args.litellm:
        import os

        os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")  # no network fetch at import
        from litellm.utils import trim_messages

        started = time.perf_counter()
        trim_messages(fresh(last), model="gpt-4", max_tokens=int(args.window * 0.85))
        print(f"| litellm trim_messages, last request | {(time.perf_counter() - started) * 1000:.0f} | | |")
    print("\nper request (messages, ms, batch) every 20th:")
    for end, ms, batch in warm[::20]:
        print(f"  {end:4d} {ms:7.2f}  {batch}")


if __name__ == "__main__":
    main()
