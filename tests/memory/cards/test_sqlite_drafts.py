"""Draft cards in a real SQLite file and in PostgreSQL: proposed once, never again once rejected, a failed file write changes nothing, agents apart."""

from __future__ import annotations

from pathlib import Path

import pytest

from memory.cards.sqlite_drafts import CardDrafts, Draft, DraftError
from memory.store.base import KeeperDatabase


@pytest.fixture
def drafts(keeper_database: KeeperDatabase) -> CardDrafts:
    """On both backends (SQLite, PostgreSQL)."""
    return CardDrafts(keeper_database, clock=lambda: 100.0, redact=lambda s: s.replace("sk-secret", "[REDACTED]"))


def test_a_draft_is_proposed_once_whatever_became_of_it(drafts: CardDrafts) -> None:
    [made] = drafts.propose("a", "s1", [("k1", "Lesson  one", ["x"], "body with sk-secret")])
    assert (made.draft_id, made.title, made.status, made.body) == (1, "Lesson one", "proposed", "body with [REDACTED]")
    assert drafts.propose("a", "s2", [("k1", "Lesson one", ["x"], "again")]) == []
    assert drafts.propose("a", "s2", [("k2", "Known card", [], "")], known_titles=["known  CARD"]) == []
    [other] = drafts.propose("b", "s9", [("k1", "Lesson one", ["x"], "b's")])
    assert other.draft_id == 1 and [d.body for d in drafts.list("b")] == ["b's"]


def test_rejected_is_never_proposed_again_and_judged_is_final(drafts: CardDrafts) -> None:
    drafts.propose("a", "s1", [("k1", "One", [], ""), ("k2", "Two", [], "")])
    assert drafts.reject("a", 1) is not None and drafts.reject("b", 2) is None
    with pytest.raises(DraftError, match="rejected already"):
        drafts.accept("a", 1, lambda d: Path("/nowhere"))
    assert [d.status for d in drafts.list("a")] == ["rejected", "proposed"] and [d.title for d in drafts.list("a", "proposed")] == ["Two"]


def test_accept_writes_in_its_transaction(drafts: CardDrafts, tmp_path: Path) -> None:
    drafts.propose("a", "s1", [("k1", "One", [], "")])

    def failing(draft: Draft) -> Path:
        raise OSError(28, "No space left on device")

    with pytest.raises(OSError):
        drafts.accept("a", 1, failing)
    assert drafts.get("a", 1).status == "proposed"  # type: ignore[union-attr]
    done = drafts.accept("a", 1, lambda d: tmp_path / f"{d.draft_id}.md")
    assert done is not None and (done.status, done.path) == ("accepted", str(tmp_path / "1.md"))
    assert drafts.get("a", 1) == done
