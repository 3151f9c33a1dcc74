"""A child's result: its importance (its own marker, else a rule) and the aggregation within a budget."""

from __future__ import annotations

from memory.forms.children import aggregate, importance


def test_the_childs_own_marker_wins_then_the_rule() -> None:
    assert importance("[LOW] found a security hole") == "LOW"
    assert importance("Importance: MEDIUM\nnotes") == "MEDIUM" and importance("重要性: 高 发现问题") == "HIGH"
    assert importance("the build failed on CI") == "HIGH" and importance("see docs/api.md") == "MEDIUM" and importance("all good") == "LOW"


def test_aggregation_puts_high_first_and_stays_within_the_budget() -> None:
    results = [
        {"child_id": f"c{i}", "importance": level, "text": f"{level} finding " + "x" * 300} for i, level in enumerate(("LOW", "MEDIUM", "HIGH"))
    ]
    out = aggregate(results, "compact")
    assert len(out["text"]) <= 500 and out["text"].splitlines()[0].startswith("- [H] HIGH")
    assert aggregate(results, "normal", budget=50)["left_out"] == 2
