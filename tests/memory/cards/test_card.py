"""Card files: the seed's front matter read, malformed ones refused with the reason, rendering cut with a note, writing never over a file."""

from __future__ import annotations

import datetime as dt
from pathlib import Path

import pytest

from memory.cards.card import CardError, card_text, parse_card, read_card, slug, write_card

SEED_CARD = """---
title: "Python 类型注解最佳实践"
tags: ["python", "typing", "best-practice"]
created_at: "2026-02-04"
updated_at: 2026-02-05
source_agent: "organizer-001"
relevance_score: 0.95
---

## 核心原则

1. 返回值类型必须显式声明，即使为 `None`
"""


def test_the_seeds_card_is_read_with_every_field(tmp_path: Path) -> None:
    path = tmp_path / "typing.md"
    path.write_text(SEED_CARD, encoding="utf-8")
    card = read_card(path)
    assert card.title == "Python 类型注解最佳实践"
    assert card.tags == ("python", "typing", "best-practice")
    assert (card.created_at, card.updated_at) == ("2026-02-04", "2026-02-05")  # an unquoted YAML date as text too
    assert card.source_agent == "organizer-001" and card.relevance_score == 0.95
    assert card.body.startswith("## 核心原则") and card.path == path and card.scope == "project"


@pytest.mark.parametrize(
    ("text", "reason"),
    [
        ("no front matter here\n", "no YAML front matter"),
        ("---\ntitle: [unclosed\n---\nbody\n", "not valid YAML"),
        ("---\n- a list\n---\nbody\n", "mapping of fields"),
        ("---\ntags: [a]\n---\nbody\n", "needs a title"),
        ("---\ntitle: t\ntags: {a: 1}\n---\nbody\n", "tags must be a list"),
        ("---\ntitle: t\nrelevance_score: 7\n---\nbody\n", "relevance_score must be"),
        ("---\ntitle: t\ncreated_at: [1]\n---\nbody\n", "created_at must be"),
        ("---\ntitle: t\ncreated_at: 2026-13-45\n---\nbody\n", "cannot be read"),
        ("---\ntitle: t\ntags: &x [*x]\n---\nbody\n", "tags must be a list"),
        ("---\ntitle: !!python/object:os.system x\n---\nbody\n", "not valid YAML"),
    ],
)
def test_a_malformed_card_is_refused_saying_why(tmp_path: Path, text: str, reason: str) -> None:
    with pytest.raises(CardError, match=reason):
        parse_card(text, tmp_path / "x.md")


def test_a_file_that_is_not_utf8_or_too_big_is_not_a_card(tmp_path: Path) -> None:
    latin = tmp_path / "latin.md"
    latin.write_bytes(b"---\ntitle: caf\xe9\n---\n")
    with pytest.raises(CardError, match="UTF-8"):
        read_card(latin)
    big = tmp_path / "big.md"
    big.write_text("---\ntitle: big\n---\n" + "x" * 300_000)
    with pytest.raises(CardError, match="bytes"):
        read_card(big)


def test_tags_may_be_one_comma_separated_string(tmp_path: Path) -> None:
    assert parse_card("---\ntitle: t\ntags: sqlite, wal\n---\n", tmp_path / "t.md").tags == ("sqlite", "wal")


def test_render_names_the_card_and_cuts_a_long_body_with_a_note(tmp_path: Path) -> None:
    card = parse_card("---\ntitle: Long\ntags: [a, b]\n---\n" + "word " * 1000, tmp_path / "long.md")
    text = card.render(300)
    assert text.startswith("### Long\ntags: a, b · long.md\n")
    assert len(text) <= 301 and f"[… cut: the whole card is {tmp_path / 'long.md'}]" in text
    short = parse_card("---\ntitle: Short\n---\nAll of it.\n", tmp_path / "s.md").render()
    assert short == "### Short\ns.md\nAll of it.\n"


def test_a_written_card_reads_back_and_never_replaces_a_file(tmp_path: Path) -> None:
    text = card_text("Fix: ImportError in app.py", ["python", "import"], "## Problem\n…", "agent-a", dt.datetime(2026, 3, 1, tzinfo=dt.UTC))
    first = write_card(tmp_path / "cards", "Fix: ImportError in app.py", text)
    second = write_card(tmp_path / "cards", "Fix: ImportError in app.py", text.replace("…", "other"))
    assert first.name == "fix-importerror-in-app-py.md" and second.name == "fix-importerror-in-app-py-2.md"
    card = read_card(first)
    assert (card.title, card.tags, card.source_agent, card.created_at) == (
        "Fix: ImportError in app.py",
        ("python", "import"),
        "agent-a",
        "2026-03-01",
    )
    assert "…" in first.read_text() and "other" in second.read_text()


def test_slug_keeps_any_script_and_is_never_empty() -> None:
    assert slug("类型 注解") == "类型-注解"
    assert slug("!!!") == "card"
