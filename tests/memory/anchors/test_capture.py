"""Anchor definitions in assistant text: the line that opens with an id, its stated fields, what it lacks."""

from __future__ import annotations

from memory.anchors.capture import definitions


def test_a_defining_line_gives_its_id_title_and_stated_fields() -> None:
    [found] = definitions("Plan:\n[D004] Use SQLite for the default store — why: nothing to install; rollback: store.backend: memory\n")
    assert found.anchor_id == "D004" and found.title == "Use SQLite for the default store"
    assert found.fields == {"why": "nothing to install", "rollback": "store.backend: memory", "decision": "Use SQLite for the default store"}
    assert found.missing == ("alternatives", "impact", "verification")


def test_bullets_headings_and_chinese_labels_are_read() -> None:
    text = "- **[C002]** 所有输出必须脱敏 — 理由: 合规；影响: proxy/http/log.py\n## [CK001] API security checklist\n"
    c2, ck = definitions(text)
    assert (c2.anchor_id, c2.title, c2.fields["why"], c2.fields["impact"]) == ("C002", "所有输出必须脱敏", "合规", "proxy/http/log.py")
    assert ck.anchor_id == "CK001" and ck.title == "API security checklist"


def test_a_citation_or_a_code_block_is_not_a_definition() -> None:
    text = "As [D001] says, we use Ollama.\n```\n[D009] inside code\n```\nsee [C001]"
    assert definitions(text) == []


def test_the_same_line_hashes_the_same_whatever_its_spacing() -> None:
    (a,) = definitions("[D001] Use   Ollama")
    (b,) = definitions("  [D001] Use Ollama  ")
    assert a.line_hash == b.line_hash
