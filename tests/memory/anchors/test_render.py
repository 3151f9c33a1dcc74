"""The three renderings of an anchor: full ADR, compact, the anchors.md export."""

from __future__ import annotations

from memory.anchors.anchor import Anchor
from memory.anchors.render import compact, export, full

FIELDS = {
    "decision": "Use Ollama locally",
    "alternatives": "OpenAI API",
    "why": "cost, privacy",
    "impact": "src/llm/",
    "verification": "pytest tests/test_review.py",
    "rollback": "LLM_BACKEND=openai",
}


def test_full_form_has_every_required_section() -> None:
    text = full(Anchor("a", "D001", "Ollama as the local LLM", "active", FIELDS, created_at=0))
    assert text.startswith("## [D001] Ollama as the local LLM\n")
    for title in ("### Decision", "### Alternatives", "### Why", "### Impact", "### Verification", "### Rollback"):
        assert title in text
    assert "✅ active" in text


def test_compact_form_is_three_or_four_lines() -> None:
    lines = compact(Anchor("a", "D001", "Ollama as the local LLM", "active", FIELDS)).splitlines()
    assert lines == ["[D001] Ollama as the local LLM", "- Why: cost, privacy", "- Impact: src/llm/", "- Rollback: LLM_BACKEND=openai"]
    assert compact(Anchor("a", "C001", "Redact output", "pending", {})) == "[C001] Redact output (pending)"


def test_export_lists_active_first_then_each_in_full() -> None:
    text = export([Anchor("a", "C001", "Redact", "obsolete", {}), Anchor("a", "D002", "Use SQLite", "active", FIELDS)], "a")
    assert text.index("- [D002]") < text.index("- [C001]") and "## [D002] Use SQLite" in text and "❌ obsolete" in text
    assert "_(none yet)_" in export([], "a")
