"""Where Ruyi's cost with caching goes, as shares of sending everything's: the cached prompt read each request, the
new tokens every request brings (which sending everything pays too), and the misses Ruyi's own rewrites cause (the
requests that make an archive; other rewrites: prune batches, a truncation).

Usage: ``python bench/savings/cost_parts.py [--traces DIR] [--windows 16000,32000]``. The same replay and prices as
``bench/savings/savings.py`` (an input token 1, a cached one 0.1; the cache is the previous request's common prefix of
whole messages). A request's new tokens are what sending everything left uncached at that request; what Ruyi left
uncached beyond that is put down to the request's rewrite: the archive it made, else the rest.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path

if __package__ in (None, ""):  # run as `python bench/savings/cost_parts.py`: make `bench` importable
    sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from bench.savings.savings import STRATEGIES
from bench.traces import load_traces
from proxy.replay.run import Cl100kCounter, Prices, Trace, replay

PARTS = ("cached prompt", "new tokens", "misses at archives", "misses at other rewrites")


def parts(traces: Sequence[Trace], window: int) -> tuple[dict[str, float], dict[str, int]]:
    """Ruyi's cost at ``window`` in parts, each a share of sending everything's cost; and how many requests missed
    more than their new tokens, per cause."""
    count, prices = Cl100kCounter(), Prices()
    total = dict.fromkeys(PARTS, 0.0)
    events = {"archives": 0, "other rewrites": 0}
    base = 0.0
    for t in traces:
        everything = replay(t.messages, t.tools, STRATEGIES["send everything"](window), window, count, prices, trace=t.name)
        ruyi = replay(t.messages, t.tools, STRATEGIES["Ruyi"](window), window, count, prices, trace=t.name)
        base += sum(r.cost for r in everything.rows)
        for e, r in zip(everything.rows, ruyi.rows, strict=True):
            new, missed = e.tokens_sent - e.cached, r.tokens_sent - r.cached
            total["cached prompt"] += prices.cache_read * r.cached
            total["new tokens"] += prices.input * min(missed, new)
            extra = prices.input * max(0, missed - new)
            cause = "archives" if r.archived else "other rewrites"
            total[f"misses at {cause}"] += extra
            events[cause] += extra > 0
    return {k: v / base for k, v in total.items()}, events


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--traces", type=Path, default=None)
    parser.add_argument("--windows", default="16000,32000")
    args = parser.parse_args(argv)
    traces = load_traces(args.traces)
    if not traces:
        print("no traces found (set RUYI_TRACE_DIR or pass --traces)", file=sys.stderr)
        return 1
    print("| window | Ruyi's cost | " + " | ".join(PARTS) + " | requests missing more than their new tokens |")
    print("|---|---:|" + "---:|" * len(PARTS) + "---|")
    for window in (int(w) for w in args.windows.split(",")):
        shares, events = parts(traces, window)
        cells = " | ".join(f"{shares[p]:.3f}×" for p in PARTS)
        print(f"| {window // 1000}k | {sum(shares.values()):.3f}× | {cells} | {events['archives']} archiving, {events['other rewrites']} other |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
