"""``ruyi anchors`` and ``ruyi memo`` on the store's file directly and against a running Ruyi (``--url``; ``--server``, its old name, still works)."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest

from proxy.cli import main
from tests.conftest import MakeProxy, base_url
from tests.fake_upstream import FakeUpstream
from tests.keep.test_subagents import child, start_parent
from tests.rewrite.test_pruning import post

FIELDS = [
    "--field",
    "alternatives=Postgres",
    "--field",
    "why=nothing to install",
    "--field",
    "impact=memory/store",
    "--field",
    "verification=pytest",
    "--field",
    "rollback=store.backend: memory",
]


def test_anchors_on_the_store_directly(data_dir: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["anchors", "add", "--type", "D", "--title", "Use SQLite", "--field", "why=cheap"]) == 1
    assert "lacks alternatives, impact, verification, rollback" in capsys.readouterr().err
    assert main(["anchors", "add", "--type", "D", "--title", "Use SQLite", *FIELDS]) == 0
    assert main(["anchors", "add", "--type", "C", "--title", "Redact", "--pending", "--agent", "other"]) == 0
    capsys.readouterr()
    assert main(["anchors", "show", "D001", "--compact"]) == 0
    assert capsys.readouterr().out.splitlines() == [
        "[D001] Use SQLite",
        "- Why: nothing to install",
        "- Impact: memory/store",
        "- Rollback: store.backend: memory",
    ]
    assert main(["anchors", "obsolete", "D001"]) == 0 and main(["anchors", "list", "--json"]) == 0
    out = capsys.readouterr().out
    assert json.loads(out[out.index("{\n") :])["anchors"][0]["status"] == "obsolete"
    assert main(["anchors", "show", "C001"]) == 1  # another agent's
    assert main(["anchors", "export", "--agent", "other"]) == 0 and "## [C001] Redact" in capsys.readouterr().out


def test_anchors_and_memo_on_postgres_directly(pg_url: str, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setenv("RUYI_STORE__BACKEND", "postgres")
    monkeypatch.setenv("RUYI_STORE__URL", pg_url)
    assert main(["anchors", "add", "--type", "D", "--title", "Use PostgreSQL", *FIELDS]) == 0
    assert main(["memo", "add", "user", "prefers 中文"]) == 0
    capsys.readouterr()
    assert main(["anchors", "list"]) == 0 and "[D001] Use PostgreSQL" in capsys.readouterr().out
    assert main(["memo", "show"]) == 0 and "prefers 中文" in capsys.readouterr().out


def test_memo_on_the_store_directly(data_dir: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["memo", "add", "用户", "prefers short answers"]) == 0
    assert main(["memo", "set", "env", "fish shell", "Python 3.11"]) == 0
    assert main(["memo", "add", "todo", "x"]) == 1 and "self (自我感知)" in capsys.readouterr().err
    assert main(["memo", "rollback", "1"]) == 0 and main(["memo", "show"]) == 0
    out = capsys.readouterr().out
    assert "version 3" in out and "- prefers short answers" in out and "fish shell" not in out
    assert main(["memo", "rollback", "9"]) == 1
    assert main(["memo", "versions"]) == 0 and "rollback to 1" in capsys.readouterr().out


async def test_both_against_a_running_ruyi(make_proxy: MakeProxy, capsys: pytest.CaptureFixture[str]) -> None:
    proxy = await make_proxy(auth={"keys": [{"key": "key-a", "agent": "a"}]})
    server = ["--url", base_url(proxy), "--key", "key-a"]

    async def ruyi(*argv: str) -> int:
        return await asyncio.to_thread(main, list(argv))

    assert await ruyi("anchors", "add", "--type", "D", "--title", "Use SQLite", *FIELDS, *server) == 0
    assert await ruyi("memo", "add", "history", "chose SQLite per [D001]", *server) == 0
    capsys.readouterr()
    assert await ruyi("anchors", "list", *server) == 0 and "[D001] Use SQLite  (active)" in capsys.readouterr().out
    assert await ruyi("memo", "show", *server) == 0 and "- chose SQLite per [D001]" in capsys.readouterr().out
    assert await ruyi("anchors", "edit", "D001", "--status", "pending", *server) == 0
    assert await ruyi("anchors", "edit", "D001", "--status", "active", "--field", "why=", *server) == 1
    assert "lacks why" in capsys.readouterr().err
    assert await ruyi("anchors", "list", "--url", base_url(proxy), "--key", "wrong") == 1
    assert await ruyi("memo", "show", "--url", "http://127.0.0.1:9") == 1 and "cannot reach" in capsys.readouterr().err
    assert await ruyi("anchors", "list", "--server", base_url(proxy), "--key", "key-a") == 0  # the deprecated name
    out, err = capsys.readouterr()
    assert "[D001] Use SQLite" in out and "--server is deprecated, use --url" in err


async def test_session_show_prints_a_form_from_the_store_or_a_server(make_proxy: MakeProxy, capsys: pytest.CaptureFixture[str]) -> None:
    proxy = await make_proxy()
    sid = (await post(proxy, [{"role": "user", "content": "Write the release notes"}], headers={"X-Ruyi-Agent": "a"})).headers["X-Ruyi-Session"]
    capsys.readouterr()
    assert await asyncio.to_thread(main, ["session", "show", sid, "--form", "compact", "--url", base_url(proxy), "--agent", "a"]) == 0
    remote = capsys.readouterr().out
    assert "【Task】Write the release notes" in remote
    assert await asyncio.to_thread(main, ["session", "show", sid, "--agent", "a"]) == 0  # the store's file, beside the running Ruyi
    local = capsys.readouterr().out
    assert local.startswith("## 🔸 Compact context") and remote.endswith(local)
    assert await asyncio.to_thread(main, ["session", "show", "nope", "--agent", "a"]) == 1
    assert await asyncio.to_thread(main, ["session", "show", sid, "--agent", "b", "--url", base_url(proxy)]) == 1


async def test_memo_on_a_sub_agents_own_notebook(make_proxy: MakeProxy, fake: FakeUpstream, capsys: pytest.CaptureFixture[str]) -> None:
    proxy = await make_proxy()
    await start_parent(proxy, fake)
    kid = (await post(proxy, child(0), headers={"X-Ruyi-Agent": "a"})).headers["X-Ruyi-Session"]

    async def ruyi(*argv: str) -> int:
        return await asyncio.to_thread(main, [*argv, "--agent", "a"])

    assert await ruyi("memo", "add", "history", "the child's finding", "--session", kid, "--url", base_url(proxy)) == 0
    assert await ruyi("memo", "add", "env", "the child's tool", "--session", kid) == 0  # on the store's file beside the running Ruyi
    assert await ruyi("memo", "add", "user", "the agent's own") == 0
    capsys.readouterr()
    assert await ruyi("memo", "show", "--session", kid) == 0
    own = capsys.readouterr().out
    assert "the child's finding" in own and "the child's tool" in own and "the agent's own" not in own
    assert await ruyi("memo", "show", "--url", base_url(proxy)) == 0
    agents = capsys.readouterr().out
    assert "the agent's own" in agents and "the child's" not in agents
    assert await ruyi("memo", "show", "--session", "nope") == 1 and "no session 'nope'" in capsys.readouterr().err
    assert await ruyi("memo", "show", "--session", "nope", "--url", base_url(proxy)) == 1


async def test_the_store_and_a_running_ruyi_answer_the_same_json(make_proxy: MakeProxy, capsys: pytest.CaptureFixture[str]) -> None:
    proxy = await make_proxy()
    answer = await post(proxy, [{"role": "user", "content": "Write the release notes"}], headers={"X-Ruyi-Agent": "a"})
    sid = answer.headers["X-Ruyi-Session"]

    async def ruyi(*argv: str) -> Any:
        assert await asyncio.to_thread(main, [*argv, "--json", "--agent", "a"]) == 0, capsys.readouterr().err
        out = capsys.readouterr().out  # log lines may come first
        return json.JSONDecoder().raw_decode(out, out.index("{\n"))[0]

    remote = ("--url", base_url(proxy))
    await ruyi("anchors", "add", "--type", "D", "--title", "Use SQLite", *FIELDS, *remote)
    await ruyi("memo", "add", "user", "prefers short answers")  # on the store's file, beside the running Ruyi
    for argv in (
        ("anchors", "list"),
        ("anchors", "show", "D001"),
        ("memo", "show"),
        ("memo", "versions"),
        ("cards", "list"),
        ("cards", "drafts"),
        ("cards", "workspace"),
    ):
        local = await ruyi(*argv)
        assert local == await ruyi(*argv, *remote), argv
    assert local["agent_id"] == "a" and "rules" in local
    edited = await ruyi("anchors", "edit", "D001", "--title", "Use SQLite, one file")
    assert edited == await ruyi("anchors", "show", "D001", *remote) and edited["title"] == "Use SQLite, one file"
    forms = []
    for where in ((), remote):  # a session's form: the same text, its DCP line included
        assert await asyncio.to_thread(main, ["session", "show", sid, "--form", "expanded", "--agent", "a", *where]) == 0
        forms.append(capsys.readouterr().out)
    assert "- DCP: applied 0" in forms[1] and forms[1].endswith(forms[0])
