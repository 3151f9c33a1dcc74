"""bench/savings/cost_parts.py: Ruyi's cost with caching in parts that add up to the replay's own cost ratio."""

from __future__ import annotations

import pytest

from bench.savings.cost_parts import PARTS, parts
from bench.savings.savings import STRATEGIES
from bench.traces import load_traces
from proxy.replay.run import Cl100kCounter, Prices, merge, replay
from tests.traces import TRACES, needs_traces


@needs_traces
def test_the_parts_add_up_to_the_cost_ratio_and_archives_cost_misses() -> None:
    assert TRACES is not None
    trace = next(t for t in load_traces(TRACES) if "pydicom-1458" in t.name)  # 25k tokens: archives at 8k
    shares, events = parts([trace], 8000)
    ruyi = merge([replay(trace.messages, trace.tools, STRATEGIES["Ruyi"](8000), 8000, Cl100kCounter(), Prices(), trace=trace.name)])
    assert sum(shares.values()) == pytest.approx(ruyi.totals.cost_ratio, abs=1e-6)
    assert set(shares) == set(PARTS) and all(v >= 0 for v in shares.values())
    assert events["archives"] >= 1 and shares["misses at archives"] > 0
