"""Tests for bench/savings/savings.py: strategies run on the same requests and print one table per window."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from bench.savings import savings
from proxy.replay.run import Cl100kCounter, Trace
from tests.replay.conversations import TOOLS, conversation


def write_trace(folder: Path, name: str, steps: int) -> None:
    (folder / name).write_text(json.dumps({"model": "m", "messages": conversation(steps), "tools": TOOLS}))


def test_ruyi_factory_gives_a_fresh_rewrite_per_trace() -> None:
    messages = conversation(3)
    rewrite = savings.make_ruyi_rewrite(32_000)
    assert callable(rewrite) and isinstance(rewrite(messages, TOOLS), list)


def test_run_strategy_merges_every_trace(tmp_path: Path) -> None:
    write_trace(tmp_path, "a.json", 3)
    write_trace(tmp_path, "b.json", 5)
    (tmp_path / "INDEX.json").write_text("[]")
    traces = savings.load_traces(tmp_path)
    assert [t.name for t in traces] == ["a.json", "b.json"] and all(isinstance(t, Trace) for t in traces)
    result = savings.run_strategy(savings.STRATEGIES["send everything"], traces, 1_000, Cl100kCounter(), "x")
    assert len(result.rows) == 4 + 6 and {r.trace for r in result.rows} == {"a.json", "b.json"}


def test_main_prints_a_markdown_table_per_window(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    write_trace(tmp_path, "a.json", 14)
    assert savings.main(["--traces", str(tmp_path), "--windows", "1000,2000", "--only", "send,mask"]) == 0
    out = capsys.readouterr().out
    assert "| at a 1k window |" in out and "| at a 2k window |" in out
    assert "| send everything |" in out and "| mask observations older than the last 10 |" in out
    assert "1 traces, 15 requests." in out


def test_main_json_reports_totals(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    write_trace(tmp_path, "a.json", 4)
    savings.main(["--traces", str(tmp_path), "--windows", "32000", "--only", "send", "--json"])
    report = json.loads(capsys.readouterr().out)
    totals = report["32000"]["send everything"]
    assert totals["requests"] == 5 and totals["cost_ratio"] == pytest.approx(1.0)


def test_markdown_table_columns() -> None:
    head = savings.markdown_table(32_000, {}).splitlines()[0]
    for column in ("tokens sent", "peak request", "over the window", "cache hit", "cost with caching",
                   "orphans", "needles", "invalid args"):  # fmt: skip
        assert column in head
