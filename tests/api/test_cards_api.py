"""The cards API over real sockets: search, the workspace an agent gets, draft cards from an archive (accept writes the file,
reject is never proposed again), per-agent isolation, bad input."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import aiohttp

from memory.cards.card import read_card
from tests.api.test_anchors_api import call
from tests.api.test_archive_api import api
from tests.conftest import MakeProxy, base_url
from tests.longctx.sessions import session, turn
from tests.longctx.test_archive import CONFIG, post
from tests.summaries.test_organizer import fixed_run


def write(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    return path


def projects(tmp_path: Path) -> dict[str, Any]:
    """Two agents, each with its own project (rules and cards), and a global folder only alpha may use."""
    a, b = tmp_path / "a", tmp_path / "b"
    write(a / "AGENTS.md", "Run make check before committing.")
    write(b / "AGENTS.md", "B's own rules.")
    write(a / ".ruyi" / "knowledge-cards" / "wal.md", "---\ntitle: SQLite in WAL mode\ntags: [sqlite, storage]\n---\nOne writer, many readers.\n")
    write(a / ".ruyi" / "knowledge-cards" / "broken.md", "---\ntitle: [oops\n---\n")
    write(b / ".ruyi" / "knowledge-cards" / "b.md", "---\ntitle: SQLite for B\n---\nB only.\n")
    write(tmp_path / "global" / "g.md", "---\ntitle: Storage basics\ntags: [storage]\n---\nFor everyone.\n")
    return {
        "cards": {"global_dir": str(tmp_path / "global"), "recheck_seconds": 0},
        "agents": {"alpha": {"workspace_root": str(a)}, "beta": {"workspace_root": str(b), "global_cards": False}},
    }


async def test_search_finds_the_agents_own_cards_first_and_names_skipped_files(make_proxy: MakeProxy, tmp_path: Path) -> None:
    proxy = await make_proxy(**projects(tmp_path))
    url = base_url(proxy) + "/ruyi/v1/cards"
    async with aiohttp.ClientSession() as http:
        status, found = await call(http, "GET", url, params={"q": "SQLite storage"})
        assert status == 200 and found["keywords"] == ["SQLite", "storage"]
        assert [c["title"] for c in found["cards"]] == ["SQLite in WAL mode", "Storage basics"]
        assert found["cards"][0]["body"] == "One writer, many readers.\n" and found["cards"][0]["scope"] == "project"
        assert [s["path"] for s in found["skipped"]] == [str(tmp_path / "a" / ".ruyi" / "knowledge-cards" / "broken.md")]
        status, theirs = await call(http, "GET", url, agent="beta", params={"q": "SQLite storage"})
        assert [c["title"] for c in theirs["cards"]] == ["SQLite for B"] and theirs["skipped"] == []
        status, everything = await call(http, "GET", url)
        assert {c["title"] for c in everything["cards"]} == {"SQLite in WAL mode", "Storage basics"} and "body" not in everything["cards"][0]
        write(tmp_path / "a" / ".ruyi" / "knowledge-cards" / "new.md", "---\ntitle: WAL checkpoints\n---\n")
        status, again = await call(http, "GET", url, params={"q": "WAL"})
        assert [c["title"] for c in again["cards"]] == ["WAL checkpoints", "SQLite in WAL mode"]  # equal scores: file order (new.md, wal.md)
        assert (await call(http, "GET", url, params={"q": "x", "limit": "0"}))[0] == 400


async def test_the_workspace_says_what_each_agent_gets(make_proxy: MakeProxy, tmp_path: Path) -> None:
    proxy = await make_proxy(**projects(tmp_path))
    async with aiohttp.ClientSession() as http:
        status, ws = await call(http, "GET", base_url(proxy) + "/ruyi/v1/workspace")
        assert status == 200 and ws["workspace_root"] == str(tmp_path / "a")
        assert ws["rules"]["text"] == "<!-- AGENTS.md -->\nRun make check before committing." and ws["rules"]["cut"] is False
        assert ws["card_dirs"] == [str(tmp_path / "a" / ".ruyi" / "knowledge-cards"), str(tmp_path / "global")]
        status, theirs = await call(http, "GET", base_url(proxy) + "/ruyi/v1/workspace", agent="beta")
        assert theirs["rules"]["text"].endswith("B's own rules.") and theirs["card_dirs"] == [str(tmp_path / "b" / ".ruyi" / "knowledge-cards")]
        status, nobody = await call(http, "GET", base_url(proxy) + "/ruyi/v1/workspace", agent="gamma")
        assert nobody["workspace_root"] is None and nobody["rules"]["text"] == ""


async def archive_with_a_lesson(proxy: Any, task: str = "Fix the parser.") -> str:
    """A session whose archived turns hold a failing test run, an edit, and the same run passing."""
    client = session(8, task=task)
    client[2:2] = fixed_run()[1:]
    sid = (await post(proxy, client)).headers["X-Ruyi-Session"]
    assert (await api(proxy, "POST", f"/ruyi/v1/sessions/{sid}/archive"))[0] == 200
    client += turn(8)
    assert (await post(proxy, client)).headers["X-Ruyi-Archived"] == "1"
    return sid


async def test_an_archive_drafts_a_card_that_a_person_accepts_into_the_agents_folder(make_proxy: MakeProxy, tmp_path: Path) -> None:
    folder = tmp_path / "project" / "cards"
    proxy = await make_proxy(**CONFIG, agents={"a": {"workspace_root": str(tmp_path / "project"), "cards_dir": "cards"}})
    sid = await archive_with_a_lesson(proxy)
    url = base_url(proxy) + "/ruyi/v1/cards/drafts"
    async with aiohttp.ClientSession() as http:
        status, listed = await call(http, "GET", url, agent="a")
        [draft] = listed["drafts"]
        assert draft["status"] == "proposed" and draft["session_id"] == sid
        assert draft["title"].startswith("ImportError: cannot import name 'parse_config'") and "(pytest)" in draft["title"]
        assert not folder.exists()  # nothing is written until a person accepts
        assert (await call(http, "GET", url, agent="b"))[1]["drafts"] == []
        assert (await call(http, "POST", f"{url}/{draft['id']}/accept", agent="b"))[0] == 404
        status, accepted = await call(http, "POST", f"{url}/{draft['id']}/accept", agent="a")
        assert status == 200 and accepted["draft"]["status"] == "accepted"
        card = read_card(Path(accepted["draft"]["path"]))
        assert Path(accepted["draft"]["path"]).parent == folder and card.title == draft["title"] and card.source_agent == "a"
        assert "## What fixed it" in card.body
        status, err = await call(http, "POST", f"{url}/{draft['id']}/reject", agent="a")
        assert status == 409 and err["error"]["code"] == "draft_accepted"
        status, found = await call(http, "GET", base_url(proxy) + "/ruyi/v1/cards", agent="a", params={"q": "ImportError"})
        assert [c["title"] for c in found["cards"]] == [draft["title"]]


async def test_a_rejected_draft_is_never_proposed_again(make_proxy: MakeProxy) -> None:
    proxy = await make_proxy(**CONFIG)
    await archive_with_a_lesson(proxy)
    url = base_url(proxy) + "/ruyi/v1/cards/drafts"
    async with aiohttp.ClientSession() as http:
        [draft] = (await call(http, "GET", url, agent="a"))[1]["drafts"]
        status, rejected = await call(http, "POST", f"{url}/{draft['id']}/reject", agent="a")
        assert status == 200 and rejected["draft"]["status"] == "rejected" and rejected["draft"]["path"] is None
        await archive_with_a_lesson(proxy, "Another task.")  # another session, the same lesson
        assert [d["status"] for d in (await call(http, "GET", url, agent="a"))[1]["drafts"]] == ["rejected"]
        assert (await call(http, "GET", url + "?status=proposed", agent="a"))[1]["drafts"] == []
        assert (await call(http, "GET", url + "?status=maybe", agent="a"))[0] == 400
        assert (await call(http, "POST", f"{url}/x/accept", agent="a"))[0] == 400
        assert (await call(http, "POST", f"{url}/99/accept", agent="a"))[0] == 404


async def test_the_cards_api_is_protected_like_the_rest(make_proxy: MakeProxy, tmp_path: Path) -> None:
    settings = projects(tmp_path)
    proxy = await make_proxy(auth={"keys": [{"key": "key-a", "agent": "alpha"}]}, **settings)
    async with aiohttp.ClientSession() as http:
        for path in ("/ruyi/v1/cards?q=sqlite", "/ruyi/v1/cards/drafts", "/ruyi/v1/workspace"):
            assert (await call(http, "GET", base_url(proxy) + path, agent="beta"))[0] == 401
        status, ws = await call(http, "GET", base_url(proxy) + "/ruyi/v1/workspace", agent="beta", headers={"X-Ruyi-Key": "key-a"})
        assert status == 200 and ws["agent_id"] == "alpha/beta"  # the key decides: its sub-agent, in alpha's project
        assert ws["workspace_root"] == str(tmp_path / "a")
