"""Where Ruyi's cost with caching goes, as shares of sending everything's: the cached prompt read each request, the
new tokens every request brings (which sending everything pays too), and the misses Ruyi's own rewrites cause (the
requests that make an archive; other rewrites: prune batches, a truncation).

Usage: ``python bench/savings/cost_parts.py [--traces DIR] [--windows 16000,32000] [--token-cache]``. The same replay
and prices as ``bench/savings/savings.py`` (an input token 1, a cached one 0.1; the cache is the previous request's
common prefix of whole messages). A request's new tokens are what sending everything left uncached at that request;
what Ruyi left uncached beyond that is put down to the request's rewrite: the archive it made, else the rest.

``--token-cache``: the cache as OpenAI's works instead, for both strategies: the common prefix in tokens, into the
first message that differs (its common leading text), counted in steps of 128 tokens from 1,024 on (none below).
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Sequence
from pathlib import Path

if __package__ in (None, ""):  # run as `python bench/savings/cost_parts.py`: make `bench` importable
    sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from bench.savings.savings import STRATEGIES
from bench.traces import load_traces
from proxy.replay.metrics import archive_in, canonical, request_ends
from proxy.replay.run import Cl100kCounter, Prices, Trace, replay

PARTS = ("cached prompt", "new tokens", "misses at archives", "misses at other rewrites")


STEP, MINIMUM = 128, 1024
"""OpenAI's prompt cache: a prefix of at least MINIMUM tokens, cached in steps of STEP."""


def token_rows(trace: Trace, strategy: str, window: int, count: Cl100kCounter) -> list[tuple[int, int, bool]]:
    """(tokens sent, tokens cached, made an archive) per request of ``trace`` through ``strategy``, the cache
    matching a prefix in tokens (``--token-cache``)."""
    rewrite, rows = STRATEGIES[strategy](window), []
    previous: list[str] | None = None
    archives = 0
    for end in request_ends(trace.messages):
        sent = rewrite(list(trace.messages[:end]), trace.tools)
        now, counted = [canonical(m) for m in sent], count(sent, trace.tools)
        cached = counted.tools if previous is not None else 0
        for before, this, tokens in zip(previous or (), now, counted.messages):
            if before != this:
                cached += min(tokens, count.text(os.path.commonprefix([before, this])))
                break
            cached += tokens
        cached = cached // STEP * STEP if cached >= MINIMUM else 0
        number = archive_in(sent)
        rows.append((counted.total, cached, number != archives and number > 0))
        archives, previous = number, now
    return rows


def parts(traces: Sequence[Trace], window: int, token_cache: bool = False) -> tuple[dict[str, float], dict[str, int]]:
    """Ruyi's cost at ``window`` in parts, each a share of sending everything's cost; and how many requests missed
    more than their new tokens, per cause."""
    count, prices = Cl100kCounter(), Prices()
    total = dict.fromkeys(PARTS, 0.0)
    events = {"archives": 0, "other rewrites": 0}
    base = 0.0
    for t in traces:
        if token_cache:
            everything, ruyi = token_rows(t, "send everything", window, count), token_rows(t, "Ruyi", window, count)
        else:
            everything = [
                (r.tokens_sent, r.cached, r.archived)
                for r in replay(t.messages, t.tools, STRATEGIES["send everything"](window), window, count, prices).rows
            ]
            ruyi = [
                (r.tokens_sent, r.cached, r.archived) for r in replay(t.messages, t.tools, STRATEGIES["Ruyi"](window), window, count, prices).rows
            ]
        base += sum(prices.cost(sent, cached) for sent, cached, _ in everything)
        for (e_sent, e_cached, _), (sent, cached, archived) in zip(everything, ruyi, strict=True):
            new, missed = e_sent - e_cached, sent - cached
            total["cached prompt"] += prices.cache_read * cached
            total["new tokens"] += prices.input * min(missed, new)
            extra = prices.input * max(0, missed - new)
            cause = "archives" if archived else "other rewrites"
            total[f"misses at {cause}"] += extra
            events[cause] += extra > 0
    return {k: v / base for k, v in total.items()}, events


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--traces", type=Path, default=None)
    parser.add_argument("--windows", default="16000,32000")
    parser.add_argument("--token-cache", action="store_true", help="the cache as OpenAI's: a prefix in tokens, 128 at a time from 1,024")
    args = parser.parse_args(argv)
    traces = load_traces(args.traces)
    if not traces:
        print("no traces found (set RUYI_TRACE_DIR or pass --traces)", file=sys.stderr)
        return 1
    print("| window | Ruyi's cost | " + " | ".join(PARTS) + " | requests missing more than their new tokens |")
    print("|---|---:|" + "---:|" * len(PARTS) + "---|")
    for window in (int(w) for w in args.windows.split(",")):
        shares, events = parts(traces, window, args.token_cache)
        cells = " | ".join(f"{shares[p]:.3f}×" for p in PARTS)
        print(f"| {window // 1000}k | {sum(shares.values()):.3f}× | {cells} | {events['archives']} archiving, {events['other rewrites']} other |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
