"""bench/savings/cost_parts.py: Ruyi's cost with caching in parts that add up to the replay's own cost ratio."""

from __future__ import annotations

import pytest

from bench.savings.cost_parts import MINIMUM, PARTS, STEP, parts, token_rows
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


@needs_traces
def test_the_token_cache_counts_a_prefix_in_steps_and_keeps_the_text_before_a_change() -> None:
    assert TRACES is not None
    trace = next(t for t in load_traces(TRACES) if "pydicom-1458" in t.name)
    rows = token_rows(trace, "Ruyi", 8000, Cl100kCounter())
    assert rows[0][1] == 0 and all(cached % STEP == 0 and cached <= sent for sent, cached, _ in rows)
    assert all(cached == 0 or cached >= MINIMUM for _, cached, _ in rows)
    archiving = [i for i, (_, _, archived) in enumerate(rows) if archived]
    assert archiving and all(rows[i][1] > 0 for i in archiving)  # the system text and the task stay cached at an archive
