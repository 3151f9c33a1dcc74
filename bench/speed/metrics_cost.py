"""What the metrics cost a request, alone: ``RequestMetrics.record`` with a pruned request's access facts, and one scrape.

Load on a shared machine moves end-to-end latency by more than this costs; timing the call itself says what the hot
path pays, in microseconds, beside the server CPU per request that bench/serve/overhead.py reports.

    .venv/bin/python bench/speed/metrics_cost.py            # -n calls per round, --rounds
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from prometheus_client import CollectorRegistry, generate_latest

from config.schema import Route
from proxy.observe.metrics import RequestMetrics, route_labels

DEFAULT = Route(url="http://127.0.0.1:11434/v1", kind="openai")
ROUTES = (
    Route(model="gpt-*", url="https://api.openai.com/v1", kind="openai"),
    Route(model="claude-*", url="https://api.anthropic.com", kind="anthropic"),
)
FACTS = {  # what the access event carries for a request that ran a batch
    "session": "8e30540f4bab296a",
    "tokens_before": 14397,
    "tokens_after": 4686,
    "tier": "archive",
    "window": 12000,
    "dcp": {
        "request": 2,
        "applied": True,
        "batch": "applied",
        "strategies": {"dedup": {"items": 5, "tokens_saved": 9711}},
        "in_force": {"items": 0, "tokens_saved": 0},
    },
}
QUIET = {"session": "8e30540f4bab296a", "tokens_before": 4000, "tokens_after": 4000, "tier": "normal", "dcp": {"batch": "none", "in_force_tokens": 0}}


def per_call_us(fn: object, n: int, rounds: int) -> float:
    best = []
    for _ in range(rounds):
        started = time.perf_counter()
        for _ in range(n):
            fn()  # type: ignore[operator]
        best.append((time.perf_counter() - started) / n * 1e6)
    return statistics.median(best)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("-n", type=int, default=100_000)
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    metrics = RequestMetrics(route_labels(DEFAULT, ROUTES))
    batch = per_call_us(lambda: metrics.record("/v1/chat/completions", ROUTES[0], "openai", 200, FACTS, 812.0, 2.4), args.n, args.rounds)
    quiet = per_call_us(lambda: metrics.record("/v1/chat/completions", DEFAULT, "openai", 200, QUIET, 812.0, 1.1), args.n, args.rounds)
    registry = CollectorRegistry(auto_describe=False)
    registry.register(metrics)
    scrape = per_call_us(lambda: generate_latest(registry), max(1, args.n // 1000), args.rounds)
    print(f"record, a request that ran a batch: {batch:.2f} µs")
    print(f"record, a request that decided nothing: {quiet:.2f} µs")
    print(f"scrape of the request tallies: {scrape:.0f} µs ({len(generate_latest(registry))} bytes)")


if __name__ == "__main__":
    main()
