"""``ruyi cards``: search, list, drafts, accept and reject, workspace, on the store's file directly and against a running Ruyi."""

from __future__ import annotations

import asyncio
import re
from pathlib import Path

import pytest

from memory.cards.card import read_card
from memory.cards.sqlite_drafts import CardDrafts
from memory.store.sqlite_database import Database
from proxy.cli import main
from tests.api.test_cards_api import archive_with_a_lesson, write
from tests.conftest import MakeProxy, base_url
from tests.longctx.test_archive import CONFIG


def printed(out: str) -> list[str]:
    """What the command printed, without the log lines (opening the store logs its migrations)."""
    return [line for line in out.splitlines() if not re.match(r"\d{4}-\d\d-\d\d \d", line)]


@pytest.fixture
def project(tmp_path: Path) -> tuple[Path, Path]:
    root = tmp_path / "project"
    write(root / "AGENTS.md", "Always run make check.")
    write(root / ".ruyi" / "knowledge-cards" / "wal.md", "---\ntitle: SQLite in WAL mode\ntags: [sqlite]\n---\nOne writer.\n")
    write(root / ".ruyi" / "knowledge-cards" / "retry.md", "---\ntitle: Retry policy\ntags: [http]\n---\nBack off on 429.\n")
    write(root / ".ruyi" / "knowledge-cards" / "bad.md", "no front matter\n")
    config = write(tmp_path / "ruyi.yaml", f"agents: {{proj: {{workspace_root: {root}}}}}\n")
    return root, config


def test_search_list_and_workspace_on_the_store_directly(project: tuple[Path, Path], capsys: pytest.CaptureFixture[str]) -> None:
    root, config = project
    mine = ["--agent", "proj", "--config", str(config)]
    assert main(["cards", "search", "SQLite", *mine]) == 0
    out, err = capsys.readouterr()
    assert printed(out) == [f"  8.00  SQLite in WAL mode  [sqlite]  {root / '.ruyi' / 'knowledge-cards' / 'wal.md'}"]
    assert f"skipped {root / '.ruyi' / 'knowledge-cards' / 'bad.md'}: no YAML front matter" in err
    assert main(["cards", "search", "nothing-like-it", *mine]) == 0 and "no card matches" in capsys.readouterr().err
    assert main(["cards", "list", *mine]) == 0
    assert [line.split("  ")[0] for line in printed(capsys.readouterr().out)] == ["Retry policy", "SQLite in WAL mode"]
    assert main(["cards", "list", "--agent", "other", "--config", str(config)]) == 0 and printed(capsys.readouterr().out) == []
    assert main(["cards", "workspace", *mine]) == 0
    out = capsys.readouterr().out
    assert f"workspace root: {root}" in out and "Always run make check." in out


def test_drafts_accepted_and_rejected_on_the_store_directly(project: tuple[Path, Path], data_dir: Path, capsys: pytest.CaptureFixture[str]) -> None:
    root, config = project
    db = Database(data_dir / "ruyi.db")
    CardDrafts(db).propose(
        "proj", "s1", [("k1", "make: ValueError in parse", ["make"], "## Problem\n…\n"), ("k2", "npm: ENOENT", ["npm"], "## Problem\n…\n")]
    )
    db.close()
    mine = ["--agent", "proj", "--config", str(config)]
    assert main(["cards", "drafts", *mine]) == 0
    assert [line.split() for line in printed(capsys.readouterr().out)] == [
        ["1", "proposed", "make:", "ValueError", "in", "parse"],
        ["2", "proposed", "npm:", "ENOENT"],
    ]
    assert main(["cards", "accept", "1", *mine]) == 0
    written = root / ".ruyi" / "knowledge-cards" / "make-valueerror-in-parse.md"
    assert printed(capsys.readouterr().out) == [f"draft 1 accepted: {written}"]
    assert read_card(written).source_agent == "proj"
    assert main(["cards", "reject", "2", *mine]) == 0 and main(["cards", "reject", "2", *mine]) == 1
    assert "was rejected already" in capsys.readouterr().err
    assert main(["cards", "accept", "1", "--agent", "other", "--config", str(config)]) == 1  # another agent has no draft 1
    assert main(["cards", "show", "2", *mine]) == 0 and printed(capsys.readouterr().out)[0] == "# npm: ENOENT  (rejected; tags: npm)"


async def test_against_a_running_ruyi(make_proxy: MakeProxy, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    proxy = await make_proxy(**CONFIG, agents={"a": {"workspace_root": str(tmp_path)}})
    await archive_with_a_lesson(proxy)
    server = ["--url", base_url(proxy), "--agent", "a"]

    async def ruyi(*argv: str) -> int:
        return await asyncio.to_thread(main, list(argv))

    assert await ruyi("cards", "drafts", "--status", "proposed", *server) == 0
    [line] = printed(capsys.readouterr().out)
    assert line.startswith("   1  proposed  ImportError") and "(pytest)" in line
    assert await ruyi("cards", "accept", "1", *server) == 0
    assert str(tmp_path / ".ruyi" / "knowledge-cards") in capsys.readouterr().out
    assert await ruyi("cards", "search", "ImportError", *server) == 0 and "ImportError: cannot import" in capsys.readouterr().out
    assert await ruyi("cards", "accept", "7", *server) == 1
