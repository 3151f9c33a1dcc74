"""Every real trace, and every request replayed from it, through every strategy: no orphans, protected
messages byte-identical, arguments still JSON, the same placeholder bytes for the same message."""

from __future__ import annotations

import copy
import json
from functools import cache
from pathlib import Path
from typing import Any

import pytest

from strategies.base import StrategyContext
from strategies.conversation import analyze
from strategies.pipeline import (
    STRATEGY_ORDER,
    PipelineOptions,
    apply_replacements,
    propose_all,
)
from tests.strategies.factories import count_tokens
from tests.strategies.test_properties import check
from tests.traces import trace_files

TRACES = trace_files()
pytestmark = pytest.mark.skipif(not TRACES, reason="no traces on this machine")


@cache
def cached_count(text: str) -> int:
    return count_tokens(text)


def context(protected_turns: int = 4) -> StrategyContext:
    return StrategyContext(count_tokens=cached_count, window_tokens=32000, remaining_tokens=8000, protected_turns=protected_turns)


def load(path: Path) -> list[dict[str, Any]]:
    messages: list[dict[str, Any]] = json.loads(path.read_text())["messages"]
    return messages


@pytest.mark.parametrize("path", TRACES, ids=[p.stem[:60] for p in TRACES])
def test_whole_trace_through_each_strategy_and_all(path: Path) -> None:
    messages = load(path)
    snapshot = copy.deepcopy(messages)
    ctx = context()
    protected = analyze(messages, ctx).protected
    for strategy_class in STRATEGY_ORDER:
        proposals = strategy_class().propose(messages, ctx)
        check(messages, snapshot, apply_replacements(messages, proposals), protected)
    combined = propose_all(messages, ctx)
    check(messages, snapshot, apply_replacements(messages, combined), protected)
    assert not {r.index for r in combined} & protected


def requests(messages: list[dict[str, Any]]) -> list[list[dict[str, Any]]]:
    """What the agent sent: every prefix that ends just before an assistant message."""
    return [messages[:i] for i, m in enumerate(messages) if m["role"] == "assistant" and i > 0]


@pytest.mark.parametrize("path", TRACES, ids=[p.stem[:60] for p in TRACES])
def test_every_request_replayed(path: Path) -> None:
    messages = load(path)
    snapshot = copy.deepcopy(messages)
    ctx = context()
    seen: dict[tuple[int, str, str], str] = {}
    for request in requests(messages):
        protected = analyze(request, ctx).protected
        replacements = propose_all(request, ctx, PipelineOptions())
        check(request, snapshot[: len(request)], apply_replacements(request, replacements), protected)
        for r in replacements:
            if r.strategy != "truncation":
                assert seen.setdefault((r.index, r.target, r.reason), r.new_text) == r.new_text


def test_the_traces_give_every_strategy_work() -> None:
    totals: dict[str, int] = {}
    for path in TRACES:
        for r in propose_all(load(path), context()):
            totals[r.strategy] = totals.get(r.strategy, 0) + r.tokens_saved
    assert {"dedup", "supersede", "purge_errors"} <= set(totals)
