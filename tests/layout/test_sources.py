"""Project rules and knowledge cards through the proxy, per agent; a malformed card, a missing workspace, an unreadable
AGENTS.md and a broken memory each leave the request going through."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import aiohttp
from structlog.testing import capture_logs

from proxy import appkeys
from tests.api.test_anchors_api import call
from tests.conftest import MakeProxy, base_url
from tests.fake_upstream import FakeUpstream
from tests.layout.test_step import TASK, chat, conversation, remember
from tests.memory.cards.test_index import card


def project(tmp_path: Path, name: str, rule: str) -> Path:
    root = tmp_path / name
    (root / "pkg").mkdir(parents=True)
    (root / "AGENTS.md").write_text(f"# Rules\n{rule}\n", encoding="utf-8")
    (root / "pkg" / "AGENTS.md").write_text("Nested: run the package's own tests.\n", encoding="utf-8")
    card(root / "cards", "cache.md", "CacheStore eviction", ["CacheStore", "LRU"], body="CacheStore.evict keeps the newest 100 entries.")
    card(root / "cards", "css.md", "Styling", ["css"], body="flexbox")
    return root


def agents(*roots: tuple[str, Path]) -> dict[str, Any]:
    return {name: {"workspace_root": str(root), "cards_dir": "cards"} for name, root in roots}


async def test_rules_in_the_stable_part_and_cards_in_the_block_each_agent_its_own(make_proxy: MakeProxy, fake: FakeUpstream, tmp_path: Path) -> None:
    a, b = project(tmp_path, "a", "Use tabs in project A."), project(tmp_path, "b", "Use spaces in project B.")
    proxy = await make_proxy(agents=agents(("pa", a), ("pb", b)))
    await chat(proxy, conversation(0), agent="pa")
    msgs = fake.last().json["messages"]
    system, newest = msgs[0]["content"], msgs[-1]["content"]
    assert "## Project rules" in system and system.index("Use tabs in project A.") < system.index("Nested: run the package's own tests.")
    assert "project B" not in system
    assert newest.startswith(TASK + "\n\n<ruyi-context>") and "### CacheStore eviction" in newest and "Styling" not in newest
    await chat(proxy, conversation(1), agent="pa")
    again = fake.last().json["messages"]
    assert again[0]["content"] == system and again[1]["content"] == TASK  # the stable part kept, request 1's block gone
    await chat(proxy, conversation(0), agent="pb")
    other = fake.last().json["messages"][0]["content"]
    assert "Use spaces in project B." in other and "project A" not in other


async def test_a_malformed_card_is_skipped_and_the_others_still_go_in(make_proxy: MakeProxy, fake: FakeUpstream, tmp_path: Path) -> None:
    root = project(tmp_path, "a", "Use tabs.")
    (root / "cards" / "broken.md").write_text("---\ntitle: [unclosed\n---\nCacheStore body\n", encoding="utf-8")
    (root / "cards" / "binary.md").write_bytes(b"\xff\xfe\x00CacheStore")
    proxy = await make_proxy(agents=agents(("pa", root)))
    resp = await chat(proxy, conversation(0), agent="pa")
    assert resp.status == 200 and "### CacheStore eviction" in fake.last().json["messages"][-1]["content"]


async def test_a_missing_workspace_and_an_unreadable_agents_md_leave_the_request_going_through(
    make_proxy: MakeProxy, fake: FakeUpstream, tmp_path: Path
) -> None:
    unreadable = tmp_path / "u"
    unreadable.mkdir()
    (unreadable / "AGENTS.md").symlink_to(tmp_path / "nowhere.md")  # a dangling link: unreadable whoever runs the test
    (unreadable / "sub").mkdir()
    (unreadable / "sub" / "AGENTS.md").mkdir()  # a folder where a file should be
    proxy = await make_proxy(agents={"gone": {"workspace_root": str(tmp_path / "missing")}, "bad": {"workspace_root": str(unreadable)}})
    for agent in ("gone", "bad"):
        resp = await chat(proxy, conversation(0), agent=agent)
        assert resp.status == 200 and fake.last().json["messages"] == conversation(0)  # nothing to add: the client's own bytes


async def test_unreadable_memory_is_counted_and_the_rest_still_goes_in(make_proxy: MakeProxy, fake: FakeUpstream, tmp_path: Path) -> None:
    root = project(tmp_path, "a", "Use tabs.")
    proxy = await make_proxy(agents=agents(("pa", root)))
    await remember(proxy, agent="pa")
    proxy.app[appkeys.KEEPER].db.close()  # the agent's memory can no longer be read
    with capture_logs() as logs:
        resp = await chat(proxy, conversation(0), agent="pa")
    assert resp.status == 200
    system = fake.last().json["messages"][0]["content"]
    assert "Use tabs." in system and "Never commit secrets" not in system  # the rules without the memory
    failed = [e for e in logs if e["event"] == "layout_source_failed"]
    assert failed and "memory" in {e["source"] for e in failed}  # (the sub-agent check, reading the same store, fails too)
    done = [e for e in logs if e["event"] == "request_done"]
    assert "layout_memory" in done[-1]["failed_steps"]
    async with aiohttp.ClientSession() as http:
        status, stats = await call(http, "GET", base_url(proxy) + "/ruyi/v1/stats", agent="pa")
    assert status == 200 and stats["failed_open"]["layout_memory"] >= 1
