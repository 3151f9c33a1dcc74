"""The card index over real folders: re-read only what changed, malformed cards skipped with their file named, scoring order."""

from __future__ import annotations

import os
from pathlib import Path

from structlog.testing import capture_logs

from memory.cards.index import CardIndex


def card(folder: Path, name: str, title: str, tags: list[str] | None = None, body: str = "", relevance: float | None = None) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / name
    meta = (
        f"title: {title!r}\n"
        + (f"tags: {tags!r}\n" if tags is not None else "")
        + (f"relevance_score: {relevance}\n" if relevance is not None else "")
    )
    path.write_text(f"---\n{meta}---\n{body}\n", encoding="utf-8")
    return path


def touch_later(path: Path, text: str) -> None:
    """Rewrite a file and move its time on (a file system's clock may not tick between two quick writes)."""
    before = path.stat().st_mtime_ns
    path.write_text(text, encoding="utf-8")
    os.utime(path, ns=(before + 10_000_000, before + 10_000_000))


def test_title_and_tags_weigh_more_than_the_body(tmp_path: Path) -> None:
    card(tmp_path, "body.md", "Unrelated", body="sqlite sqlite sqlite WAL and sqlite again")
    card(tmp_path, "tag.md", "Storage notes", ["sqlite"])
    card(tmp_path, "title.md", "SQLite in WAL mode", ["storage"])
    card(tmp_path, "none.md", "Nothing to do with it", ["css"], body="flexbox")
    found = CardIndex([tmp_path]).search(["SQLite", "WAL"], 3)
    assert [c.path.name for c in found] == ["title.md", "tag.md", "body.md"]
    assert found[0].score > found[1].score > found[2].score > 0


def test_relevance_score_scales_and_the_limit_holds(tmp_path: Path) -> None:
    card(tmp_path, "a.md", "Redis cache", relevance=0.2)
    card(tmp_path, "b.md", "Redis cache", relevance=0.9)
    card(tmp_path, "c.md", "Redis cache")
    index = CardIndex([tmp_path])
    assert [c.path.name for c in index.search(["redis"], 2)] == ["c.md", "b.md"]
    assert index.search(["redis"], 0) == [] and index.search([], 3) == [] and index.search(["postgres"], 3) == []


def test_project_cards_come_before_global_ones_on_a_tie(tmp_path: Path) -> None:
    card(tmp_path / "global", "a.md", "Retry policy")
    card(tmp_path / "project", "z.md", "Retry policy")
    found = CardIndex([tmp_path / "project", tmp_path / "global"]).search(["retry"], 3)
    assert [(c.scope, c.path.name) for c in found] == [("project", "z.md"), ("global", "a.md")]


def test_compound_keywords_match_cards_spelled_otherwise(tmp_path: Path) -> None:
    card(tmp_path, "a.md", "How the card index works")
    assert [c.path.name for c in CardIndex([tmp_path]).search(["CardIndex"], 3)] == ["a.md"]
    assert CardIndex([tmp_path]).search(["api"], 3) == []  # a short word only as a whole word ("rapid" is not "api")


def test_files_are_read_again_only_when_they_change(tmp_path: Path) -> None:
    path = card(tmp_path, "a.md", "Alpha")
    card(tmp_path, "b.md", "Beta")
    index = CardIndex([tmp_path])
    assert [c.title for c in index.search(["alpha"], 3)] == ["Alpha"]
    assert index.reads == 2
    index.search(["alpha"], 3)
    assert index.reads == 2  # nothing changed: nothing read
    touch_later(path, "---\ntitle: Gamma\n---\n")
    assert index.search(["alpha"], 3) == [] and [c.title for c in index.search(["gamma"], 3)] == ["Gamma"]
    assert index.reads == 3
    card(tmp_path / "sub", "c.md", "Alpha again")  # a new file, in a sub-folder
    assert [c.title for c in index.search(["alpha"], 3)] == ["Alpha again"]
    path.unlink()
    assert [c.title for c in index.cards()] == ["Beta", "Alpha again"]


def test_with_recheck_seconds_the_folders_are_not_looked_at_more_often(tmp_path: Path) -> None:
    now = [100.0]
    index = CardIndex([tmp_path], recheck_seconds=5, clock=lambda: now[0])
    card(tmp_path, "a.md", "Alpha")
    assert len(index.cards()) == 1
    card(tmp_path, "b.md", "Alpha two")
    assert len(index.cards()) == 1
    now[0] += 5
    assert len(index.cards()) == 2


