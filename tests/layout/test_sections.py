"""The sections as text: which anchors go in, budgets cut with a note, the seed's order, the per-request block and the delta."""

from __future__ import annotations

from memory.anchors.anchor import Anchor
from proxy.layout.sections import CLOSE, OPEN, Section, anchors_text, block, core, cut, full_system, relevant_anchors, reminder, terms
from proxy.layout.trailing import delta, newest_input, trailing_block

FIELDS = {"why": "keeps the cache warm", "impact": "proxy/layout", "rollback": "layout.mode: off"}


def anchor(anchor_id: str, title: str, status: str = "active", at: float = 0.0) -> Anchor:
    return Anchor("a", anchor_id, title, status, dict(FIELDS), created_at=at)


def test_constraints_always_then_the_anchors_the_session_is_about_most_shared_first() -> None:
    anchors = [
        anchor("D001", "Deploy with Docker compose"),
        anchor("C001", "Never commit secrets"),
        anchor("D002", "CacheStore evicts by LRU"),
        anchor("D003", "CacheStore keys are tuples", "obsolete"),
        anchor("D004", "Evict CacheStore entries by LRU order", at=5.0),
        anchor("C002", "Draft constraint", "pending"),
    ]
    words = terms(["Fix CacheStore.evict: the LRU order is wrong in tests/test_cache.py"])
    assert {"cachestore", "evict", "cachestore.evict", "lru", "tests/test_cache.py", "test_cache"} <= words and "the" not in words
    chosen = [a.anchor_id for a in relevant_anchors(anchors, words, 8)]
    assert chosen == ["C001", "D004", "D002"]  # never the obsolete, the pending, nor the unrelated one
    assert [a.anchor_id for a in relevant_anchors(anchors, words, 2)] == ["C001", "D004"]
    assert [a.anchor_id for a in relevant_anchors(anchors, terms(["warm"]), 8)] == ["C001"]  # one word of the fields: not enough


def test_budgets_cut_whole_anchors_and_text_at_a_line_with_a_note() -> None:
    anchors = [anchor(f"D00{i}", f"Decision number {i}") for i in range(1, 6)]
    one = len(anchors_text(anchors[:1], 10_000))
    assert anchors_text(anchors, one + 1).count("[D00") == 1
    text, was_cut = cut("\n".join(f"line {i}" for i in range(100)), 60)
    assert was_cut and len(text) <= 60 and text.endswith("[…cut by Ruyi to the layout budget]") and "line 0" in text
    assert cut("short", 60) == ("short", False)


def test_the_stable_block_and_the_seeds_order() -> None:
    sections = [Section("notebook", "[用户感知]\n- prefers small diffs"), Section("anchors", ""), Section("rules", "Use tabs.")]
    text = block(sections)
    assert text.startswith(OPEN) and text.endswith(CLOSE) and "## Anchors" not in text  # empty sections left out
    assert text.index("## Notebook") < text.index("## Project rules")
    assert block([Section("notebook", " ")]) == ""
    assert core("Rules.\n{client_system}\nBe brief.", "You are X.") == "Rules.\nYou are X.\nBe brief."
    assert core("Rules.", "You are X.") == "Rules.\n\nYou are X." and core("", "You are X.") == "You are X."
    full = full_system("Fix it.", "Rules.", sections)
    assert full.startswith("## 1. Task\nFix it.\n\n## 2. Core template\nRules.\n\n" + OPEN)
    assert reminder(False).startswith("⚠️ Yellow light") and "上下文还有空间" in reminder(True)


def test_the_per_request_block_and_the_delta() -> None:
    assert trailing_block({"metadata": "", "cards": ""}) == ""
    blk = trailing_block({"metadata": "- time: now", "delta": "+ notebook: x"})
    assert blk.startswith("<ruyi-context>\n") and blk.endswith("</ruyi-context>") and blk.index("## Metadata") < blk.index("## Memory changed")
    before, now = ["- a", "- b"], ["- b", "- c"]
    anchors = [anchor("D001", "Kept"), anchor("D002", "New one")]
    text = delta(before, now, ["D001", "D009"], anchors, 600)
    assert text.splitlines() == ["+ notebook: c", "- notebook (removed): a", "+ anchor [D002] New one", "- anchor [D009] is no longer in force"]
    assert delta(now, now, ["D001", "D002"], anchors, 600) == ""
    assert newest_input([{"role": "user"}, {"role": "assistant"}]) is None and newest_input([{"role": "tool"}]) == 0
