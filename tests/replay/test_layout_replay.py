"""``ruyi replay`` and the offline rewrite report what each layout section adds, per request and in total."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from config.load import load_config
from proxy.cli import main
from proxy.keep.keeper import Keeper
from proxy.keep.options import NotebookOptions
from proxy.replay.offline import OfflineRuyi
from proxy.replay.run import Cl100kCounter, Prices, replay
from tests.longctx.sessions import session


def test_ruyi_replay_shows_the_layouts_tokens_per_request(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "AGENTS.md").write_text("# Rules\nRun the tests after every change.\n", encoding="utf-8")
    config = tmp_path / "ruyi.yaml"
    config.write_text(f"workspace:\n  root: {tmp_path}\nlayout:\n  metadata: true\n", encoding="utf-8")
    trace = tmp_path / "t.json"
    trace.write_text(json.dumps({"model": "gpt-4o", "messages": session(3), "tools": None}))
    assert main(["replay", str(trace), "--window", "32000", "--config", str(config)]) == 0
    out = capsys.readouterr().out
    assert re.search(r"layout sections\s+rules \d+ · metadata \d+ tokens in all requests", out)
    assert main(["replay", str(trace), "--window", "32000", "--config", str(config), "--json"]) == 0
    rows = json.loads(capsys.readouterr().out)["requests"]
    assert all(r["layout"]["rules"] > 0 and r["layout"]["metadata"] > 0 for r in rows)


def test_an_offline_session_keeps_its_stable_part_and_counts_it_in_the_window() -> None:
    keeper = Keeper(None, NotebookOptions(), None)
    keeper.notebook.add("offline", "user", "prefers small diffs")
    ruyi = OfflineRuyi(load_config(None, {}, {}), "gpt-4o", 32000, keeper=keeper)
    result = replay(session(4), None, ruyi, 32000, Cl100kCounter(), Prices())
    first, *rest = result.rows
    assert all(r.layout == first.layout and r.layout["notebook"] > 0 for r in rest)
    added = {r.tokens_sent - r.tokens_original for r in result.rows}  # the section and its heading, the same every request
    assert len(added) == 1 and added.pop() > first.layout["notebook"]
    assert all(r.cached == r.previous for r in rest)  # the whole previous request is the cached prefix
    keeper.close()


def test_ruyi_replay_lays_requests_out_with_an_agents_memory_from_the_store(
    data_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    keeper = Keeper(data_dir / "ruyi.db", NotebookOptions(), None)
    keeper.notebook.add("project-a", "user", "prefers small diffs")
    keeper.close()
    capsys.readouterr()  # what making the store logged
    trace = tmp_path / "t.json"
    trace.write_text(json.dumps({"model": "gpt-4o", "messages": session(3), "tools": None}))
    assert main(["replay", str(trace), "--window", "32000", "--json", "--agent", "project-a"]) == 0
    rows = json.loads(capsys.readouterr().out)["requests"]
    assert all(r["layout"]["notebook"] > 0 for r in rows)
    assert main(["replay", str(trace), "--window", "32000", "--json", "--agent", "project-b"]) == 0  # another agent: nothing of a's
    assert all("notebook" not in r["layout"] for r in json.loads(capsys.readouterr().out)["requests"])