def test_a_malformed_card_is_skipped_with_a_warning_naming_its_file_once(tmp_path: Path) -> None:
    bad = tmp_path / "broken.md"
    bad.write_text("---\ntitle: [oops\n---\nbody\n")
    card(tmp_path, "good.md", "Good card")
    index = CardIndex([tmp_path])
    with capture_logs() as logs:
        assert [c.title for c in index.search(["good"], 3)] == ["Good card"]
        index.search(["good"], 3)
    warnings = [e for e in logs if e["event"] == "card_skipped"]
    assert len(warnings) == 1 and warnings[0]["path"] == str(bad) and "YAML" in warnings[0]["reason"]
    assert index.skipped == {bad: warnings[0]["reason"]}
    touch_later(bad, "---\ntitle: Fixed card\n---\n")
    assert [c.title for c in index.search(["fixed"], 3)] == ["Fixed card"] and index.skipped == {}


def test_missing_folders_hidden_files_and_other_files_are_no_cards(tmp_path: Path) -> None:
    card(tmp_path, ".hidden.md", "Hidden")
    card(tmp_path / ".git", "x.md", "Hidden too")
    (tmp_path / "notes.txt").write_text("---\ntitle: Text\n---\n")
    index = CardIndex([tmp_path / "missing", tmp_path])
    assert index.cards() == [] and index.search(["hidden"], 3) == []


def test_one_file_reached_through_two_folders_counts_once(tmp_path: Path) -> None:
    card(tmp_path / "cards" / "global", "a.md", "Shared")
    found = CardIndex([tmp_path / "cards", tmp_path / "cards" / "global"]).search(["shared"], 3)
    assert len(found) == 1 and found[0].scope == "project"


def test_the_index_scores_as_the_definition_does(tmp_path: Path) -> None:
    """The postings are a shortcut: every card's score equals ``score`` on it, for words, compounds, CJK and dotted terms."""
    from memory.cards.card import read_card
    from memory.cards.score import indexed, score, terms

    card(tmp_path, "a.md", "Card index internals", ["cards", "index"], "The CardIndex reads config.schema; 知识卡片 here. index index")
    card(tmp_path, "b.md", "SQLite WAL", ["sqlite"], "WAL mode; max_inject is 3", relevance=0.5)
    card(tmp_path, "c.md", "知识卡片的格式", [], "front matter")
    keywords = ["CardIndex", "config.schema", "知识卡片", "WAL", "max_inject", "index", "ruyi cards search"]
    found = CardIndex([tmp_path]).search(keywords, 10)
    wanted = terms(keywords)
    expected = {p.name: score(indexed(read_card(p)), wanted) for p in sorted(tmp_path.glob("*.md"))}
    assert {c.path.name: c.score for c in found} == {name: s for name, s in expected.items() if s > 0}
    assert len(found) == 3


def test_searches_from_many_threads_while_files_change_see_whole_cards(tmp_path: Path) -> None:
    from concurrent.futures import ThreadPoolExecutor

    paths = [card(tmp_path, f"c{i}.md", f"Topic {i}", ["shared"]) for i in range(20)]
    index = CardIndex([tmp_path])
    assert len(index.cards()) == 20  # known before they change: a card first read half-written has no whole version to keep

    def search(n: int) -> list[str]:
        return [c.title for c in index.search(["shared"], 50)]

    with ThreadPoolExecutor(8) as pool:
        running = [pool.submit(search, n) for n in range(200)]
        for i, path in enumerate(paths):
            touch_later(path, f"---\ntitle: Topic {i} v2\ntags: [shared]\n---\n")
        results = [f.result() for f in running]
    assert all(len(r) == 20 and all(t.startswith("Topic ") for t in r) for r in results)
    assert sorted(search(0)) == sorted(f"Topic {i} v2" for i in range(20))


def test_a_card_broken_just_now_keeps_its_last_version_until_it_settles(tmp_path: Path) -> None:
    path = card(tmp_path, "a.md", "Alpha")
    index = CardIndex([tmp_path])
    assert [c.title for c in index.cards()] == ["Alpha"]
    touch_later(path, "---\ntitle: [half writ")  # changed a moment ago: perhaps still being written
    assert [c.title for c in index.cards()] == ["Alpha"] and index.skipped == {}
    old = path.stat().st_mtime_ns - 60 * 10**9
    os.utime(path, ns=(old, old))  # the same bytes, changed a minute ago: it is broken
    with capture_logs() as logs:
        assert index.cards() == []
    assert [e["path"] for e in logs if e["event"] == "card_skipped"] == [str(path)]
