"""Project rules from real folders: nearest the root first, cached until a file or listing changes, cut with a note, never an error."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from structlog.testing import capture_logs

from memory.cards.rules import ProjectRules, Rules, project_rules


def write(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    return path


def later(path: Path, text: str) -> None:
    before = path.stat().st_mtime_ns
    path.write_text(text, encoding="utf-8")
    os.utime(path, ns=(before + 10_000_000, before + 10_000_000))


def test_files_nearest_the_root_come_first_and_other_names_only_when_configured(tmp_path: Path) -> None:
    write(tmp_path / "b" / "deeper" / "AGENTS.md", "deep rule")
    write(tmp_path / "a" / "AGENTS.md", "a rule")
    write(tmp_path / "AGENTS.md", "root rule")
    write(tmp_path / "CLAUDE.md", "claude rule")
    write(tmp_path / "node_modules" / "AGENTS.md", "a package's own")
    write(tmp_path / ".git" / "AGENTS.md", "hidden")
    rules = project_rules(tmp_path, ["AGENTS.md"], 10_000)
    assert rules.text == "<!-- AGENTS.md -->\nroot rule\n\n<!-- a/AGENTS.md -->\na rule\n\n<!-- b/deeper/AGENTS.md -->\ndeep rule"
    assert rules.files == (tmp_path / "AGENTS.md", tmp_path / "a" / "AGENTS.md", tmp_path / "b" / "deeper" / "AGENTS.md")
    assert not rules.cut
    both = project_rules(tmp_path, ["AGENTS.md", "CLAUDE.md"], 10_000)
    assert both.text.startswith("<!-- AGENTS.md -->\nroot rule\n\n<!-- CLAUDE.md -->\nclaude rule\n\n<!-- a/AGENTS.md -->")


def test_rules_over_the_limit_are_cut_with_a_note_naming_the_files(tmp_path: Path) -> None:
    write(tmp_path / "AGENTS.md", "rule line\n" * 200)
    rules = project_rules(tmp_path, ["AGENTS.md"], 500)
    assert rules.cut and len(rules.text) <= 500 and rules.chars > 500
    assert rules.text.endswith(f"[project rules cut: {rules.chars} characters, 500 allowed; the rest is in AGENTS.md]")
    assert rules.text.startswith("<!-- AGENTS.md -->\nrule line\n")


def test_the_cache_reads_again_only_when_a_file_or_a_folder_changes(tmp_path: Path) -> None:
    top = write(tmp_path / "AGENTS.md", "one")
    cache = ProjectRules()
    assert cache.read(tmp_path, ["AGENTS.md"], 1000).text.endswith("one")
    cache.read(tmp_path, ["AGENTS.md"], 1000)
    assert cache.reads == 1
    later(top, "two")
    assert cache.read(tmp_path, ["AGENTS.md"], 1000).text.endswith("two") and cache.reads == 2
    write(tmp_path / "pkg" / "AGENTS.md", "pkg rule")  # a new folder and file: the root's listing changed
    assert "pkg rule" in cache.read(tmp_path, ["AGENTS.md"], 1000).text and cache.reads == 3
    (tmp_path / "pkg" / "AGENTS.md").unlink()
    assert "pkg rule" not in cache.read(tmp_path, ["AGENTS.md"], 1000).text


def test_a_missing_root_gives_no_rules_and_a_warning(tmp_path: Path) -> None:
    with capture_logs() as logs:
        rules = ProjectRules().read(tmp_path / "gone", ["AGENTS.md"], 1000)
    assert rules.text == "" and rules.files == ()
    assert [e["event"] for e in logs] == ["project_rules_unreadable"] and "gone" in logs[0]["problem"]


@pytest.mark.skipif(os.geteuid() == 0, reason="root reads every file")
def test_an_unreadable_file_is_left_out_with_a_warning_once(tmp_path: Path) -> None:
    write(tmp_path / "AGENTS.md", "readable")
    secret = write(tmp_path / "sub" / "AGENTS.md", "unreadable")
    secret.chmod(0)
    cache = ProjectRules()
    try:
        with capture_logs() as logs:
            rules = cache.read(tmp_path, ["AGENTS.md"], 1000)
            cache.read(tmp_path, ["AGENTS.md"], 1000)
    finally:
        secret.chmod(0o644)
    assert rules.text == "<!-- AGENTS.md -->\nreadable" and rules.files == (tmp_path / "AGENTS.md",)
    warned = [e for e in logs if e["event"] == "project_rules_unreadable"]
    assert len(warned) == 1 and str(secret) in warned[0]["problem"]


def test_a_dangling_link_is_left_out_with_a_warning_and_read_once_it_resolves(tmp_path: Path) -> None:
    write(tmp_path / "AGENTS.md", "readable")
    (tmp_path / "sub").mkdir()
    (tmp_path / "sub" / "AGENTS.md").symlink_to(tmp_path / "elsewhere.md")
    cache = ProjectRules()
    with capture_logs() as logs:
        assert cache.read(tmp_path, ["AGENTS.md"], 1000).text == "<!-- AGENTS.md -->\nreadable"
        cache.read(tmp_path, ["AGENTS.md"], 1000)
    warned = [e for e in logs if e["event"] == "project_rules_unreadable"]
    assert len(warned) == 1 and str(tmp_path / "sub" / "AGENTS.md") in warned[0]["problem"] and cache.reads == 1
    write(tmp_path / "elsewhere.md", "now there")
    assert cache.read(tmp_path, ["AGENTS.md"], 1000).text.endswith("<!-- sub/AGENTS.md -->\nnow there")


def test_no_rule_files_gives_empty_rules(tmp_path: Path) -> None:
    assert project_rules(tmp_path, ["AGENTS.md"], 1000) == Rules()
